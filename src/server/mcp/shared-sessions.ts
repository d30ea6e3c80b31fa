/**
 * Legacy sessions shared by several instances (#15): what a session needs to serve `tools/list`
 * and `tools/call` on an instance that did not open it. The record is written at initialize and
 * read only on a local miss, so a session's requests on its own instance cost what they did; the
 * GET stream, in-flight calls, resumable streams and subscriptions stay on the instance that holds
 * them. The Postgres implementation is deploy/node/store/postgres/sessions.ts; without one
 * (SQLite, memory, Workers) nothing here runs.
 */
import type { Principal } from '../../auth/principal.js';
import { ManifoldError } from '../../errors.js';
import type { Session, SessionRecord, SessionTable } from './sessions.js';

export type { SessionRecord };

/** The shared half of the session table. Every method is one statement; none throws to a request. */
export interface SessionStore {
  /** Records a session opened here. */
  put(record: SessionRecord, now: number): Promise<void>;
  /**
   * The record if `owner` opened it and it was used within `idleMs` of `now`, marking it used;
   * otherwise undefined (another owner's id is not even touched).
   */
  take(id: string, owner: string, now: number, idleMs: number): Promise<SessionRecord | undefined>;
  /**
   * Marks it used now and reads back what another instance may have changed (the log level);
   * undefined when the row is gone (deleted elsewhere, idle past `idleMs`, swept).
   */
  touch(id: string, now: number, idleMs: number): Promise<{ logLevel?: string } | undefined>;
  setLogLevel(id: string, level: string): Promise<void>;
  /** Removes it everywhere: the other instances are told (`watch`) and drop their copies. */
  delete(id: string): Promise<void>;
  /** Calls `gone` with each id another instance deleted. */
  watch(gone: (id: string) => void): void;
}

/** Session ids are UUIDs (sessions.ts): anything else is unknown without asking the database. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The table's shared side for one edge. A local hit only compares a timestamp; once per
 * `touchMs` of use it refreshes the row (so an instance the client stopped using does not let it
 * expire) and learns whether it was deleted elsewhere, the backstop for a lost notification.
 */
export class SharedSessions {
  private readonly touchMs: number;

  constructor(
    private readonly store: SessionStore,
    private readonly table: SessionTable,
    private readonly idleMs: number,
    private readonly now: () => number,
    private readonly failed: (what: string, e: unknown) => void,
  ) {
    this.touchMs = Math.min(idleMs / 4, 10_000);
    table.onForget = (id) => void this.store.delete(id).catch((e) => failed('delete', e));
    store.watch((id) => table.drop(id));
  }

  /** A session opened here: recorded before its id is handed out, so any instance finds it next. */
  opened(session: Session): Promise<void> {
    session.touchedAt = session.createdAt;
    return this.ask(
      this.store.put(
        {
          id: session.id,
          owner: session.owner,
          protocolVersion: session.protocolVersion,
          clientCapabilities: session.clientCapabilities,
          createdAt: session.createdAt,
        },
        session.createdAt,
      ),
    );
  }

  /** DELETE: resolves once the record is gone, so any instance answers the id with 404 after. */
  deleted(id: string): Promise<void> {
    return this.ask(this.store.delete(id));
  }

  /** A local hit: refreshes the row now and then, dropping the session when it is gone. */
  used(session: Session): void {
    const now = this.now();
    if (now - (session.touchedAt ?? 0) < this.touchMs) return;
    session.touchedAt = now;
    this.store.touch(session.id, now, this.idleMs).then(
      (row) => {
        if (!row) this.table.drop(session.id);
        else if (row.logLevel !== undefined) session.logLevel = row.logLevel;
      },
      (e) => this.failed('touch', e),
    );
  }

  /**
   * A local miss: the record from the store, adopted into this instance's table when it belongs
   * to `principal`. Another owner's id is unknown here exactly as it is on its own instance.
   */
  async find(id: string, principal: Principal): Promise<Session | undefined> {
    if (!UUID.test(id)) return undefined;
    const now = this.now();
    const record = await this.ask(this.store.take(id, principal.key, now, this.idleMs));
    if (!record || record.owner !== principal.key) return undefined;
    // Another request of this session may have adopted it while the database answered.
    const raced = this.table.get(id, principal.key);
    if (raced) return raced;
    const session = this.table.adopt(record, principal);
    session.touchedAt = now;
    return session;
  }

  setLogLevel(session: Session, level: string): Promise<void> {
    return this.ask(this.store.setLogLevel(session.id, level));
  }

  /** A database that does not answer is a 503 the client may retry, never a 500 or a silent 404. */
  private ask<T>(query: Promise<T>): Promise<T> {
    return query.catch((e: unknown) => {
      this.failed('query', e);
      throw new ManifoldError('ERR_STORE_UNAVAILABLE', 'the session store is unavailable: try again', {
        cause: e,
      });
    });
  }
}
