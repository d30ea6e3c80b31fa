/**
 * A call that waits in the approvals queue (#52): for an agent with nobody at the keyboard, an
 * operator decides instead of the client's user (`approval.via` "queue", or "client-then-queue"
 * for a client that cannot be asked).
 *
 * The call is staged in the store under its principal, tool and argument digest
 * (gateway/approvals-queue.ts), then held for up to the server's `timeoutSeconds`: progress
 * notifications name the approval id when the client asked for progress (spec 2025-11-25 and
 * 2026-07-28: basic/utilities/progress), and a call still undecided at the deadline returns an
 * `isError` result with the id. The same principal calling the same tool with the same arguments
 * later finds the same approval: once approved, the first such call claims the run in the store and
 * runs it, exactly once across instances, and the one run's result is what every such call gets
 * until it has been delivered. A declined or expired approval is refused with its reason, once;
 * the next call asks afresh.
 *
 * A client that takes tasks gets a task instead of a hold (queued-task.ts); the staging, the run
 * and the refusals below are the same for both.
 *
 * The run asks nobody anything: an upstream's own question (elicitation, sampling) is refused,
 * since the operator approved the call, not what the upstream might ask of the absent user.
 */
import type { CatalogEntry } from '../../../aggregate/catalog.js';
import { upstreamArguments } from '../../../aggregate/overrides.js';
import type { Principal } from '../../../auth/principal.js';
import { ManifoldError } from '../../../errors.js';
import { publicBase } from '../../../gateway/approvals-queue.js';
import { guardToolResult } from '../../../gateway/guardrails.js';
import type { ApprovalSettings } from '../../../guards/risk.js';
import { Cancellation } from '../../../lib/cancellation.js';
import { errorMessage, resultMessage } from '../../../protocol/jsonrpc.js';
import { type ApprovalRecord, effectiveStatus } from '../../../store/approvals.js';
import type { SessionCallOptions } from '../../../upstream/session.js';
import type { Upstream } from '../../../upstream/upstream.js';
import type { Edge } from '../edge.js';
import { errorAnswer } from '../errors.js';
import type { Exchange } from '../exchange.js';
import type { Reply } from '../http-in.js';
import type { Answer } from '../relay/answer.js';
import { progressNote } from '../relay/relay.js';
import { type ApprovalOutcome, canElicitForm, refusalResult } from './approval.js';

type Result = Record<string, unknown>;
type OnProgress = NonNullable<SessionCallOptions['onprogress']>;

/** How often a held call looks at its approval in the store. */
export const POLL_MS = 1000;

/** The audit fields of a queued call's line. */
export interface QueueAudit {
  approval: ApprovalOutcome;
  approvalId: string;
  approvedBy?: string;
  approvedAt?: string;
  /** Who declined it. */
  declinedBy?: string;
}

/** What tools-call.ts hands over for one queued call. */
export interface QueueGate {
  entry: CatalogEntry;
  args: Record<string, unknown>;
  digest: string;
  /** The arguments as the operator sees them (approval.ts `shownArguments`). */
  shown: string;
  upstream: Upstream;
  /** How long the call holds before it returns with the approval id. */
  timeoutMs: number;
  /** The server's call deadline: how long a call waits for another call's run of its approval. */
  runTimeoutMs: number;
  /** How long the approval waits for a decision. */
  ttlMs: number;
  notify?: string | undefined;
  /** The request's audit line. */
  audit(verdict: 'allowed' | 'denied' | 'error', bytesOut: number, approval: QueueAudit): void;
}

/**
 * Whether this call's approval goes to the queue: the server says `queue`, or `client-then-queue`
 * and this client cannot be asked (it declared no form elicitation, or a legacy request that cannot
 * take a stream).
 */
export function queues(settings: ApprovalSettings, ex: Exchange): boolean {
  if (settings.via === 'queue') return true;
  if (settings.via !== 'client-then-queue') return false;
  const askable = canElicitForm(ex.clientCapabilities) && (ex.era === 'modern' || (!!ex.ask && ex.canStream));
  return !askable;
}

/** Holds a queued call and answers it: its result, or why it did not run (yet). */
export function queuedCall(edge: Edge, ex: Exchange, q: QueueGate): Promise<Reply> {
  const answer = ex.answer();
  void new QueuedCall(edge, ex, q, answer).hold();
  return answer.response;
}

class QueuedCall {
  private readonly cancellation = new Cancellation();
  private progress = 0;

  constructor(
    private readonly edge: Edge,
    private readonly ex: Exchange,
    private readonly q: QueueGate,
    private readonly answer: Answer,
  ) {
    // A modern client closing its request cancels it (2026-07-28: patterns/cancellation).
    if (ex.era === 'modern') answer.abortOnClose = this.cancellation;
  }

  async hold(): Promise<void> {
    const { edge, ex, q, cancellation } = this;
    const { gateway } = edge;
    const untrack = ex.track(ex.request.id, cancellation);
    try {
      let approval = await this.findOrStage();
      if (!approval) return;
      let deadline = gateway.platform.now() + q.timeoutMs;
      let waitsForRun = false;
      for (;;) {
        if (cancellation.aborted) {
          q.audit('error', 0, { approval: 'cancelled', approvalId: approval.id });
          this.answer.abandon(errorMessage(ex.request.id, -32800, 'request cancelled'));
          return;
        }
        const now = gateway.platform.now();
        const status = effectiveStatus(approval, now);
        if (status === 'approved' && (await gateway.approvals.store.claimRun(approval.id, now))) {
          return await this.run(approval);
        }
        if (status === 'done') return await this.deliverStored(approval);
        if (status === 'declined' || status === 'expired') return await this.refuse(approval, status);
        if (status !== 'pending' && !waitsForRun) {
          // Approved and claimed by another call: the operator's part is over, so the hold gives way
          // to the wait for that run's result, up to the server's call deadline.
          waitsForRun = true;
          deadline = Math.max(deadline, now + q.runTimeoutMs);
        }
        if (now >= deadline) {
          this.finishRefusal(status === 'pending' ? 'queued' : 'running', approval);
          return;
        }
        if (status === 'pending') this.tell(approval);
        await pause(Math.min(POLL_MS, deadline - now), cancellation);
        approval = (await gateway.approvals.store.get(approval.id)) ?? approval;
      }
    } catch (e) {
      const f = errorAnswer(gateway, ex.request.id, e, ex.era);
      q.audit('error', f.body.length, { approval: 'failed', approvalId: '' });
      this.answer.finish(f.body, ex.era === 'modern' ? f.status : 200);
    } finally {
      untrack();
    }
  }

  /** The approval these arguments already have, or a new one; undefined when refused. */
  private async findOrStage(): Promise<ApprovalRecord | undefined> {
    const { edge, ex, q } = this;
    const found = await findOrStage(edge, ex.principal, q);
    if (found) return found;
    const body = resultMessage(ex.request.id, ex.dress(tooManyResult(q.entry)));
    q.audit('denied', body.length, { approval: 'failed', approvalId: '' });
    this.answer.finish(body);
    return undefined;
  }

  /** Progress naming the approval id, where the client asked for progress. */
  private tell(approval: ApprovalRecord): void {
    const token = this.ex.meta.progressToken;
    if (token === undefined) return;
    const message = `Waiting for an operator to approve ${this.q.entry.name} (approval id ${approval.id})`;
    this.answer.push(progressNote({ progress: ++this.progress, message }, token), true);
  }

  /** This call won the claim: it sends the approved call, once, and keeps the result for the others. */
  private async run(approval: ApprovalRecord): Promise<void> {
    const { edge, ex, q } = this;
    const token = ex.meta.progressToken;
    const result = await runApproved(edge, ex.principal, q, approval, {
      cancellation: this.cancellation,
      ...(token !== undefined
        ? { onprogress: (p: Parameters<OnProgress>[0]) => this.answer.push(progressNote(p, token), true) }
        : {}),
    });
    await edge.gateway.approvals.store.deliver(approval.id);
    this.finishResult(approval, result);
  }

  /** Another call ran it: its result, as that call got it. */
  private async deliverStored(approval: ApprovalRecord): Promise<void> {
    await this.edge.gateway.approvals.store.deliver(approval.id);
    this.finishResult(approval, storedResult(approval));
  }

  private finishResult(approval: ApprovalRecord, result: Result): void {
    const { edge, ex, q } = this;
    const body = edge.gateway.guards.resultMessage(q.entry, ex.dress(result), ex.request.id);
    q.audit('allowed', body.length, acceptedAudit(approval));
    this.answer.finish(body);
  }

  /** Declined or expired: refused with the reason, once; the next call asks afresh. */
  private async refuse(approval: ApprovalRecord, status: 'declined' | 'expired'): Promise<void> {
    await this.edge.gateway.approvals.store.deliver(approval.id);
    this.finishRefusal(status, approval);
  }

  private finishRefusal(outcome: QueueRefusal, approval: ApprovalRecord): void {
    const { ex, q } = this;
    const result = queueRefusal(q.entry, outcome, approval, q.timeoutMs / 1000);
    const body = resultMessage(ex.request.id, ex.dress(result));
    q.audit('denied', body.length, refusedAudit(outcome, approval));
    this.answer.finish(body);
  }
}

/**
 * The approval these arguments already have (the newest this principal has not been answered
 * on), or a new one, its webhook told; undefined when the principal or its tenant has too many
 * waiting already (SECURITY G4).
 */
export async function findOrStage(
  edge: Edge,
  principal: Principal,
  q: Pick<QueueGate, 'entry' | 'digest' | 'shown' | 'ttlMs' | 'notify'>,
): Promise<ApprovalRecord | undefined> {
  const { gateway } = edge;
  const found = await gateway.approvals.store.find(principal.key, q.entry.name, q.digest);
  if (found) return found;
  const now = gateway.platform.now();
  const staged = await gateway.approvals.stage({
    // Named after its server, so a host that keeps each server's state apart (the Worker's objects
    // by owner) can send a decision to the store that holds it.
    id: `${q.entry.server}.${crypto.randomUUID()}`,
    principal: principal.key,
    tenant: principal.tenant,
    subject: principal.subject,
    server: q.entry.server,
    tool: q.entry.name,
    digest: q.digest,
    shown: q.shown,
    risk: q.entry.risk,
    createdAt: now,
    expiresAt: now + q.ttlMs,
  });
  if (staged && q.notify) {
    const base = publicBase(gateway.config, gateway.clientOrigin());
    void gateway.approvals.notify(q.notify, base, staged);
  }
  return staged;
}

/** The answer to a call refused because its principal or tenant has too many waiting already. */
export function tooManyResult(entry: CatalogEntry): Result {
  const text = `Too many of your calls already wait for an operator's approval; ${entry.name} was not queued or called. Wait for those to be decided.`;
  return { content: [{ type: 'text', text }], isError: true, _meta: { 'manifold/approval': 'failed' } };
}

/**
 * Sends an approved call whose run this caller claimed, once, through its server's deadline and
 * the response guardrails, and keeps the result in the store for every other caller of the same
 * approval. A failure after the call may have reached its server is not sent again (at most once):
 * it becomes the result.
 */
export async function runApproved(
  edge: Edge,
  principal: Principal,
  q: Pick<QueueGate, 'entry' | 'args' | 'upstream'>,
  approval: ApprovalRecord,
  options: { cancellation: Cancellation; onprogress?: OnProgress },
): Promise<Result> {
  const { gateway } = edge;
  const { entry } = q;
  // An override's fixed, hidden, defaulted and renamed arguments, mapped back for the upstream (#54).
  const args = entry.args ? upstreamArguments(entry.args, q.args) : q.args;
  let result: Result;
  try {
    gateway.enter();
    try {
      result = await q.upstream.request(
        'tools/call',
        { name: entry.original, arguments: args },
        {
          cancellation: options.cancellation,
          caller: principal.key,
          inputMode: 'ask',
          onInput: async () => {
            throw new ManifoldError(
              'ERR_CLIENT_FEATURE',
              'an approved call from the queue cannot answer questions of its server',
            );
          },
          ...(options.onprogress ? { onprogress: options.onprogress } : {}),
        },
      );
    } finally {
      gateway.leave();
    }
    // The response guardrails, as for any call (#51): what is kept is what every caller may see.
    result = await guardToolResult(gateway, entry, principal, result);
  } catch (e) {
    const why = e instanceof ManifoldError ? e.publicMessage : 'the call failed';
    result = {
      content: [
        {
          type: 'text',
          text: `The approved call of ${entry.name} failed (${gateway.redact(why)}); its outcome is unknown and it was not sent again.`,
        },
      ],
      isError: true,
    };
  }
  await gateway.approvals.store.finish(approval.id, JSON.stringify(result));
  return result;
}

/** The one run's result, as the store keeps it. */
export function storedResult(approval: ApprovalRecord): Result {
  try {
    return JSON.parse(approval.result ?? '') as Result;
  } catch {
    throw new ManifoldError('ERR_STORE_UNAVAILABLE', `the result of approval ${approval.id} is unreadable`);
  }
}

/** Why a queued call did not run (yet). */
export type QueueRefusal = 'queued' | 'declined' | 'expired' | 'running';

/** The `isError` result of a queued call that did not run, naming the approval (and the reason). */
export function queueRefusal(
  entry: CatalogEntry,
  outcome: QueueRefusal,
  approval: ApprovalRecord,
  timeoutSeconds: number,
): Result {
  const result =
    outcome === 'declined'
      ? {
          content: [
            {
              type: 'text',
              text: `An operator (${approval.decidedBy ?? 'unknown'}) declined to run ${entry.name}${approval.reason ? `: ${approval.reason}` : ''}. It was not called.`,
            },
          ],
          isError: true,
        }
      : refusalResult(entry, outcome, timeoutSeconds, approval.id);
  const meta = {
    ...((result as { _meta?: Result })._meta ?? {}),
    'manifold/approval': outcome,
    'manifold/approvalId': approval.id,
  };
  return { ...result, _meta: meta };
}

/** The audit fields of a run from the queue: the approval, its approver and when. */
export function acceptedAudit(approval: ApprovalRecord): QueueAudit {
  return {
    approval: 'accepted',
    approvalId: approval.id,
    ...(approval.decidedBy !== undefined ? { approvedBy: approval.decidedBy } : {}),
    ...(approval.decidedAt !== undefined ? { approvedAt: new Date(approval.decidedAt).toISOString() } : {}),
  };
}

/** The audit fields of a queued call that did not run. */
export function refusedAudit(outcome: QueueRefusal, approval: ApprovalRecord): QueueAudit {
  return {
    approval: outcome,
    approvalId: approval.id,
    ...(outcome === 'declined' && approval.decidedBy !== undefined ? { declinedBy: approval.decidedBy } : {}),
  };
}

/** Waits `ms`, or less when the call is cancelled. */
export function pause(ms: number, cancellation: Cancellation): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, Math.max(0, ms));
    const off = cancellation.onAbort(done);
    function done() {
      clearTimeout(timer);
      off();
      resolve();
    }
  });
}
