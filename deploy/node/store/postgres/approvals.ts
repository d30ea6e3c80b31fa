/**
 * The approvals queue on Postgres (#52): the rules of src/store/approvals.ts, each write one
 * statement whose WHERE is the rule, so that one decision and one run win across every instance
 * sharing the database (a second UPDATE from `pending` or `approved` waits on the first's row
 * lock, then finds the status changed and updates nothing).
 */
import type pg from 'pg';
import {
  APPROVAL_COLUMNS,
  APPROVAL_RETAIN_MS,
  type ApprovalQuery,
  type ApprovalRecord,
  type ApprovalStore,
  listFilter,
  parseApproval,
  type StageBounds,
  type StagedApproval,
  stagedValues,
} from '../../../../src/store/approvals.js';

const STAGE = `INSERT INTO manifold_approvals (id, principal, tenant, subject, server, tool, digest, shown,
    risk, status, delivered, created_at, expires_at)
  SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', 0, $10, $11
  WHERE (SELECT COUNT(*) FROM manifold_approvals WHERE principal = $2 AND status = 'pending' AND expires_at > $12) < $13
    AND (SELECT COUNT(*) FROM manifold_approvals WHERE tenant = $3 AND status = 'pending' AND expires_at > $12) < $14
  RETURNING id`;
const DECIDE = `UPDATE manifold_approvals SET status = $1, decided_by = $2, decided_at = $3, reason = $4
  WHERE id = $5 AND status = 'pending' AND expires_at > $3 RETURNING id`;
const CLAIM_RUN = `UPDATE manifold_approvals SET status = 'running'
  WHERE id = $1 AND status = 'approved' AND expires_at > $2 RETURNING id`;
const FINISH = `UPDATE manifold_approvals SET status = 'done', result = $1 WHERE id = $2 AND status = 'running'`;
const DELIVER = 'UPDATE manifold_approvals SET delivered = 1 WHERE id = $1 AND delivered = 0 RETURNING id';
const FIND = `SELECT ${APPROVAL_COLUMNS} FROM manifold_approvals
  WHERE principal = $1 AND tool = $2 AND digest = $3 AND delivered = 0 ORDER BY created_at DESC LIMIT 1`;

export class PostgresApprovalStore implements ApprovalStore {
  constructor(private readonly pool: pg.Pool) {}

  async stage(a: StagedApproval, bounds: StageBounds, now: number): Promise<boolean> {
    await this.pool.query('DELETE FROM manifold_approvals WHERE expires_at < $1', [now - APPROVAL_RETAIN_MS]);
    const { rowCount } = await this.pool.query(STAGE, [
      ...stagedValues(a),
      now,
      bounds.perPrincipal,
      bounds.perTenant,
    ]);
    return (rowCount ?? 0) > 0;
  }

  async get(id: string): Promise<ApprovalRecord | undefined> {
    const { rows } = await this.pool.query(
      `SELECT ${APPROVAL_COLUMNS} FROM manifold_approvals WHERE id = $1`,
      [id],
    );
    return rows[0] ? parseApproval(rows[0]) : undefined;
  }

  async find(principal: string, tool: string, digest: string): Promise<ApprovalRecord | undefined> {
    const { rows } = await this.pool.query(FIND, [principal, tool, digest]);
    return rows[0] ? parseApproval(rows[0]) : undefined;
  }

  async list(query: ApprovalQuery, now: number): Promise<ApprovalRecord[]> {
    const { where, values } = listFilter(query, now, (n) => `$${n}`);
    const { rows } = await this.pool.query(
      `SELECT ${APPROVAL_COLUMNS} FROM manifold_approvals${where} ORDER BY created_at DESC LIMIT $${values.length + 1}`,
      [...values, query.limit],
    );
    return rows.map(parseApproval).filter((r): r is ApprovalRecord => r !== undefined);
  }

  async decide(
    id: string,
    decision: 'approved' | 'declined',
    by: string,
    reason: string | undefined,
    now: number,
  ): Promise<boolean> {
    const { rowCount } = await this.pool.query(DECIDE, [decision, by, now, reason ?? null, id]);
    return (rowCount ?? 0) > 0;
  }

  async claimRun(id: string, now: number): Promise<boolean> {
    const { rowCount } = await this.pool.query(CLAIM_RUN, [id, now]);
    return (rowCount ?? 0) > 0;
  }

  async finish(id: string, result: string): Promise<void> {
    await this.pool.query(FINISH, [result, id]);
  }

  async deliver(id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(DELIVER, [id]);
    return (rowCount ?? 0) > 0;
  }
}
