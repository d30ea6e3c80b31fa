import { LRUCache } from 'lru-cache';
import type { Principal } from '../../auth/principal.js';
import { KeyedList } from '../../lib/tables.js';
import { CallerBounds } from './caller-bounds.js';
import type { ResumableStream, SseStream } from './sse.js';

export interface Session {
  id: string;
  /** Principal.key of whoever opened it; any other principal gets 404 (SECURITY A4, A14). */
  owner: string;
  /** The principal of the latest request on this session (what its list_changed is judged by). */
  principal: Principal;
  protocolVersion: string;
  createdAt: number;
  /** The standalone GET stream, for server-initiated notifications such as list_changed. */
  stream?: SseStream;
  /** Digests of what the owner could see of each list when last told of a change (see ListenRegistry). */
  seen: Partial<Record<'tools' | 'prompts' | 'resources', string>>;
  /** The level set with `logging/setLevel`; absent until the client sets one. */
  logLevel?: string;
  /** The capabilities the client declared at initialize. */
  clientCapabilities: Record<string, unknown>;
  /** Receives `notifications/resources/updated` for this session's subscriptions (on its GET stream). */
  watcher?: { send(uri: string): void };
  /** Answers the client owes to requests the gateway sent it on a call's stream, by their id. */
  replies: Map<string, (message: { result?: unknown; error?: unknown }) => void>;
  /** POST streams a reconnect with Last-Event-ID can resume (2025-11-25 sessions). */
  replays: Map<string, ResumableStream>;
  /** Runs once when the session ends (deleted, evicted, expired). */
  onEnd?: () => void;
  /** In-flight downstream requests, for notifications/cancelled (not a Map: see tables.ts). */
  inflight: KeyedList<{ abort(reason?: unknown): void }>;
  /** When the shared record was last refreshed (shared-sessions.ts); absent when not shared. */
  touchedAt?: number;
}

/**
 * A session as its shared store keeps it (shared-sessions.ts). No token, header or secret: `owner`
 * is Principal.key (subject and tenant), which binds the id to whoever opened it (SECURITY A4, A14).
 */
export interface SessionRecord {
  id: string;
  owner: string;
  protocolVersion: string;
  clientCapabilities: Record<string, unknown>;
  logLevel?: string;
  createdAt: number;
}

export function inflightKey(id: string | number): string {
  return `${typeof id}:${id}`;
}

/**
 * A bounded session table: the oldest idle session is evicted past `max`, and an evicted or
 * expired session gets 404 (SECURITY E5), after which a client re-initializes. One principal
 * holds at most `perPrincipal` and one tenant at most `perTenant`: past those, the newcomer's
 * own principal's (or tenant's) oldest session goes, so a flood evicts only the flooder's own
 * (#13.7). With `perTenant` below `max`, one tenant never fills the table for the others.
 */
export class SessionTable {
  private readonly cache: LRUCache<string, Session>;
  /** The per-principal and per-tenant bounds; the LRU keeps the total. */
  private readonly bounds: CallerBounds<string>;
  /**
   * Told of each session this table ends for good (deleted, or evicted by a bound), so a shared
   * record goes too; not of one that idled out or went with the process (other instances may
   * still serve it: its row expires on its own).
   */
  onForget?: (id: string) => void;

  constructor(options: { max: number; idleSeconds: number; perPrincipal?: number; perTenant?: number }) {
    this.bounds = new CallerBounds({
      total: Number.POSITIVE_INFINITY,
      perPrincipal: options.perPrincipal ?? options.max,
      perTenant: options.perTenant ?? options.max,
    });
    this.cache = new LRUCache<string, Session>({
      max: options.max,
      ttl: options.idleSeconds * 1000,
      updateAgeOnGet: true,
      dispose: (session, _id, reason) => {
        this.bounds.remove(session.id);
        endSession(session);
        if (reason === 'evict') this.onForget?.(session.id);
      },
    });
  }

  create(
    principal: Principal,
    protocolVersion: string,
    now: number,
    clientCapabilities: Record<string, unknown> = {},
  ): Session {
    const id = crypto.randomUUID();
    return this.insert({
      id,
      owner: principal.key,
      principal,
      protocolVersion,
      createdAt: now,
      clientCapabilities,
    });
  }

  /** A session another instance opened (shared-sessions.ts), under the same bounds as a new one. */
  adopt(record: SessionRecord, principal: Principal): Session {
    return this.insert({ ...record, principal });
  }

  private insert(fields: Omit<Session, 'seen' | 'replies' | 'replays' | 'inflight'>): Session {
    const session: Session = {
      ...fields,
      seen: {},
      replies: new Map(),
      replays: new Map(),
      inflight: new KeyedList(),
    };
    const holder = { key: session.owner, tenant: session.principal.tenant };
    this.bounds.admit(holder, (id) => this.delete(id));
    this.cache.set(session.id, session);
    this.bounds.add(session.id, holder);
    return session;
  }

  /** The session if it exists and belongs to `owner`; otherwise undefined, indistinguishably. */
  get(id: string, owner: string): Session | undefined {
    const s = this.cache.get(id);
    return s && s.owner === owner ? s : undefined;
  }

  /** Ends the session for good (DELETE, or a bound): its shared record goes too. */
  delete(id: string): void {
    if (this.cache.delete(id)) this.onForget?.(id);
  }

  /** Ends the local copy of a session deleted elsewhere (nothing to forget: its record is gone). */
  drop(id: string): void {
    this.cache.delete(id);
  }

  get size(): number {
    return this.cache.size;
  }

  *all(): IterableIterator<Session> {
    yield* this.cache.values();
  }

  clear(): void {
    this.cache.clear();
  }
}

function endSession(session: Session): void {
  session.onEnd?.();
  session.onEnd = undefined;
  session.stream?.close();
  for (const replay of session.replays.values()) replay.disconnect();
  session.replays.clear();
  for (const c of session.inflight.drain()) c.abort(new Error('session ended'));
}
