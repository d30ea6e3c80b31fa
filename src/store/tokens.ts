/**
 * Tokens the gateway has seen, and the ones an operator revoked before their expiry (#52). A row
 * holds a token's id (its `jti`, or a digest of the token when it has none), whose it is and when
 * it expires: never the token itself. A revocation bumps `tokens_epoch`, the value every instance
 * polls to refresh its copy of the revocation list. Rows go once their token has expired: an
 * expired token is refused anyway.
 */
import type { SqlExec } from './sql.js';

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

/** One row; undefined when it is not what a Manifold writes. Shared with Postgres. */
export function parseToken(row: Record<string, unknown>): SeenToken | undefined {
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

export const TOKEN_COLUMNS = 'id, subject, tenant, expires_at, first_seen, revoked_at, revoked_by';
const SEEN = `INSERT INTO seen_tokens (id, subject, tenant, expires_at, first_seen) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (id) DO NOTHING`;
const REVOKE = `UPDATE seen_tokens SET revoked_at = ?, revoked_by = ?
  WHERE id = ? AND revoked_at IS NULL AND expires_at > ? RETURNING id`;
const BUMP = `INSERT INTO meta (key, value) VALUES ('tokens_epoch', 1)
  ON CONFLICT (key) DO UPDATE SET value = value + 1`;

export class SqlTokenStore implements TokenStore {
  constructor(private readonly sql: SqlExec) {}

  async seen(t: Omit<SeenToken, 'revokedAt' | 'revokedBy'>, now: number): Promise<void> {
    this.sql.exec('DELETE FROM seen_tokens WHERE expires_at < ?', now);
    this.sql.exec(SEEN, t.id, t.subject, t.tenant, t.expiresAt, t.firstSeen);
  }

  async list(limit: number, now: number): Promise<SeenToken[]> {
    return this.sql
      .exec<Record<string, unknown>>(
        `SELECT ${TOKEN_COLUMNS} FROM seen_tokens WHERE expires_at > ? ORDER BY first_seen DESC LIMIT ?`,
        now,
        limit,
      )
      .map(parseToken)
      .filter((t): t is SeenToken => t !== undefined);
  }

  async revoke(id: string, by: string, now: number): Promise<boolean> {
    return this.sql.transaction(() => {
      const done = this.sql.exec(REVOKE, now, by, id, now).length > 0;
      if (done) this.sql.exec(BUMP);
      return done;
    });
  }

  async revoked(now: number): Promise<string[]> {
    return this.sql
      .exec<{ id: unknown }>(
        'SELECT id FROM seen_tokens WHERE revoked_at IS NOT NULL AND expires_at > ?',
        now,
      )
      .flatMap((r) => (typeof r.id === 'string' ? [r.id] : []));
  }

  async epoch(): Promise<number> {
    const row = this.sql.exec<{ value: unknown }>("SELECT value FROM meta WHERE key = 'tokens_epoch'")[0];
    return typeof row?.value === 'number' ? row.value : 0;
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
