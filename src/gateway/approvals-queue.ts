/**
 * The approvals queue (#52): where a risky call waits when nobody is at the keyboard, and where an
 * operator decides it (the console, `POST /admin/approvals/{id}`, or a signed link sent to the
 * server's `approval.notify` webhook). The rules live in the store (src/store/approvals.ts): one
 * decision counts, one run happens, whichever instance gets there first. Here: staging with the
 * per-caller bounds, the decision with its audit line naming who decided and when, the webhook,
 * and the signed links it carries; and, for a call that waits as a task, its arguments kept
 * sealed until it may run.
 */
import type { Sealer } from '../auth/seal.js';
import type { Config } from '../config/types.js';
import { isObject } from '../lib/json.js';
import type { Logger } from '../lib/log.js';
import type { Platform } from '../platform.js';
import {
  APPROVAL_RETAIN_MS,
  type ApprovalQuery,
  type ApprovalRecord,
  type ApprovalStore,
  effectiveStatus,
  type StagedApproval,
} from '../store/approvals.js';
import type { StateStore } from '../store/state.js';
import { MAX_SEALED, type SecretBox } from '../upstream/oauth/box.js';

/**
 * Where the gateway's own pages are reached, for the links it sends: `gateway.advertiseUrl`'s
 * origin, else the origin clients use where the host knows one (`seen`: a Worker has no bound
 * address), else the bound address (a wildcard bind reads as loopback).
 */
export function publicBase(config: Config, seen?: string): string {
  const g = config.gateway;
  if (g.advertiseUrl) return new URL(g.advertiseUrl).origin;
  if (seen) return seen;
  const host =
    g.host === '0.0.0.0' || g.host === '::' ? '127.0.0.1' : g.host.includes(':') ? `[${g.host}]` : g.host;
  return `http://${host}:${g.port}`;
}

/** Pending approvals one principal, and one tenant, may have at once (SECURITY G4). */
export const QUEUE_PER_PRINCIPAL = 32;
export const QUEUE_PER_TENANT = 256;
/** How long the webhook may take to accept a notification. */
const NOTIFY_TIMEOUT_MS = 10_000;
/** The longest decline reason kept. */
const MAX_REASON = 500;

export type Decision = 'approve' | 'decline';

/**
 * A call that waits in the queue as a task (server/mcp/rounds/queued-task.ts): its caller does not
 * call again, so the arguments it will run with are kept, sealed, until its approval expires.
 */
export interface KeptCall {
  /** Absent once withdrawn, or when they no longer open (another deployment secret). */
  args?: Record<string, unknown>;
  /** Its caller withdrew it (tasks/cancel). */
  withdrawn: boolean;
}

/** Where kept calls live: the store's keyed records with an expiry, and the key that seals them. */
export interface CallKeeping {
  store: Pick<StateStore, 'saveRun' | 'loadRun'>;
  box: Promise<SecretBox>;
}

export type DecideResult =
  | { ok: true; approval: ApprovalRecord }
  | { ok: false; status: 404 | 409; error: string; approval?: ApprovalRecord };

/** What a signed link carries: the approval, the decision it offers, and its expiry (integrity only). */
interface LinkBody {
  k: 'approval-link';
  i: string;
  x: number;
}

export class ApprovalsQueue {
  constructor(
    readonly store: ApprovalStore,
    private readonly platform: Platform,
    private readonly log: Logger,
    private readonly links: Promise<Sealer>,
    private readonly calls: CallKeeping,
  ) {
    // Awaited where a call is kept; a secret the box refuses must not also surface as unhandled.
    calls.box.catch(() => {});
  }

  /** Stages a call; undefined when its principal or tenant has too many waiting already. */
  async stage(a: StagedApproval): Promise<ApprovalRecord | undefined> {
    const now = this.platform.now();
    const staged = await this.store.stage(
      a,
      { perPrincipal: QUEUE_PER_PRINCIPAL, perTenant: QUEUE_PER_TENANT },
      now,
    );
    if (!staged) return undefined;
    this.log.info('approval.queued', {
      id: a.id,
      tenant: a.tenant,
      subject: a.subject,
      server: a.server,
      tool: a.tool,
      expiresAt: new Date(a.expiresAt).toISOString(),
    });
    return { ...a, status: 'pending', delivered: false };
  }

  list(query: ApprovalQuery): Promise<ApprovalRecord[]> {
    return this.store.list(query, this.platform.now());
  }

  get(id: string): Promise<ApprovalRecord | undefined> {
    return this.store.get(id);
  }

  /**
   * An operator's decision. Only a pending, unexpired approval takes one; the audit line names
   * who decided (`by`: the admin's subject, or the link) and when.
   */
  async decide(id: string, decision: Decision, by: string, reason?: string): Promise<DecideResult> {
    const now = this.platform.now();
    const kept = reason === undefined ? undefined : reason.slice(0, MAX_REASON);
    const status = decision === 'approve' ? 'approved' : 'declined';
    if (await this.store.decide(id, status, by, kept, now)) {
      const approval = (await this.store.get(id))!;
      this.log.info('audit.approval', {
        id,
        decision: status,
        by,
        at: new Date(now).toISOString(),
        tenant: approval.tenant,
        subject: approval.subject,
        server: approval.server,
        tool: approval.tool,
      });
      return { ok: true, approval };
    }
    const approval = await this.store.get(id);
    if (!approval) return { ok: false, status: 404, error: `no approval ${id}` };
    const state = effectiveStatus(approval, now);
    return {
      ok: false,
      status: 409,
      error: `approval ${id} is ${state}: a decision is final and an expired request cannot be decided`,
      approval,
    };
  }

  /**
   * Keeps the arguments of a call that waits as a task until its approval expires: sealed with
   * AES-GCM under a key derived from the deployment's secret, bound to the principal and the
   * approval, so the store never holds them in the clear and any instance can run the call once
   * approved. False when they are too large to keep.
   */
  async keepCall(approval: ApprovalRecord, args: Record<string, unknown>): Promise<boolean> {
    const key = keptKey(approval);
    const sealed = await (await this.calls.box).seal(args, key);
    if (sealed.length > MAX_SEALED) return false;
    const now = this.platform.now();
    await this.calls.store.saveRun(key, JSON.stringify({ a: sealed }), approval.expiresAt, now);
    return true;
  }

  /** The kept call of an approval; undefined when none was kept (or it expired with the approval). */
  async keptCall(approval: ApprovalRecord): Promise<KeptCall | undefined> {
    const key = keptKey(approval);
    const text = await this.calls.store.loadRun(key, this.platform.now());
    if (text === undefined) return undefined;
    let record: unknown;
    try {
      record = JSON.parse(text);
    } catch {
      return undefined;
    }
    if (!isObject(record)) return undefined;
    const args = typeof record.a === 'string' ? await (await this.calls.box).open(record.a, key) : undefined;
    return { withdrawn: record.w === 1, ...(isObject(args) ? { args } : {}) };
  }

  /**
   * Its caller withdrew the call: the arguments are dropped, and the mark is kept as long as the
   * approval's row, so its task reads as cancelled whatever the queue does after.
   */
  async withdrawCall(approval: ApprovalRecord): Promise<void> {
    const now = this.platform.now();
    const until = approval.expiresAt + APPROVAL_RETAIN_MS;
    await this.calls.store.saveRun(keptKey(approval), JSON.stringify({ w: 1 }), until, now);
  }

  /** A link that opens the decision page for one approval, valid until the approval expires. */
  async link(base: string, approval: ApprovalRecord): Promise<string> {
    const sealer = await this.links;
    const token = await sealer.seal({
      k: 'approval-link',
      i: approval.id,
      x: approval.expiresAt,
    } satisfies LinkBody);
    return `${base}/approvals/link?t=${encodeURIComponent(token)}`;
  }

  /** The approval id a link names, or undefined for a forged, altered or expired one. */
  async openLink(token: unknown): Promise<string | undefined> {
    const body = (await (await this.links).open(token)) as Partial<LinkBody> | undefined;
    if (body?.k !== 'approval-link' || typeof body.i !== 'string' || typeof body.x !== 'number')
      return undefined;
    return body.x > this.platform.now() ? body.i : undefined;
  }

  /**
   * Tells the server's webhook that a call waits, with a signed link to decide it; through the
   * egress-guarded fetch, so the webhook is held to the same hosts as every upstream. A webhook
   * that fails is logged: the approval still waits in the queue and the console.
   */
  async notify(url: string, base: string, approval: ApprovalRecord): Promise<void> {
    const body = {
      type: 'manifold.approval.requested',
      id: approval.id,
      tenant: approval.tenant,
      subject: approval.subject,
      server: approval.server,
      tool: approval.tool,
      risk: approval.risk,
      arguments: approval.shown,
      expiresAt: new Date(approval.expiresAt).toISOString(),
      link: await this.link(base, approval),
    };
    try {
      const response = await this.platform.fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(NOTIFY_TIMEOUT_MS),
        redirect: 'manual',
      });
      await response.body?.cancel();
      if (!response.ok) {
        this.log.warn('approval.notify_failed', { id: approval.id, status: response.status });
      }
    } catch (e) {
      // The webhook's URL often holds its own secret: the error is named by kind, never by message.
      this.log.warn('approval.notify_failed', {
        id: approval.id,
        error: e instanceof Error ? e.name : 'error',
      });
    }
  }
}

/** The store key of a kept call: the principal's and the approval's, never a client's words. */
function keptKey(approval: ApprovalRecord): string {
  return `queue:${JSON.stringify([approval.principal, approval.id])}`;
}
