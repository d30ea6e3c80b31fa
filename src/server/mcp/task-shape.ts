/**
 * A gateway task as a client sees it, whatever runs it (an upstream's task, tasks.ts, or a call
 * waiting in the approvals queue, rounds/queued-task.ts): the sealed id and what it carries, and
 * the task's fields in each era's shape (2025-11-25 `ttl`/`pollInterval`, 2026-07-28 `ttlMs`/
 * `pollIntervalMs`).
 */
import { ManifoldError } from '../../errors.js';
import { clipText, stripUnsafe } from '../../guards/text.js';
import { isObject } from '../../lib/json.js';
import { TASKS_EXTENSION } from '../../protocol/versions.js';
import type { TaskState } from '../../upstream/wire/tasks.js';
import type { Edge } from './edge.js';
import type { Exchange } from './exchange.js';

type Result = Record<string, unknown>;

/** What a gateway task id carries (sealed; integrity only, nothing in it is secret). */
export interface TaskRef {
  v: 1;
  /** Principal key. */
  p: string;
  /** Server, the upstream's task id (or the approval's id, with `q`), the exposed tool. */
  s: string;
  t: string;
  n: string;
  /** A legacy server's task lives with its session, on this instance: tasks/* elsewhere forward here. */
  i?: string;
  /** #52: the task is a call waiting in the approvals queue; `t` names its approval, in the store. */
  q?: 1;
}

/** Seals a task id with the gateway's task-id key (bound to the principal, the server and the tool). */
export async function sealTaskId(edge: Edge, ref: TaskRef): Promise<string> {
  return (await edge.gateway.taskIds).seal(ref);
}

export const unknownTask = () =>
  new ManifoldError('ERR_INVALID_PARAMS', 'Unknown task: no task with this taskId is yours');

/** Whether a modern client declared the tasks extension on this request. */
export function declaresTasks(ex: Exchange): boolean {
  const extensions = ex.clientCapabilities.extensions;
  return isObject(extensions) && isObject(extensions[TASKS_EXTENSION]);
}

/** The task fields every answer carries, with the gateway's id and bounded text. */
export function taskFields(edge: Edge, task: TaskState, taskId: string): Result {
  const now = new Date(edge.gateway.platform.now()).toISOString();
  const out: Result = {
    taskId,
    status: task.status,
    createdAt: task.createdAt ?? now,
    lastUpdatedAt: task.lastUpdatedAt ?? now,
    ttlMs: task.ttlMs,
  };
  if (task.pollIntervalMs !== undefined) out.pollIntervalMs = task.pollIntervalMs;
  if (task.statusMessage !== undefined)
    out.statusMessage = clipText(stripUnsafe(task.statusMessage), 1024).text;
  return out;
}

/** 2025-11-25's names for the same fields (`ttl`, `pollInterval`). */
export function legacyTask(fields: Result): Result {
  const { ttlMs, pollIntervalMs, ...rest } = fields;
  return { ...rest, ttl: ttlMs, ...(pollIntervalMs !== undefined ? { pollInterval: pollIntervalMs } : {}) };
}
