/**
 * Legacy session records on Postgres (#15): the SessionStore (src/server/mcp/shared-sessions.ts) over
 * the state store's pool. One row per session, holding only what `tools/list` and `tools/call`
 * need on another instance (the owner's Principal.key, the negotiated version, the client's
 * capabilities, the log level); never a token or a header. A DELETE notifies `manifold_sessions`
 * in the same statement, so every instance drops its copy when the delete commits.
 */
import type pg from 'pg';
import type { SessionRecord, SessionStore } from '../../../../src/server/mcp/shared-sessions.js';
import { listenForTrust, type TrustListener } from './trust-listener.js';

/** The channel a deleted session is announced on (payload: its id). */
export const SESSIONS_CHANNEL = 'manifold_sessions';

const COLUMNS = 'id, owner, protocol_version, client_capabilities, log_level, created_at';
const PUT = `INSERT INTO manifold_sessions
  (id, owner, protocol_version, client_capabilities, created_at, seen_at)
  VALUES ($1, $2, $3, $4, $5, $5)`;
// Idle past the deadline counts as gone even before the sweep removes the row.
const TAKE = `UPDATE manifold_sessions SET seen_at = GREATEST(seen_at, $3)
  WHERE id = $1 AND owner = $2 AND seen_at >= $4
  RETURNING ${COLUMNS}`;
const TOUCH = `UPDATE manifold_sessions SET seen_at = GREATEST(seen_at, $2)
  WHERE id = $1 AND seen_at >= $3 RETURNING log_level`;
const SET_LEVEL = 'UPDATE manifold_sessions SET log_level = $2 WHERE id = $1';
// Postgres delivers the notification on commit, and only for a row that was there.
const DELETE = `WITH gone AS (DELETE FROM manifold_sessions WHERE id = $1 RETURNING id)
  SELECT pg_notify('${SESSIONS_CHANNEL}', id) FROM gone`;
const SWEEP = 'DELETE FROM manifold_sessions WHERE seen_at < $1';
/** Sweep rows idle past the deadline once per this many new sessions (one DELETE). */
const SWEEP_EVERY = 64;

interface SessionRow {
  id: unknown;
  owner: unknown;
  protocol_version: unknown;
  client_capabilities: unknown;
  log_level: unknown;
  created_at: unknown;
}

export class PostgresSessions implements SessionStore {
  private puts = 0;
  private listener: TrustListener | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly connection: pg.ClientConfig,
    private readonly idleMs: number,
    /** Words a driver error without the URL or its password (store.ts `safeMessage`). */
    private readonly safe: (e: unknown) => string,
    private readonly lost: (e: unknown) => void,
  ) {}

  private async query<R extends pg.QueryResultRow>(
    text: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(text, values);
    } catch (e) {
      throw new Error(this.safe(e));
    }
  }

  async put(record: SessionRecord, now: number): Promise<void> {
    if (this.puts++ % SWEEP_EVERY === 0) await this.query(SWEEP, [now - this.idleMs]);
    await this.query(PUT, [
      record.id,
      record.owner,
      record.protocolVersion,
      JSON.stringify(record.clientCapabilities),
      record.createdAt,
    ]);
  }

  async take(id: string, owner: string, now: number, idleMs: number): Promise<SessionRecord | undefined> {
    const { rows } = await this.query<SessionRow>(TAKE, [id, owner, now, now - idleMs]);
    return rows[0] ? parseSession(rows[0]) : undefined;
  }

  async touch(id: string, now: number, idleMs: number): Promise<{ logLevel?: string } | undefined> {
    const { rows } = await this.query<{ log_level: unknown }>(TOUCH, [id, now, now - idleMs]);
    if (!rows[0]) return undefined;
    const level = rows[0].log_level;
    return typeof level === 'string' ? { logLevel: level } : {};
  }

  async setLogLevel(id: string, level: string): Promise<void> {
    await this.query(SET_LEVEL, [id, level]);
  }

  async delete(id: string): Promise<void> {
    await this.query(DELETE, [id]);
  }

  /**
   * One LISTEN connection of its own, reconnecting with backoff. A notification lost while it is
   * down is caught by the next touch of that session (SharedSessions.used), within seconds.
   */
  watch(gone: (id: string) => void): void {
    this.listener ??= listenForTrust(
      this.connection,
      SESSIONS_CHANNEL,
      (id) => {
        if (id) gone(id);
      },
      this.lost,
    );
  }

  async close(): Promise<void> {
    await this.listener?.close();
  }
}

/** A row as a record; one that does not read as one is treated as unknown (the client re-initializes). */
export function parseSession(row: SessionRow): SessionRecord | undefined {
  const { id, owner, protocol_version, log_level, created_at } = row;
  if (typeof id !== 'string' || typeof owner !== 'string' || typeof protocol_version !== 'string') {
    return undefined;
  }
  if (typeof created_at !== 'number') return undefined;
  let caps: unknown;
  try {
    caps = JSON.parse(String(row.client_capabilities));
  } catch {
    return undefined;
  }
  if (typeof caps !== 'object' || caps === null || Array.isArray(caps)) return undefined;
  return {
    id,
    owner,
    protocolVersion: protocol_version,
    clientCapabilities: caps as Record<string, unknown>,
    ...(typeof log_level === 'string' ? { logLevel: log_level } : {}),
    createdAt: created_at,
  };
}
