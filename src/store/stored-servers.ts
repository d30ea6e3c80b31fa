/**
 * Servers added through the admin API (#52), kept in the store and merged over the config file's
 * by every instance that shares it (gateway/managed-servers.ts). Each entry is the server's config
 * object as written (its `${VAR}` references unexpanded: the API refuses literal header values, so
 * no secret is written here); every change bumps `servers_epoch`, the one value instances poll.
 */
import { isObject } from '../lib/json.js';
import type { SqlExec } from './sql.js';

export interface StoredServer {
  name: string;
  entry: Record<string, unknown>;
  updatedBy: string;
  updatedAt: number;
}

export interface ServerStore {
  list(): Promise<StoredServer[]>;
  /** Writes (adds or replaces) one server and bumps the epoch, together. */
  put(server: StoredServer): Promise<void>;
  /** Removes one server and bumps the epoch; false when there was none. */
  remove(name: string): Promise<boolean>;
  /** Bumped by every change, in any process sharing the store. */
  epoch(): Promise<number>;
}

/** One row; undefined when it is not what a Manifold writes. Shared with Postgres. */
export function parseStoredServer(row: Record<string, unknown>): StoredServer | undefined {
  const { name, entry, updated_by: updatedBy, updated_at: updatedAt } = row;
  if (typeof name !== 'string' || typeof entry !== 'string' || typeof updatedBy !== 'string')
    return undefined;
  if (typeof updatedAt !== 'number') return undefined;
  try {
    const parsed: unknown = JSON.parse(entry);
    return isObject(parsed) ? { name, entry: parsed, updatedBy, updatedAt } : undefined;
  } catch {
    return undefined;
  }
}

const PUT = `INSERT INTO stored_servers (name, entry, updated_by, updated_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (name) DO UPDATE SET entry = excluded.entry, updated_by = excluded.updated_by,
    updated_at = excluded.updated_at`;
const BUMP = `INSERT INTO meta (key, value) VALUES ('servers_epoch', 1)
  ON CONFLICT (key) DO UPDATE SET value = value + 1`;

export class SqlServerStore implements ServerStore {
  constructor(private readonly sql: SqlExec) {}

  async list(): Promise<StoredServer[]> {
    const rows = this.sql.exec<Record<string, unknown>>(
      'SELECT name, entry, updated_by, updated_at FROM stored_servers ORDER BY name',
    );
    return rows.map(parseStoredServer).filter((s): s is StoredServer => s !== undefined);
  }

  async put(s: StoredServer): Promise<void> {
    this.sql.transaction(() => {
      this.sql.exec(PUT, s.name, JSON.stringify(s.entry), s.updatedBy, s.updatedAt);
      this.sql.exec(BUMP);
    });
  }

  async remove(name: string): Promise<boolean> {
    return this.sql.transaction(() => {
      const gone = this.sql.exec('DELETE FROM stored_servers WHERE name = ? RETURNING name', name).length > 0;
      if (gone) this.sql.exec(BUMP);
      return gone;
    });
  }

  async epoch(): Promise<number> {
    const row = this.sql.exec<{ value: unknown }>("SELECT value FROM meta WHERE key = 'servers_epoch'")[0];
    return typeof row?.value === 'number' ? row.value : 0;
  }
}

export class MemoryServerStore implements ServerStore {
  private readonly rows = new Map<string, string>();
  private bumps = 0;

  async list(): Promise<StoredServer[]> {
    return [...this.rows.values()]
      .map((text) => parseStoredServer(JSON.parse(text) as Record<string, unknown>))
      .filter((s): s is StoredServer => s !== undefined)
      .sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  async put(s: StoredServer): Promise<void> {
    this.rows.set(
      s.name,
      JSON.stringify({
        name: s.name,
        entry: JSON.stringify(s.entry),
        updated_by: s.updatedBy,
        updated_at: s.updatedAt,
      }),
    );
    this.bumps++;
  }

  async remove(name: string): Promise<boolean> {
    const gone = this.rows.delete(name);
    if (gone) this.bumps++;
    return gone;
  }

  async epoch(): Promise<number> {
    return this.bumps;
  }
}
