/**
 * Tasks through the gateway: the 2026-07-28 tasks extension (SEP-2663: server-directed,
 * `resultType: "task"`, tasks/get, tasks/update, tasks/cancel) and 2025-11-25 task-augmented
 * requests (a `task` parameter, tasks/get, tasks/result, tasks/cancel), in each client's shape.
 *
 * - The client never sees an upstream's task id. It gets one the gateway seals (HMAC) around the
 *   server, the upstream's id, the exposed tool and the principal: any instance with the same
 *   secret can route it, a forged or foreign one fails like an unknown task (-32602), and a tool
 *   the principal may no longer see takes its tasks with it.
 * - Which pairs work: a 2026 client with any upstream that runs tasks (a 2025 server's tool whose
 *   `execution.taskSupport` is "required" is called as a task for it, and its input requests,
 *   which a 2025 server sends on `tasks/result`, are gathered here and shown on `tasks/get`); a
 *   2025 client with a 2025 server. A 2025 client that asks a 2026 server for a task, or a tool
 *   that does not run as one, gets -32601 saying so: never a silent synchronous call.
 * - There is no tasks/list: one upstream session serves many tenants, and the gateway does not
 *   keep a list of who made which task (spec 2025-11-25, "receivers that cannot identify
 *   requestors SHOULD NOT declare tasks.list").
 */
import type { CatalogEntry } from '../../aggregate/catalog.js';
import type { Sealer } from '../../auth/seal.js';
import { ManifoldError } from '../../errors.js';
import { guardToolResult } from '../../gateway/guardrails.js';
import { checkInputRequests, relayedCapabilities, upstreamResponses } from '../../guards/client-features.js';
import { clipText, stripUnsafe } from '../../guards/text.js';
import { isObject } from '../../lib/json.js';
import { rawResultMessage, resultMessage } from '../../protocol/jsonrpc.js';
import { META, TASKS_EXTENSION } from '../../protocol/versions.js';
import type { InputRequests, InputResponses } from '../../upstream/session.js';
import type { Upstream } from '../../upstream/upstream.js';
import { readTask, type TaskState } from '../../upstream/wire/tasks.js';
import type { Edge } from './edge.js';
import type { Exchange } from './exchange.js';
import { json, type Reply } from './http-in.js';
import { relayRequest, withTasks } from './relay/relay.js';
import { admitRequest, type RequestAudit } from './relay/requests.js';
import { queueTaskMethod } from './rounds/queued-task.js';
import { errorObject } from './task-pumps.js';
import {
  declaresTasks,
  legacyTask,
  sealTaskId,
  type TaskRef,
  taskFields,
  unknownTask,
} from './task-shape.js';

type Result = Record<string, unknown>;

/** A task a request names: its sealed id, what the id carries, and its tool. */
interface NamedTask {
  ref: TaskRef;
  entry: CatalogEntry;
  taskId: string;
}

/** A task an upstream runs: the named task and its upstream. */
interface OpenTask extends NamedTask {
  upstream: Upstream;
}

const missingExtension = () =>
  new ManifoldError(
    'ERR_MISSING_CAPABILITY',
    `the tasks methods need the ${TASKS_EXTENSION} extension in this request's client capabilities`,
    {
      data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
    },
  );

/** Refuses, as the extension requires, a request for task notifications without the extension. */
export function requireTasksExtension(ex: Exchange): void {
  if (!declaresTasks(ex)) throw missingExtension();
}

/**
 * How one tools/call treats tasks, decided before it is sent: the `task` parameter for a 2025
 * server, whether the 2026 extension is declared upstream, or an error that says why not.
 */
export function planTask(
  ex: Exchange,
  entry: CatalogEntry,
  upstream: Upstream,
): { task?: Result; extension: boolean } {
  const asked = ex.era === 'legacy' ? ex.request.params?.task : undefined;
  const extension = ex.era === 'modern' && declaresTasks(ex);
  const execution = (entry.full as { execution?: { taskSupport?: unknown } }).execution;
  const support =
    execution?.taskSupport === 'optional' || execution?.taskSupport === 'required'
      ? execution.taskSupport
      : 'forbidden';
  if (upstream.era === 'modern') {
    if (asked !== undefined) {
      throw new ManifoldError(
        'ERR_METHOD_NOT_FOUND',
        `tool ${entry.name} cannot run as a task for this client: server ${entry.server} speaks 2026-07-28, whose tasks reach 2026-07-28 clients only; call it without task`,
      );
    }
    return { extension };
  }
  if (asked !== undefined) {
    if (!isObject(asked)) throw new ManifoldError('ERR_INVALID_PARAMS', 'task must be an object');
    if (support === 'forbidden' || !upstream.runsTasks) {
      throw new ManifoldError(
        'ERR_METHOD_NOT_FOUND',
        `tool ${entry.name} does not run as a task (its execution.taskSupport is ${support}${upstream.runsTasks ? '' : `, and server ${entry.server} runs no tasks`}); call it without task`,
      );
    }
    const ttl =
      typeof asked.ttl === 'number' && Number.isFinite(asked.ttl) && asked.ttl > 0
        ? Math.floor(asked.ttl)
        : undefined;
    return { task: ttl === undefined ? {} : { ttl }, extension: false };
  }
  if (support === 'required') {
    if (ex.era === 'modern' && !extension) throw missingExtension();
    if (ex.era === 'modern') return { task: {}, extension: false };
  }
  return { extension: false };
}

/** The client's answer to a task the upstream created for its call. */
export async function taskCreated(
  edge: Edge,
  ex: Exchange,
  entry: CatalogEntry,
  raw: Result,
  id: string | number,
): Promise<string> {
  const task = readTask(raw);
  if (!task)
    throw new ManifoldError('ERR_UPSTREAM_ERROR', `server ${entry.server} answered with a malformed task`);
  const taskId = await sealTaskId(edge, {
    v: 1,
    p: ex.principal.key,
    s: entry.server,
    t: task.taskId,
    n: entry.name,
    ...(edge.gateway.pool.get(entry.server)?.era === 'legacy' ? { i: edge.instance } : {}),
  });
  const fields = taskFields(edge, task, taskId);
  if (ex.era === 'legacy') return resultMessage(id, { task: legacyTask(fields) });
  const { _meta } = ex.dress({});
  return resultMessage(id, { resultType: 'task', ...fields, _meta });
}

/** tasks/get, tasks/update, tasks/cancel (both eras) and tasks/result (2025 clients). */
export async function taskMethod(edge: Edge, ex: Exchange): Promise<Reply> {
  const { request } = ex;
  const method = request.method;
  if (ex.era === 'modern' && (method === 'tasks/result' || method === 'tasks/list')) {
    throw new ManifoldError(
      'ERR_METHOD_NOT_FOUND',
      `Method not found: ${method} is not part of the ${TASKS_EXTENSION} extension`,
    );
  }
  if (ex.era === 'legacy' && method === 'tasks/update') {
    throw new ManifoldError(
      'ERR_METHOD_NOT_FOUND',
      'Method not found: tasks/update is part of 2026-07-28 only',
    );
  }
  if (method === 'tasks/list') {
    throw new ManifoldError(
      'ERR_METHOD_NOT_FOUND',
      "Method not found: tasks/list is not offered (upstream sessions are shared, so the gateway cannot list one client's tasks apart from another's); keep the task ids you were given",
    );
  }
  if (ex.era === 'modern' && !declaresTasks(ex)) throw missingExtension();
  const named = await nameTask(edge, ex);
  // #52: a call waiting in the approvals queue is a task of the gateway's own, kept in the store.
  if (named.ref.q === 1) {
    const audit = await admitRequest(edge, ex, method, named.entry.name, named.entry.server);
    return queueTaskMethod(edge, ex, named, audit);
  }
  const task: OpenTask = { ...named, upstream: await edge.gateway.callee(named.ref.s, ex.principal) };
  const audit = await admitRequest(edge, ex, method, task.entry.name, task.entry.server);
  if (method === 'tasks/result') return taskResult(edge, ex, task, audit);
  try {
    const body = await (method === 'tasks/get'
      ? taskGet(edge, ex, task)
      : method === 'tasks/update'
        ? taskUpdate(edge, ex, task)
        : taskCancel(edge, ex, task));
    audit('allowed', body.length);
    return json(body);
  } catch (e) {
    audit('error', 0);
    throw e;
  }
}

async function nameTask(edge: Edge, ex: Exchange): Promise<NamedTask> {
  const taskId = ex.request.params?.taskId;
  if (typeof taskId !== 'string') throw new ManifoldError('ERR_INVALID_PARAMS', 'taskId must be a string');
  const sealer: Sealer = await edge.gateway.taskIds;
  const ref = (await sealer.open(taskId)) as Partial<TaskRef> | undefined;
  if (
    ref?.v !== 1 ||
    ref.p !== ex.principal.key ||
    typeof ref.s !== 'string' ||
    typeof ref.t !== 'string' ||
    typeof ref.n !== 'string' ||
    (ref.q !== undefined && ref.q !== 1)
  ) {
    throw unknownTask();
  }
  let entry: CatalogEntry;
  try {
    entry = edge.gateway.resolve(ex.principal, ref.n);
  } catch {
    // A tool the principal may no longer see: its tasks are gone with it, like anything invisible.
    throw unknownTask();
  }
  if (entry.server !== ref.s) throw unknownTask();
  return { ref: ref as TaskRef, entry, taskId };
}

/** Options for one task request upstream: the deadlines come from the upstream, the extension from here. */
function upstreamOptions(ex: Exchange, upstream: Upstream) {
  const server = upstream.config;
  return {
    caller: ex.principal.key,
    clientCapabilities: withTasks(
      relayedCapabilities(server.clientFeatures, ex.clientCapabilities),
      upstream.era === 'modern',
    ),
  };
}

async function taskGet(edge: Edge, ex: Exchange, open: OpenTask): Promise<string> {
  const { ref, entry, upstream, taskId } = open;
  const raw = await upstream.request('tasks/get', { taskId: ref.t }, upstreamOptions(ex, upstream));
  const task = readTask(raw);
  if (!task)
    throw new ManifoldError('ERR_UPSTREAM_ERROR', `server ${ref.s} answered tasks/get without a task`);
  if (ex.era === 'legacy') return resultMessage(ex.request.id, legacyTask(taskFields(edge, task, taskId)));
  // A 2026 client sees what it needs inline: the result or error at the end, the questions
  // while the task waits (a 2025 server asks them on tasks/result, gathered by a TaskPump).
  if (upstream.era === 'legacy') await bridgeLegacy(edge, ex, open, task);
  const fields = taskFields(edge, task, taskId);
  if (task.status === 'input_required' && task.inputRequests) {
    const server = upstream.config;
    const verdict = checkInputRequests(
      server.name,
      server.clientFeatures,
      ex.clientCapabilities,
      task.inputRequests as InputRequests,
    );
    if (!verdict.ok) throw verdict.error;
    fields.inputRequests = verdict.requests;
  }
  if (task.status === 'completed' && task.result) {
    // A task's result passes the response guardrails as a call's does (#51).
    const guarded = await guardToolResult(edge.gateway, entry, ex.principal, stripResultType(task.result));
    fields.result = JSON.parse(edge.gateway.guards.capResult(entry, guarded)) as Result;
  }
  if (task.status === 'failed') fields.error = safeError(task.error);
  return resultMessage(ex.request.id, ex.dress(fields));
}

async function taskUpdate(edge: Edge, ex: Exchange, { ref, upstream, taskId }: OpenTask): Promise<string> {
  const given = ex.request.params?.inputResponses;
  if (!isObject(given)) throw new ManifoldError('ERR_INVALID_PARAMS', 'inputResponses must be an object');
  // Under the keys the upstream asked with (tasks/get showed them as client-features.ts clientKey).
  const answers = upstreamResponses(given);
  if (upstream.era === 'legacy') {
    edge.taskPumps.answer(taskId, answers as InputResponses);
  } else {
    await upstream.request(
      'tasks/update',
      { taskId: ref.t, inputResponses: answers },
      upstreamOptions(ex, upstream),
    );
  }
  return resultMessage(ex.request.id, ex.dress({}));
}

async function taskCancel(edge: Edge, ex: Exchange, { ref, upstream, taskId }: OpenTask): Promise<string> {
  const raw = await upstream.request('tasks/cancel', { taskId: ref.t }, upstreamOptions(ex, upstream));
  edge.taskPumps.end(taskId);
  if (ex.era === 'modern') return resultMessage(ex.request.id, ex.dress({}));
  const task = readTask(raw);
  if (!task)
    throw new ManifoldError('ERR_UPSTREAM_ERROR', `server ${ref.s} answered tasks/cancel without a task`);
  return resultMessage(ex.request.id, legacyTask(taskFields(edge, task, taskId)));
}

/**
 * 2025 tasks/result: relayed like a call, so what the server asks on its stream reaches the
 * client, with the gateway's task id as the related task; the answer carries it too.
 */
function taskResult(edge: Edge, ex: Exchange, open: OpenTask, audit: RequestAudit): Promise<Reply> {
  const { ref, entry, upstream, taskId } = open;
  const related = { [META.relatedTask]: { taskId } };
  return relayRequest(edge, ex, {
    upstream,
    method: 'tasks/result',
    params: { taskId: ref.t },
    target: entry.name,
    relatedTask: taskId,
    onResult: async (raw, id) => {
      // A task's result passes the response guardrails as a call's does (#51).
      const result = await guardToolResult(edge.gateway, entry, ex.principal, raw);
      const meta = isObject(result._meta) ? result._meta : {};
      const capped = edge.gateway.guards.capResult(entry, { ...result, _meta: { ...meta, ...related } });
      return rawResultMessage(id, capped);
    },
    audit: (verdict, bytesOut, inputRequired) => audit(verdict, bytesOut, undefined, inputRequired),
  });
}

/**
 * A 2025 server's task seen by a 2026 client: once terminal, its result or error (from
 * tasks/result, which no longer blocks); while it needs input, the requests it sent on
 * tasks/result, which a pump gathers. Until the pump has them, the task reads as working.
 */
async function bridgeLegacy(edge: Edge, ex: Exchange, open: OpenTask, task: TaskState): Promise<void> {
  const { ref, upstream, taskId } = open;
  const pumps = edge.taskPumps;
  if (task.status === 'completed' || task.status === 'failed') {
    const outcome = pumps.outcome(taskId) ?? (await fetchOutcome(upstream, ref, ex.principal.key));
    if (outcome.result) task.result = outcome.result;
    else if (task.status === 'completed') {
      // The server says completed but its result is an error: report what it returned.
      task.status = 'failed';
    }
    if (outcome.error) task.error = outcome.error;
    return;
  }
  if (task.status !== 'input_required') return;
  const asked = await pumps.pending(taskId, ex.principal, (onInput) =>
    upstream.request('tasks/result', { taskId: ref.t }, { ...upstreamOptions(ex, upstream), onInput }),
  );
  if (asked && Object.keys(asked).length > 0) {
    task.inputRequests = asked;
  } else {
    task.status = 'working';
    task.statusMessage = 'waiting for the server to send its input requests';
  }
}

async function fetchOutcome(
  upstream: Upstream,
  ref: TaskRef,
  caller: string,
): Promise<{ result?: Result; error?: Result }> {
  try {
    return { result: await upstream.request('tasks/result', { taskId: ref.t }, { caller }) };
  } catch (e) {
    return { error: errorObject(e) };
  }
}

/** An upstream's task error as relayed: its code, and its message cleaned and bounded. */
function safeError(error: Result | undefined): Result {
  const code = typeof error?.code === 'number' ? error.code : -32603;
  const message =
    typeof error?.message === 'string' ? clipText(stripUnsafe(error.message), 1024).text : 'the task failed';
  return { code, message };
}

function stripResultType(result: Result): Result {
  const { resultType: _t, ...rest } = result;
  return rest;
}
