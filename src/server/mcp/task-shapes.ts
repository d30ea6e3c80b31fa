/** The task fields a client sees, in each era's names, with the gateway's id and bounded text. */
import { clipText, stripUnsafe } from '../../guards/text.js';
import type { TaskState } from '../../upstream/wire/tasks.js';

type Result = Record<string, unknown>;

/** An upstream's task error as relayed: its code, and its message cleaned and bounded. */
export function safeError(error: Result | undefined): Result {
  const code = typeof error?.code === 'number' ? error.code : -32603;
  const message =
    typeof error?.message === 'string' ? clipText(stripUnsafe(error.message), 1024).text : 'the task failed';
  return { code, message };
}

export function stripResultType(result: Result): Result {
  const { resultType: _t, ...rest } = result;
  return rest;
}

/** The task fields every answer carries, with the gateway's id and bounded text. */
export function taskFields(task: TaskState, taskId: string, now: string): Result {
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
