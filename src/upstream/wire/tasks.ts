/**
 * Tasks as they leave the upstream edge, whatever era the server speaks: the flat shape of the
 * 2026-07-28 tasks extension (SEP-2663: `taskId`, `status`, `ttlMs`, `pollIntervalMs`, and on
 * `tasks/get` the inlined `inputRequests`, `result` or `error`), with `resultType: "task"` on the
 * answer that creates one. A 2025-11-25 server's `CreateTaskResult` (`{ task: { ttl,
 * pollInterval } }`) and `Task` are read into it here; the downstream edge writes the client's.
 */

import { isObject } from '../../lib/json.js';
import { META } from '../../protocol/versions.js';

type Result = Record<string, unknown>;

export const TASK_STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** One task's state, era-neutral. `taskId` is the upstream's own. */
export interface TaskState {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt?: string;
  lastUpdatedAt?: string;
  ttlMs: number | null;
  pollIntervalMs?: number;
  inputRequests?: Result;
  result?: Result;
  error?: Result;
}

const int = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined;

/** A task in either shape (flat with `ttlMs`, or 2025's with `ttl`), or undefined when it is none. */
export function readTask(raw: unknown): TaskState | undefined {
  if (!isObject(raw) || typeof raw.taskId !== 'string' || raw.taskId.length === 0) return undefined;
  if (!(TASK_STATUSES as readonly unknown[]).includes(raw.status)) return undefined;
  const ttl = 'ttlMs' in raw ? raw.ttlMs : raw.ttl;
  const poll = 'pollIntervalMs' in raw ? raw.pollIntervalMs : raw.pollInterval;
  const task: TaskState = {
    taskId: raw.taskId,
    status: raw.status as TaskStatus,
    ttlMs: ttl === null ? null : (int(ttl) ?? null),
  };
  if (typeof raw.statusMessage === 'string') task.statusMessage = raw.statusMessage;
  if (typeof raw.createdAt === 'string') task.createdAt = raw.createdAt;
  if (typeof raw.lastUpdatedAt === 'string') task.lastUpdatedAt = raw.lastUpdatedAt;
  const p = int(poll);
  if (p !== undefined) task.pollIntervalMs = p;
  if (isObject(raw.inputRequests)) task.inputRequests = raw.inputRequests;
  if (isObject(raw.result)) task.result = raw.result;
  if (isObject(raw.error)) task.error = raw.error;
  return task;
}

/**
 * A 2025-11-25 server's answer to a task-augmented request, in the flat shape: its
 * `CreateTaskResult` (`{ task }`) becomes `{ resultType: "task", ...task }`. Anything else is the
 * request's own result and passes unchanged.
 */
export function fromLegacyCreate(result: Result): Result {
  const task = readTask(result.task);
  if (!task) return result;
  return { resultType: 'task', ...task };
}

/** The result a 2025-11-25 `tasks/result` answered with, without its related-task marker. */
export function withoutRelatedTask(result: Result): Result {
  const meta = result._meta;
  if (!isObject(meta) || !(META.relatedTask in meta)) return result;
  const { [META.relatedTask]: _r, ...rest } = meta;
  const out = { ...result };
  if (Object.keys(rest).length > 0) out._meta = rest;
  else delete out._meta;
  return out;
}
