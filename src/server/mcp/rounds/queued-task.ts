/**
 * A call waiting in the approvals queue, as a task (#52), for a client that takes tasks: a
 * 2025-11-25 client that augments its `tools/call` with `task` (basic/utilities/tasks, "Creating
 * Tasks"), or a 2026-07-28 client that declares the tasks extension on the request (SEP-2663:
 * the server decides, per request, to answer `resultType: "task"`). Instead of holding the call
 * (queued.ts), the gateway stages the approval as it would, keeps the arguments sealed in the
 * store (gateway/approvals-queue.ts `keepCall`), and answers with a task whose sealed id names the
 * approval (task-shape.ts: the same ids as every gateway task, bound to the principal, the server
 * and the tool).
 *
 * The task mirrors the approval, read from the store on every request, so any instance answers:
 * - waiting for the operator: `working`, with a status message naming the approval id. Neither
 *   era has a status for waiting on someone other than the client (`input_required` asks the
 *   client itself for input): 2025-11-25 basic/utilities/tasks and the 2026-07-28 tasks
 *   extension, "Task Status";
 * - approved: the first `tasks/get` (or 2025 `tasks/result`) on any instance claims the run in the
 *   store and sends the call, once (queued.ts `runApproved`), under the same principal, with its
 *   audit line naming the approver; then `completed` with the one run's result;
 * - declined or expired: refused with the reason. A 2025 client sees `failed` (2025-11-25, "Task
 *   Status": a tool call's `failed` includes an `isError` result) and gets the refusal from
 *   `tasks/result`; a 2026 client sees `completed` with the refusal as its `isError` result (the
 *   extension, "Task Execution Errors": `failed` MUST NOT carry a result that completed with
 *   `isError: true`), the reason in the status message either way;
 * - `tasks/cancel` withdraws the call: a pending approval is declined by its caller, an approved
 *   one is claimed and closed without running, so an operator's later approval runs nothing; the
 *   task reads `cancelled` from then on (2025-11-25, "Task Cancellation").
 */
import type { CatalogEntry } from '../../../aggregate/catalog.js';
import { ManifoldError } from '../../../errors.js';
import { Cancellation } from '../../../lib/cancellation.js';
import { errorMessage, rawResultMessage, resultMessage } from '../../../protocol/jsonrpc.js';
import { META } from '../../../protocol/versions.js';
import { type ApprovalRecord, effectiveStatus } from '../../../store/approvals.js';
import type { TaskState, TaskStatus } from '../../../upstream/wire/tasks.js';
import type { Edge } from '../edge.js';
import type { Exchange } from '../exchange.js';
import { json, type Reply } from '../http-in.js';
import type { RequestAudit } from '../relay/requests.js';
import {
  declaresTasks,
  legacyTask,
  sealTaskId,
  type TaskRef,
  taskFields,
  unknownTask,
} from '../task-shape.js';
import {
  acceptedAudit,
  findOrStage,
  POLL_MS,
  pause,
  type QueueGate,
  queuedCall,
  queueRefusal,
  refusedAudit,
  runApproved,
  storedResult,
  tooManyResult,
} from './queued.js';

type Result = Record<string, unknown>;

/** The task a request names, as tasks.ts opened it. */
export interface NamedQueueTask {
  ref: TaskRef;
  entry: CatalogEntry;
  taskId: string;
}

/** What a queue task shows at one moment. */
interface Seen {
  status: TaskStatus;
  message: string;
  /** The call's result (or refusal) once terminal. */
  result?: Result;
  approval: ApprovalRecord;
}

const WITHDRAWN = 'withdrawn by its caller (tasks/cancel)';

/**
 * Whether this call waits as a task: a 2025 client asked for one with `task`; a 2026 client
 * declared the tasks extension on this request. A program's calls in code mode never do (#50).
 */
export function takesTask(ex: Exchange): boolean {
  if (ex.code) return false;
  return ex.era === 'legacy' ? ex.request.params?.task !== undefined : declaresTasks(ex);
}

/** Stages (or finds) the call's approval, keeps its arguments, and answers with its task. */
export async function queuedTask(edge: Edge, ex: Exchange, q: QueueGate): Promise<Reply> {
  const { gateway } = edge;
  const { entry } = q;
  const id = ex.request.id;
  if (ex.era === 'legacy' && typeof ex.request.params?.task !== 'object') {
    throw new ManifoldError('ERR_INVALID_PARAMS', 'task must be an object');
  }
  const approval = await findOrStage(edge, ex.principal, q);
  if (!approval) {
    const body = resultMessage(id, ex.dress(tooManyResult(entry)));
    q.audit('denied', body.length, { approval: 'failed', approvalId: '' });
    return json(body);
  }
  if (!(await gateway.approvals.keepCall(approval, q.args))) {
    // Too large to keep sealed: a 2026 client is held instead (the server decides whether to make
    // a task); a 2025 client asked for one, and is told.
    if (ex.era === 'modern') return queuedCall(edge, ex, q);
    q.audit('denied', 0, { approval: 'failed', approvalId: approval.id });
    throw new ManifoldError(
      'ERR_INVALID_PARAMS',
      `the arguments of ${entry.name} are too large to wait for an approval as a task; call it without task`,
    );
  }
  const taskId = await sealTaskId(edge, {
    v: 1,
    p: ex.principal.key,
    s: entry.server,
    t: approval.id,
    n: entry.name,
    q: 1,
  });
  // Created in `working` whatever the approval's state: the first tasks/get shows where it is.
  const fields = taskFields(edge, state(approval, 'working', waiting(entry, approval)), taskId);
  const meta = {
    'manifold/approval': 'queued',
    'manifold/approvalId': approval.id,
    // For a host that hands the model something while the task waits (2025-11-25, "Creating Tasks").
    'io.modelcontextprotocol/model-immediate-response': waiting(entry, approval),
  };
  const body =
    ex.era === 'legacy'
      ? resultMessage(id, { task: legacyTask(fields), _meta: meta })
      : resultMessage(id, {
          resultType: 'task',
          ...fields,
          _meta: { ...(ex.dress({})._meta as Result | undefined), ...meta },
        });
  q.audit('denied', body.length, refusedAudit('queued', approval));
  return json(body);
}

/** tasks/get, tasks/update, tasks/cancel and (2025) tasks/result for a queue task. */
export async function queueTaskMethod(
  edge: Edge,
  ex: Exchange,
  named: NamedQueueTask,
  audit: RequestAudit,
): Promise<Reply> {
  try {
    const approval = await edge.gateway.approvals.store.get(named.ref.t);
    // Swept, or not this task's: unknown, like any task that is not the caller's.
    if (approval?.principal !== ex.principal.key || approval.tool !== named.entry.name) throw unknownTask();
    const method = ex.request.method;
    const body =
      method === 'tasks/get'
        ? await taskGet(edge, ex, named, approval)
        : method === 'tasks/result'
          ? await taskResult(edge, ex, named, approval)
          : method === 'tasks/cancel'
            ? await taskCancel(edge, ex, named, approval)
            : // tasks/update: nothing here ever asks the client for input; answers are ignored (SEP-2663).
              resultMessage(ex.request.id, ex.dress({}));
    audit('allowed', body.length);
    return json(body);
  } catch (e) {
    audit('error', 0);
    throw e;
  }
}

async function taskGet(edge: Edge, ex: Exchange, named: NamedQueueTask, approval: ApprovalRecord) {
  const seen = await look(edge, ex, named, approval);
  const fields = taskFields(edge, state(seen.approval, seen.status, seen.message), named.taskId);
  if (ex.era === 'legacy') return resultMessage(ex.request.id, legacyTask(fields));
  if (seen.result)
    fields.result = JSON.parse(edge.gateway.guards.capResult(named.entry, seen.result)) as Result;
  else if (seen.status === 'failed') fields.error = { code: -32603, message: seen.message };
  return resultMessage(ex.request.id, ex.dress(fields));
}

/**
 * 2025 tasks/result: blocks until the task is terminal (2025-11-25, "Result Retrieval"), running
 * the call if it is approved meanwhile, then answers what the call would have: its result, or the
 * refusal, with the related task in `_meta`.
 */
async function taskResult(
  edge: Edge,
  ex: Exchange,
  named: NamedQueueTask,
  first: ApprovalRecord,
): Promise<string> {
  const cancellation = new Cancellation();
  const untrack = ex.track(ex.request.id, cancellation);
  try {
    let approval = first;
    for (;;) {
      const seen = await look(edge, ex, named, approval);
      if (seen.status === 'cancelled') {
        return errorMessage(ex.request.id, -32800, `the call was ${WITHDRAWN}`);
      }
      if (seen.status === 'failed' && !seen.result) return errorMessage(ex.request.id, -32603, seen.message);
      if (seen.result) {
        const meta = (seen.result._meta as Result | undefined) ?? {};
        const related = { ...meta, [META.relatedTask]: { taskId: named.taskId } };
        return rawResultMessage(
          ex.request.id,
          edge.gateway.guards.capResult(named.entry, { ...seen.result, _meta: related }),
        );
      }
      await pause(POLL_MS, cancellation);
      if (cancellation.aborted) return errorMessage(ex.request.id, -32800, 'request cancelled');
      approval = (await edge.gateway.approvals.store.get(approval.id)) ?? approval;
    }
  } finally {
    untrack();
  }
}

/**
 * tasks/cancel: withdraws the call unless it is already decided for good. A pending approval is
 * declined by its caller, an approved one claimed and closed without running; one already running
 * finishes (at most once: it may have reached its server) but its task stays `cancelled`.
 */
async function taskCancel(
  edge: Edge,
  ex: Exchange,
  named: NamedQueueTask,
  approval: ApprovalRecord,
): Promise<string> {
  const { approvals } = edge.gateway;
  const now = edge.gateway.platform.now();
  const already = (await approvals.keptCall(approval))?.withdrawn === true;
  let withdrawn = already;
  let current = approval;
  if (!already) {
    const status = effectiveStatus(approval, now);
    if (status === 'pending') {
      const decided = await approvals.decide(approval.id, 'decline', ex.principal.subject, WITHDRAWN);
      if (decided.ok) withdrawn = true;
      current = decided.approval ?? approval;
    }
    if (!withdrawn && effectiveStatus(current, now) === 'approved') {
      if (await approvals.store.claimRun(approval.id, now)) {
        const closed = queueRefusal(named.entry, 'declined', { ...current, reason: WITHDRAWN }, 0);
        await approvals.store.finish(approval.id, JSON.stringify(closed));
        withdrawn = true;
      }
    }
    if (!withdrawn && (await approvals.store.get(approval.id))?.status === 'running') withdrawn = true;
    if (withdrawn) {
      await approvals.withdrawCall(approval);
      await approvals.store.deliver(approval.id);
    }
  }
  if ((already || !withdrawn) && ex.era === 'legacy') {
    // 2025-11-25, "Task Cancellation": a task already terminal (cancelled included) is refused (-32602).
    throw new ManifoldError('ERR_INVALID_PARAMS', 'this task is already terminal and cannot be cancelled');
  }
  // 2026-07-28: an acknowledgement; the task shows whatever it reached.
  if (ex.era === 'modern') return resultMessage(ex.request.id, ex.dress({}));
  const fields = taskFields(edge, state(current, 'cancelled', `The call was ${WITHDRAWN}.`), named.taskId);
  return resultMessage(ex.request.id, legacyTask(fields));
}

/**
 * Where the task is now; an approved call is run here, once, by whichever request claims it.
 * A terminal outcome is marked delivered, so the same call made again later asks afresh.
 */
async function look(edge: Edge, ex: Exchange, named: NamedQueueTask, first: ApprovalRecord): Promise<Seen> {
  const { gateway } = edge;
  const { entry } = named;
  let approval = first;
  const kept = await gateway.approvals.keptCall(approval);
  if (kept?.withdrawn) return { status: 'cancelled', message: `The call was ${WITHDRAWN}.`, approval };
  const now = gateway.platform.now();
  let status = effectiveStatus(approval, now);
  if (status === 'approved' && kept?.args) {
    // The callee first: an instance of an isolated server is found (or started) before the claim.
    const upstream = await gateway.callee(entry.server, ex.principal);
    if (await gateway.approvals.store.claimRun(approval.id, now)) {
      const started = gateway.platform.now();
      const result = await runApproved(edge, ex.principal, { entry, args: kept.args, upstream }, approval, {
        cancellation: new Cancellation(),
      });
      auditRun(edge, ex, entry, approval, JSON.stringify(result).length, started);
      approval = { ...approval, status: 'done', result: JSON.stringify(result) };
    } else {
      approval = (await gateway.approvals.store.get(approval.id)) ?? approval;
    }
    status = effectiveStatus(approval, gateway.platform.now());
  }
  const seen = see(named, approval, status, ex.era, kept !== undefined);
  if (seen.result && !approval.delivered) await gateway.approvals.store.deliver(approval.id);
  return seen;
}

function see(
  { entry }: NamedQueueTask,
  approval: ApprovalRecord,
  status: ReturnType<typeof effectiveStatus>,
  era: Exchange['era'],
  kept: boolean,
): Seen {
  const by = approval.decidedBy ?? 'unknown';
  switch (status) {
    case 'pending':
      return { status: 'working', message: waiting(entry, approval), approval };
    case 'approved':
    case 'running':
      if (status === 'approved' && !kept) {
        const message = `Approved by ${by}, but the arguments of this call are no longer kept: call ${entry.name} again.`;
        return { status: 'failed', message, approval };
      }
      return {
        status: 'working',
        message: `Approved by ${by} (approval id ${approval.id}): running.`,
        approval,
      };
    case 'done': {
      const result = storedResult(approval);
      const failed = result.isError === true && era === 'legacy';
      const message = `Approved by ${by} (approval id ${approval.id}) and run${result.isError === true ? '; it returned an error' : ''}.`;
      return { status: failed ? 'failed' : 'completed', message, result, approval };
    }
    default: {
      const result = queueRefusal(entry, status, approval, 0);
      const message =
        status === 'declined'
          ? `Declined by ${by} (approval id ${approval.id})${approval.reason ? `: ${approval.reason}` : ''}. It was not called.`
          : `Nobody approved it before approval ${approval.id} expired. It was not called.`;
      return { status: era === 'legacy' ? 'failed' : 'completed', message, result, approval };
    }
  }
}

function waiting(entry: CatalogEntry, approval: ApprovalRecord): string {
  return `Waiting for an operator to approve ${entry.name} (approval id ${approval.id}).`;
}

/** The task's state in the era-neutral shape: its times are the approval's. */
function state(approval: ApprovalRecord, status: TaskStatus, statusMessage: string): TaskState {
  return {
    taskId: approval.id,
    status,
    statusMessage,
    createdAt: new Date(approval.createdAt).toISOString(),
    lastUpdatedAt: new Date(approval.decidedAt ?? approval.createdAt).toISOString(),
    // The approval's lifetime: past it, the call can no longer run.
    ttlMs: approval.expiresAt - approval.createdAt,
    pollIntervalMs: POLL_MS,
  };
}

/** The run's audit line: the call's own (`audit.tools_call`), naming the approval and its approver. */
function auditRun(
  edge: Edge,
  ex: Exchange,
  entry: CatalogEntry,
  approval: ApprovalRecord,
  bytesOut: number,
  started: number,
): void {
  const { gateway } = edge;
  const { principal } = ex;
  const durationMs = gateway.platform.now() - started;
  gateway.log.info('audit.tools_call', {
    tenant: principal.tenant,
    subject: principal.subject,
    tool: entry.name,
    server: entry.server,
    verdict: 'allowed',
    durationMs,
    bytesIn: 0,
    bytesOut,
    ...acceptedAudit(approval),
    task: true,
  });
  gateway.observers.report(
    'tools/call',
    principal,
    entry.server,
    entry.name,
    'allowed',
    durationMs,
    0,
    bytesOut,
  );
}
