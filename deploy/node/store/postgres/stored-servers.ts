/**
 * Servers added through the admin API (#52) on Postgres: the rows of src/store/stored-servers.ts,
 * each change and its epoch bump committed together, so an instance that sees the new epoch reads
 * the change.
 */
import type pg from 'pg';
import {
  parseStoredServer,
  type ServerStore,
  type StoredServer,
} from '../../../../src/store/stored-servers.js';

const PUT = `INSERT INTO manifold_stored_servers (name, entry, updated_by, updated_at) VALUES ($1, $2, $3, $4)
  ON CONFLICT (name) DO UPDATE SET entry = excluded.entry, updated_by = excluded.updated_by,
    updated_at = excluded.updated_at`;
const BUMP = `INSERT INTO manifold_meta AS m (key, value) VALUES ('servers_epoch', 1)
  ON CONFLICT (key) DO UPDATE SET value = m.value + 1`;

export class PostgresServerStore implements ServerStore {
  constructor(private readonly pool: pg.Pool) {}

  async list(): Promise<StoredServer[]> {
    const { rows } = await this.pool.query(
      'SELECT name, entry, updated_by, updated_at FROM manifold_stored_servers ORDER BY name',
    );
    return rows.map(parseStoredServer).filter((s): s is StoredServer => s !== undefined);
  }

  put(s: StoredServer): Promise<void> {
    return this.inTransaction(async (client) => {
      await client.query(PUT, [s.name, JSON.stringify(s.entry), s.updatedBy, s.updatedAt]);
      await client.query(BUMP);
    });
  }

  remove(name: string): Promise<boolean> {
    return this.inTransaction(async (client) => {
      const { rowCount } = await client.query('DELETE FROM manifold_stored_servers WHERE name = $1', [name]);
      if ((rowCount ?? 0) === 0) return false;
      await client.query(BUMP);
      return true;
    });
  }

  async epoch(): Promise<number> {
    const { rows } = await this.pool.query("SELECT value FROM manifold_meta WHERE key = 'servers_epoch'");
    const value: unknown = rows[0]?.value;
    return typeof value === 'number' ? value : 0;
  }

  private async inTransaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }
}
