import { LRUCache } from 'lru-cache';
import type { Principal } from '../auth/principal.js';
import type { ResumableStream } from './resumable.js';
import type { SseStream } from './sse.js';

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
  /** In-flight downstream requests, for notifications/cancelled. */
  inflight: Map<string, { abort(reason?: unknown): void }>;
}

export function inflightKey(id: string | number): string {
  return `${typeof id}:${id}`;
}

/**
 * A bounded session table: the oldest idle session is evicted past `max`, and an evicted or
 * expired session gets 404 (SECURITY E5), after which a client re-initializes.
 */
export class SessionTable {
  private readonly cache: LRUCache<string, Session>;

  constructor(options: { max: number; idleSeconds: number }) {
    this.cache = new LRUCache<string, Session>({
      max: options.max,
      ttl: options.idleSeconds * 1000,
      updateAgeOnGet: true,
      dispose: (session) => endSession(session),
    });
  }

  create(
    principal: Principal,
    protocolVersion: string,
    now: number,
    clientCapabilities: Record<string, unknown> = {},
  ): Session {
    const session: Session = {
      id: crypto.randomUUID(),
      owner: principal.key,
      principal,
      protocolVersion,
      createdAt: now,
      clientCapabilities,
      seen: {},
      replies: new Map(),
      replays: new Map(),
      inflight: new Map(),
    };
    this.cache.set(session.id, session);
    return session;
  }

  /** The session if it exists and belongs to `owner`; otherwise undefined, indistinguishably. */
  get(id: string, owner: string): Session | undefined {
    const s = this.cache.get(id);
    return s && s.owner === owner ? s : undefined;
  }

  delete(id: string): void {
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
  for (const c of session.inflight.values()) c.abort(new Error('session ended'));
  session.inflight.clear();
}
