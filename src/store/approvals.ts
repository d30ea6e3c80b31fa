/**
 * The approvals queue at rest (#52): a risky call staged for an operator's decision, decided once,
 * run once, its result kept for the caller that asks again. One set of queries for every database
 * (a SQLite file, a Durable Object, Postgres; `StateSql`), and the same rules in memory, each write
 * one statement whose WHERE is the rule, so the database decides what "once" means across
 * instances (on Postgres a second UPDATE waits on the first's row lock, then finds the status
 * changed and updates nothing):
 * - a decision is an UPDATE from `pending`, before the expiry: one decision wins, a second finds
 *   nothing to update (SECURITY G2);
 * - a run is claimed by an UPDATE from `approved` to `running`: one instance runs it, whichever
 *   receives the caller's next call;
 * - a terminal outcome is delivered once (`delivered`), after which the same call asks afresh.
 *
 * What is stored of the arguments is what the operator is shown: bounded and with every
 * configured secret redacted (rounds/approval.ts `approvalQuestion`), never the raw values; the
 * call is bound to its arguments by their digest, which the caller's own call must match.
 */
import type { SqlValue, StateSql } from './sql.js';

export type ApprovalStatus = 'pending' | 'approved' | 'declined' | 'running' | 'done';

/** What a call stages: who asks, for what, and until when. */
export interface StagedApproval {
  id: string;
  /** The principal's key (tenant and subject): only the same principal's call runs it. */
  principal: string;
  tenant: string;
  subject: string;
  server: string;
  /** The exposed tool name. */
  tool: string;
  /** SHA-256 of the canonical JSON of the arguments. */
  digest: string;
  /** The arguments as the operator sees them: bounded, secrets redacted. */
  shown: string;
  /** The risk class of the tool, for the operator. */
  risk: string;
  createdAt: number;
  expiresAt: number;
}

export interface ApprovalRecord extends StagedApproval {
  status: ApprovalStatus;
  decidedBy?: string;
  decidedAt?: number;
  reason?: string;
  /** The one run's result (a JSON-RPC result object, serialized), once done. */
  result?: string;
  /** The terminal outcome reached its caller: the same call now asks afresh. */
  delivered: boolean;
}

/** How many approvals may wait at once, per principal and per tenant (SECURITY G4). */
export interface StageBounds {
  perPrincipal: number;
  perTenant: number;
}

export interface ApprovalQuery {
  status?: ApprovalStatus | 'expired';
  tenant?: string;
  limit: number;
}

export interface ApprovalStore {
  /**
   * Stages a call; false when its principal or tenant already has as many pending as the bounds
   * allow (one caller's flood never fills the queue for the others).
   */
  stage(a: StagedApproval, bounds: StageBounds, now: number): Promise<boolean>;
  get(id: string): Promise<ApprovalRecord | undefined>;
  /** The newest undelivered approval of exactly these arguments, by this principal, for this tool. */
  find(principal: string, tool: string, digest: string): Promise<ApprovalRecord | undefined>;
  /** The newest first. */
  list(query: ApprovalQuery, now: number): Promise<ApprovalRecord[]>;
  /** `pending` (and not expired) to `approved` or `declined`: true for the one decision that counts. */
  decide(
    id: string,
    decision: 'approved' | 'declined',
    by: string,
    reason: string | undefined,
    now: number,
  ): Promise<boolean>;
  /** `approved` (and not expired) to `running`: true for the one caller that runs it. */
  claimRun(id: string, now: number): Promise<boolean>;
  /** `running` to `done`, with the run's result. */
  finish(id: string, result: string): Promise<void>;
  /** Marks a terminal outcome delivered; true for the first. */
  deliver(id: string): Promise<boolean>;
}

/** Rows are kept this long past their expiry, for the operator's view and the audit trail. */
export const APPROVAL_RETAIN_MS = 7 * 86_400_000;

/** The status an operator and a caller read: a pending approval past its expiry has expired. */
export function effectiveStatus(r: ApprovalRecord, now: number): ApprovalStatus | 'expired' {
  return (r.status === 'pending' || r.status === 'approved') && r.expiresAt <= now ? 'expired' : r.status;
}

const STATUSES: readonly ApprovalStatus[] = ['pending', 'approved', 'declined', 'running', 'done'];
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const int = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) ? v : undefined;

/** One row as stored; undefined when any column is not what a Manifold writes. */
function parseApproval(row: Record<string, unknown>): ApprovalRecord | undefined {
  const status = STATUSES.find((s) => s === row.status);
  const fields = {
    id: str(row.id),
    principal: str(row.principal),
    tenant: str(row.tenant),
    subject: str(row.subject),
    server: str(row.server),
    tool: str(row.tool),
    digest: str(row.digest),
    shown: str(row.shown),
    risk: str(row.risk),
    createdAt: int(row.created_at),
    expiresAt: int(row.expires_at),
  };
  if (!status || Object.values(fields).some((v) => v === undefined)) return undefined;
  const record = { ...(fields as StagedApproval), status, delivered: row.delivered === 1 };
  const decidedBy = str(row.decided_by);
  const decidedAt = int(row.decided_at);
  const reason = str(row.reason);
  const result = str(row.result);
  return {
    ...record,
    ...(decidedBy !== undefined ? { decidedBy } : {}),
    ...(decidedAt !== undefined ? { decidedAt } : {}),
    ...(reason !== undefined ? { reason } : {}),
    ...(result !== undefined ? { result } : {}),
  };
}

const APPROVAL_COLUMNS =
  'id, principal, tenant, subject, server, tool, digest, shown, risk, status, decided_by, decided_at, reason, result, delivered, created_at, expires_at';

/** The queries, for tables prefixed `p` (Postgres: `manifold_`); `?` bindings. */
function approvalQueries(p: string) {
  const t = `${p}approvals`;
  return {
    // The bounds are part of the INSERT, so two calls racing past them on two instances cannot
    // both find room that is not there (each statement sees the other's committed row, or waits).
    stage: `INSERT INTO ${t} (id, principal, tenant, subject, server, tool, digest, shown, risk,
    status, delivered, created_at, expires_at)
  SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?
  WHERE (SELECT COUNT(*) FROM ${t} WHERE principal = ? AND status = 'pending' AND expires_at > ?) < ?
    AND (SELECT COUNT(*) FROM ${t} WHERE tenant = ? AND status = 'pending' AND expires_at > ?) < ?
  RETURNING id`,
    sweep: `DELETE FROM ${t} WHERE expires_at < ?`,
    get: `SELECT ${APPROVAL_COLUMNS} FROM ${t} WHERE id = ?`,
    find: `SELECT ${APPROVAL_COLUMNS} FROM ${t}
  WHERE principal = ? AND tool = ? AND digest = ? AND delivered = 0 ORDER BY created_at DESC LIMIT 1`,
    list: (where: string) => `SELECT ${APPROVAL_COLUMNS} FROM ${t}${where} ORDER BY created_at DESC LIMIT ?`,
    decide: `UPDATE ${t} SET status = ?, decided_by = ?, decided_at = ?, reason = ?
  WHERE id = ? AND status = 'pending' AND expires_at > ? RETURNING id`,
    claimRun: `UPDATE ${t} SET status = 'running' WHERE id = ? AND status = 'approved' AND expires_at > ? RETURNING id`,
    finish: `UPDATE ${t} SET status = 'done', result = ? WHERE id = ? AND status = 'running'`,
    deliver: `UPDATE ${t} SET delivered = 1 WHERE id = ? AND delivered = 0 RETURNING id`,
  };
}

/** The queue over SQL: a SQLite file on Node, a Durable Object on Workers, Postgres. */
export class SqlApprovalStore implements ApprovalStore {
  private readonly q: ReturnType<typeof approvalQueries>;

  constructor(private readonly sql: StateSql) {
    this.q = approvalQueries(sql.prefix ?? '');
  }

  async stage(a: StagedApproval, bounds: StageBounds, now: number): Promise<boolean> {
    await this.sql.query(this.q.sweep, [now - APPROVAL_RETAIN_MS]);
    const values: SqlValue[] = [
      a.id,
      a.principal,
      a.tenant,
      a.subject,
      a.server,
      a.tool,
      a.digest,
      a.shown,
      a.risk,
      a.createdAt,
      a.expiresAt,
      a.principal,
      now,
      bounds.perPrincipal,
      a.tenant,
      now,
      bounds.perTenant,
    ];
    return this.changed(this.q.stage, values);
  }

  async get(id: string): Promise<ApprovalRecord | undefined> {
    return this.one(this.q.get, [id]);
  }

  async find(principal: string, tool: string, digest: string): Promise<ApprovalRecord | undefined> {
    return this.one(this.q.find, [principal, tool, digest]);
  }

  async list(query: ApprovalQuery, now: number): Promise<ApprovalRecord[]> {
    const { where, values } = listFilter(query, now);
    const rows = await this.sql.query(this.q.list(where), [...values, query.limit]);
    return rows.map(parseApproval).filter((r): r is ApprovalRecord => r !== undefined);
  }

  decide(
    id: string,
    decision: 'approved' | 'declined',
    by: string,
    reason: string | undefined,
    now: number,
  ): Promise<boolean> {
    return this.changed(this.q.decide, [decision, by, now, reason ?? null, id, now]);
  }

  claimRun(id: string, now: number): Promise<boolean> {
    return this.changed(this.q.claimRun, [id, now]);
  }

  async finish(id: string, result: string): Promise<void> {
    await this.sql.query(this.q.finish, [result, id]);
  }

  deliver(id: string): Promise<boolean> {
    return this.changed(this.q.deliver, [id]);
  }

  private async one(query: string, values: SqlValue[]): Promise<ApprovalRecord | undefined> {
    const row = (await this.sql.query(query, values))[0];
    return row ? parseApproval(row) : undefined;
  }

  /** RETURNING says whether the rule held, on every database alike. */
  private async changed(query: string, values: SqlValue[]): Promise<boolean> {
    return (await this.sql.query(query, values)).length > 0;
  }
}

/**
 * The WHERE of a listing: by status (an expired approval is a pending or approved one past its
 * expiry) and tenant.
 */
function listFilter(query: ApprovalQuery, now: number): { where: string; values: SqlValue[] } {
  const clauses: string[] = [];
  const values: SqlValue[] = [];
  const bind = (v: SqlValue) => {
    values.push(v);
    return '?';
  };
  if (query.status === 'expired') {
    clauses.push(`status IN ('pending', 'approved') AND expires_at <= ${bind(now)}`);
  } else if (query.status === 'pending' || query.status === 'approved') {
    clauses.push(`status = ${bind(query.status)} AND expires_at > ${bind(now)}`);
  } else if (query.status) {
    clauses.push(`status = ${bind(query.status)}`);
  }
  if (query.tenant !== undefined) clauses.push(`tenant = ${bind(query.tenant)}`);
  return { where: clauses.length ? ` WHERE ${clauses.join(' AND ')}` : '', values };
}

/** The same rules in memory, for a gateway without a store (one instance). */
export class MemoryApprovalStore implements ApprovalStore {
  private readonly rows = new Map<string, ApprovalRecord>();

  async stage(a: StagedApproval, bounds: StageBounds, now: number): Promise<boolean> {
    for (const [id, r] of this.rows) if (r.expiresAt < now - APPROVAL_RETAIN_MS) this.rows.delete(id);
    const pending = [...this.rows.values()].filter((r) => r.status === 'pending' && r.expiresAt > now);
    if (pending.filter((r) => r.principal === a.principal).length >= bounds.perPrincipal) return false;
    if (pending.filter((r) => r.tenant === a.tenant).length >= bounds.perTenant) return false;
    this.rows.set(a.id, { ...a, status: 'pending', delivered: false });
    return true;
  }

  async get(id: string): Promise<ApprovalRecord | undefined> {
    const r = this.rows.get(id);
    return r ? { ...r } : undefined;
  }

  async find(principal: string, tool: string, digest: string): Promise<ApprovalRecord | undefined> {
    let newest: ApprovalRecord | undefined;
    for (const r of this.rows.values()) {
      if (r.principal !== principal || r.tool !== tool || r.digest !== digest || r.delivered) continue;
      if (!newest || r.createdAt >= newest.createdAt) newest = r;
    }
    return newest ? { ...newest } : undefined;
  }

  async list(query: ApprovalQuery, now: number): Promise<ApprovalRecord[]> {
    return [...this.rows.values()]
      .filter((r) => (query.status ? effectiveStatus(r, now) === query.status : true))
      .filter((r) => (query.tenant !== undefined ? r.tenant === query.tenant : true))
      .sort((a, b) => b.createdAt - a.createdAt)
      .slice(0, query.limit)
      .map((r) => ({ ...r }));
  }

  async decide(
    id: string,
    decision: 'approved' | 'declined',
    by: string,
    reason: string | undefined,
    now: number,
  ): Promise<boolean> {
    const r = this.rows.get(id);
    if (r?.status !== 'pending' || r.expiresAt <= now) return false;
    r.status = decision;
    r.decidedBy = by;
    r.decidedAt = now;
    if (reason !== undefined) r.reason = reason;
    return true;
  }

  async claimRun(id: string, now: number): Promise<boolean> {
    const r = this.rows.get(id);
    if (r?.status !== 'approved' || r.expiresAt <= now) return false;
    r.status = 'running';
    return true;
  }

  async finish(id: string, result: string): Promise<void> {
    const r = this.rows.get(id);
    if (r?.status !== 'running') return;
    r.status = 'done';
    r.result = result;
  }

  async deliver(id: string): Promise<boolean> {
    const r = this.rows.get(id);
    if (!r || r.delivered) return false;
    r.delivered = true;
    return true;
  }
}
