/**
 * Tokens seen and revoked (#52) on Postgres: the rows of src/store/tokens.ts, a revocation and its
 * epoch bump committed together.
 */
import type pg from 'pg';
import { parseToken, type SeenToken, TOKEN_COLUMNS, type TokenStore } from '../../../../src/store/tokens.js';

const SEEN = `INSERT INTO manifold_seen_tokens (id, subject, tenant, expires_at, first_seen) VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (id) DO NOTHING`;
const REVOKE = `UPDATE manifold_seen_tokens SET revoked_at = $1, revoked_by = $2
  WHERE id = $3 AND revoked_at IS NULL AND expires_at > $1`;
const BUMP = `INSERT INTO manifold_meta AS m (key, value) VALUES ('tokens_epoch', 1)
  ON CONFLICT (key) DO UPDATE SET value = m.value + 1`;

export class PostgresTokenStore implements TokenStore {
  constructor(private readonly pool: pg.Pool) {}

  async seen(t: Omit<SeenToken, 'revokedAt' | 'revokedBy'>, now: number): Promise<void> {
    await this.pool.query('DELETE FROM manifold_seen_tokens WHERE expires_at < $1', [now]);
    await this.pool.query(SEEN, [t.id, t.subject, t.tenant, t.expiresAt, t.firstSeen]);
  }

  async list(limit: number, now: number): Promise<SeenToken[]> {
    const { rows } = await this.pool.query(
      `SELECT ${TOKEN_COLUMNS} FROM manifold_seen_tokens WHERE expires_at > $1 ORDER BY first_seen DESC LIMIT $2`,
      [now, limit],
    );
    return rows.map(parseToken).filter((t): t is SeenToken => t !== undefined);
  }

  async revoke(id: string, by: string, now: number): Promise<boolean> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const { rowCount } = await client.query(REVOKE, [now, by, id]);
      if ((rowCount ?? 0) > 0) await client.query(BUMP);
      await client.query('COMMIT');
      return (rowCount ?? 0) > 0;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }

  async revoked(now: number): Promise<string[]> {
    const { rows } = await this.pool.query(
      'SELECT id FROM manifold_seen_tokens WHERE revoked_at IS NOT NULL AND expires_at > $1',
      [now],
    );
    return rows.flatMap((r: { id: unknown }) => (typeof r.id === 'string' ? [r.id] : []));
  }

  async epoch(): Promise<number> {
    const { rows } = await this.pool.query("SELECT value FROM manifold_meta WHERE key = 'tokens_epoch'");
    const value: unknown = rows[0]?.value;
    return typeof value === 'number' ? value : 0;
  }
}
