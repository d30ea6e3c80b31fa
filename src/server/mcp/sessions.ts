import { LRUCache } from 'lru-cache';
import type { Principal } from '../../auth/principal.js';
import { KeyedList } from '../../lib/tables.js';
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
  /** Session ids per owner and per tenant, oldest first (Sets keep insertion order). */
  private readonly byOwner = new Map<string, Set<string>>();
  private readonly byTenant = new Map<string, Set<string>>();
  private readonly perPrincipal: number;
  private readonly perTenant: number;
  /**
   * Told of each session this table ends for good (deleted, or evicted by a bound), so a shared
   * record goes too; not of one that idled out or went with the process (other instances may
   * still serve it: its row expires on its own).
   */
  onForget?: (id: string) => void;

  constructor(options: { max: number; idleSeconds: number; perPrincipal?: number; perTenant?: number }) {
    this.perPrincipal = options.perPrincipal ?? options.max;
    this.perTenant = options.perTenant ?? options.max;
    this.cache = new LRUCache<string, Session>({
      max: options.max,
      ttl: options.idleSeconds * 1000,
      updateAgeOnGet: true,
      dispose: (session, _id, reason) => {
        unindex(this.byOwner, session.owner, session.id);
        unindex(this.byTenant, session.principal.tenant, session.id);
        endSession(session);
        if (reason === 'evict') this.onForget?.(session.id);
      },
    });
  }

  /** Makes room for one more session of `principal` within its own bounds. */
  private admit(principal: Principal): void {
    const own = this.byOwner.get(principal.key);
    if (own && own.size >= this.perPrincipal) this.delete(own.values().next().value as string);
    const tenant = this.byTenant.get(principal.tenant);
    if (tenant && tenant.size >= this.perTenant) this.delete(tenant.values().next().value as string);
  }

  create(
    principal: Principal,
    protocolVersion: string,
    now: number,
    clientCapabilities: Record<string, unknown> = {},
  ): Session {
    return this.insert({
      id: crypto.randomUUID(),
      owner: principal.key,
      principal,
      protocolVersion,
      createdAt: now,
      clientCapabilities,
      seen: {},
      replies: new Map(),
      replays: new Map(),
      inflight: new KeyedList(),
    });
  }

  /** A session another instance opened (shared-sessions.ts), under the same bounds as a new one. */
  adopt(record: SessionRecord, principal: Principal): Session {
    return this.insert({
      id: record.id,
      owner: record.owner,
      principal,
      protocolVersion: record.protocolVersion,
      createdAt: record.createdAt,
      clientCapabilities: record.clientCapabilities,
      ...(record.logLevel !== undefined ? { logLevel: record.logLevel } : {}),
      seen: {},
      replies: new Map(),
      replays: new Map(),
      inflight: new KeyedList(),
    });
  }

  private insert(session: Session): Session {
    const principal = session.principal;
    this.admit(principal);
    this.cache.set(session.id, session);
    index(this.byOwner, session.owner, session.id);
    index(this.byTenant, principal.tenant, session.id);
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

function index(map: Map<string, Set<string>>, key: string, id: string): void {
  let ids = map.get(key);
  if (!ids) {
    ids = new Set();
    map.set(key, ids);
  }
  ids.add(id);
}

function unindex(map: Map<string, Set<string>>, key: string, id: string): void {
  const ids = map.get(key);
  if (!ids) return;
  ids.delete(id);
  if (ids.size === 0) map.delete(key);
}

function endSession(session: Session): void {
  session.onEnd?.();
  session.onEnd = undefined;
  session.stream?.close();
  for (const replay of session.replays.values()) replay.disconnect();
  session.replays.clear();
  for (const c of session.inflight.drain()) c.abort(new Error('session ended'));
}
