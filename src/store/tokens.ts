/**
 * Tokens the gateway has seen, and the ones an operator revoked before their expiry (#52). A row
 * holds a token's id (its `jti`, or a digest of the token when it has none), whose it is and when
 * it expires: never the token itself. A revocation bumps `tokens_epoch`, the value every instance
 * polls to refresh its copy of the revocation list. Rows go once their token has expired: an
 * expired token is refused anyway.
 */
import type { StateSql } from './sql.js';

export interface SeenToken {
  id: string;
  subject: string;
  tenant: string;
  expiresAt: number;
  firstSeen: number;
  revokedAt?: number;
  revokedBy?: string;
}

export interface TokenStore {
  /** Records a token on first sight (later sightings change nothing). */
  seen(token: Omit<SeenToken, 'revokedAt' | 'revokedBy'>, now: number): Promise<void>;
  /** Unexpired tokens, the most recently first seen first. */
  list(limit: number, now: number): Promise<SeenToken[]>;
  /** Revokes a known, unexpired token; false when there is none or it is revoked already. */
  revoke(id: string, by: string, now: number): Promise<boolean>;
  /** The ids of revoked tokens that have not expired yet. */
  revoked(now: number): Promise<string[]>;
  epoch(): Promise<number>;
}

const num = (v: unknown) => (typeof v === 'number' ? v : undefined);

/** One row; undefined when it is not what a Manifold writes. */
function parseToken(row: Record<string, unknown>): SeenToken | undefined {
  const { id, subject, tenant } = row;
  const expiresAt = num(row.expires_at);
  const firstSeen = num(row.first_seen);
  if (typeof id !== 'string' || typeof subject !== 'string' || typeof tenant !== 'string') return undefined;
  if (expiresAt === undefined || firstSeen === undefined) return undefined;
  const revokedAt = num(row.revoked_at);
  return {
    id,
    subject,
    tenant,
    expiresAt,
    firstSeen,
    ...(revokedAt !== undefined ? { revokedAt } : {}),
    ...(typeof row.revoked_by === 'string' ? { revokedBy: row.revoked_by } : {}),
  };
}

const TOKEN_COLUMNS = 'id, subject, tenant, expires_at, first_seen, revoked_at, revoked_by';

/** The queries, for tables prefixed `p` (Postgres: `manifold_`); `?` bindings. */
function tokenQueries(p: string) {
  const t = `${p}seen_tokens`;
  const revocable = 'id = ? AND revoked_at IS NULL AND expires_at > ?';
  return {
    sweep: `DELETE FROM ${t} WHERE expires_at < ?`,
    seen: `INSERT INTO ${t} (id, subject, tenant, expires_at, first_seen) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (id) DO NOTHING`,
    list: `SELECT ${TOKEN_COLUMNS} FROM ${t} WHERE expires_at > ? ORDER BY first_seen DESC LIMIT ?`,
    // A revocation commits with its epoch bump, so an instance that sees the epoch reads the list.
    bumpIfRevocable: `INSERT INTO ${p}meta (key, value)
  SELECT 'tokens_epoch', 1 WHERE EXISTS (SELECT 1 FROM ${t} WHERE ${revocable})
  ON CONFLICT (key) DO UPDATE SET value = ${p}meta.value + 1`,
    revoke: `UPDATE ${t} SET revoked_at = ?, revoked_by = ? WHERE ${revocable} RETURNING id`,
    revoked: `SELECT id FROM ${t} WHERE revoked_at IS NOT NULL AND expires_at > ?`,
    epoch: `SELECT value FROM ${p}meta WHERE key = 'tokens_epoch'`,
  };
}

/** Tokens over SQL: a SQLite file on Node, a Durable Object on Workers, Postgres. */
export class SqlTokenStore implements TokenStore {
  private readonly q: ReturnType<typeof tokenQueries>;

  constructor(private readonly sql: StateSql) {
    this.q = tokenQueries(sql.prefix ?? '');
  }

  async seen(t: Omit<SeenToken, 'revokedAt' | 'revokedBy'>, now: number): Promise<void> {
    await this.sql.query(this.q.sweep, [now]);
    await this.sql.query(this.q.seen, [t.id, t.subject, t.tenant, t.expiresAt, t.firstSeen]);
  }

  async list(limit: number, now: number): Promise<SeenToken[]> {
    const rows = await this.sql.query(this.q.list, [now, limit]);
    return rows.map(parseToken).filter((t): t is SeenToken => t !== undefined);
  }

  async revoke(id: string, by: string, now: number): Promise<boolean> {
    const [, revoked] = await this.sql.atomically([
      [this.q.bumpIfRevocable, [id, now]],
      [this.q.revoke, [now, by, id, now]],
    ]);
    return (revoked?.length ?? 0) > 0;
  }

  async revoked(now: number): Promise<string[]> {
    const rows = await this.sql.query(this.q.revoked, [now]);
    return rows.flatMap((r) => (typeof r.id === 'string' ? [r.id] : []));
  }

  async epoch(): Promise<number> {
    const value = (await this.sql.query(this.q.epoch, []))[0]?.value;
    return typeof value === 'number' ? value : 0;
  }
}

export class MemoryTokenStore implements TokenStore {
  private readonly rows = new Map<string, SeenToken>();
  private bumps = 0;

  async seen(t: Omit<SeenToken, 'revokedAt' | 'revokedBy'>, now: number): Promise<void> {
    for (const [id, r] of this.rows) if (r.expiresAt < now) this.rows.delete(id);
    if (!this.rows.has(t.id)) this.rows.set(t.id, { ...t });
  }

  async list(limit: number, now: number): Promise<SeenToken[]> {
    return [...this.rows.values()]
      .filter((r) => r.expiresAt > now)
      .sort((a, b) => b.firstSeen - a.firstSeen)
      .slice(0, limit)
      .map((r) => ({ ...r }));
  }

  async revoke(id: string, by: string, now: number): Promise<boolean> {
    const r = this.rows.get(id);
    if (!r || r.revokedAt !== undefined || r.expiresAt <= now) return false;
    r.revokedAt = now;
    r.revokedBy = by;
    this.bumps++;
    return true;
  }

  async revoked(now: number): Promise<string[]> {
    return [...this.rows.values()]
      .filter((r) => r.revokedAt !== undefined && r.expiresAt > now)
      .map((r) => r.id);
  }

  async epoch(): Promise<number> {
    return this.bumps;
  }
}
