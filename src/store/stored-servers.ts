/**
 * Servers added through the admin API (#52), kept in the store and merged over the config file's
 * by every instance that shares it (gateway/managed-servers.ts). Each entry is the server's config
 * object as written (its `${VAR}` references unexpanded: the API refuses literal header values, so
 * no secret is written here); every change bumps `servers_epoch`, the one value instances poll.
 */
import { isObject } from '../lib/json.js';
import type { StateSql } from './sql.js';

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

/** One row; undefined when it is not what a Manifold writes. */
function parseStoredServer(row: Record<string, unknown>): StoredServer | undefined {
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

/** The queries, for tables prefixed `p` (Postgres: `manifold_`); `?` bindings. */
function serverQueries(p: string) {
  // Each change commits with its epoch bump, so an instance that sees the new epoch reads the change.
  const bump = `ON CONFLICT (key) DO UPDATE SET value = ${p}meta.value + 1`;
  return {
    list: `SELECT name, entry, updated_by, updated_at FROM ${p}stored_servers ORDER BY name`,
    put: `INSERT INTO ${p}stored_servers (name, entry, updated_by, updated_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (name) DO UPDATE SET entry = excluded.entry, updated_by = excluded.updated_by,
    updated_at = excluded.updated_at`,
    bump: `INSERT INTO ${p}meta (key, value) VALUES ('servers_epoch', 1) ${bump}`,
    // Before the DELETE in the same transaction, and only when there is a row to remove.
    bumpIfListed: `INSERT INTO ${p}meta (key, value)
  SELECT 'servers_epoch', 1 WHERE EXISTS (SELECT 1 FROM ${p}stored_servers WHERE name = ?) ${bump}`,
    remove: `DELETE FROM ${p}stored_servers WHERE name = ? RETURNING name`,
    epoch: `SELECT value FROM ${p}meta WHERE key = 'servers_epoch'`,
  };
}

/** Stored servers over SQL: a SQLite file on Node, a Durable Object on Workers, Postgres. */
export class SqlServerStore implements ServerStore {
  private readonly q: ReturnType<typeof serverQueries>;

  constructor(private readonly sql: StateSql) {
    this.q = serverQueries(sql.prefix ?? '');
  }

  async list(): Promise<StoredServer[]> {
    const rows = await this.sql.query(this.q.list, []);
    return rows.map(parseStoredServer).filter((s): s is StoredServer => s !== undefined);
  }

  async put(s: StoredServer): Promise<void> {
    await this.sql.atomically([
      [this.q.put, [s.name, JSON.stringify(s.entry), s.updatedBy, s.updatedAt]],
      [this.q.bump, []],
    ]);
  }

  async remove(name: string): Promise<boolean> {
    const [, removed] = await this.sql.atomically([
      [this.q.bumpIfListed, [name]],
      [this.q.remove, [name]],
    ]);
    return (removed?.length ?? 0) > 0;
  }

  async epoch(): Promise<number> {
    const value = (await this.sql.query(this.q.epoch, []))[0]?.value;
    return typeof value === 'number' ? value : 0;
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
