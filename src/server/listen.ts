import type { Principal } from '../auth/principal.js';
import { META } from '../protocol/versions.js';
import type { JsonRpcId } from './jsonrpc.js';
import { SseStream } from './sse.js';

/** The notification filter of `subscriptions/listen` (spec 2026-07-28: patterns/subscriptions). */
export interface ListenFilter {
  toolsListChanged?: boolean;
  promptsListChanged?: boolean;
  resourcesListChanged?: boolean;
  resourceSubscriptions?: string[];
}

export type ChangeKind = 'tools' | 'prompts' | 'resources';
export type Seen = Partial<Record<ChangeKind, string>>;

const FILTER_FIELD = {
  tools: 'toolsListChanged',
  prompts: 'promptsListChanged',
  resources: 'resourcesListChanged',
} as const;

interface Listener {
  id: JsonRpcId;
  principal: Principal;
  filter: ListenFilter;
  stream: SseStream;
  /** What this principal could see of each list when last told; a change it cannot see is not announced. */
  seen: Seen;
}

/**
 * Open `subscriptions/listen` streams on this instance. Each is a request of its own: nothing
 * here outlives the stream, and a client that reconnects to another instance opens a new one.
 * Bounded per principal (the oldest stream is ended first) and in total.
 */
export class ListenRegistry {
  private readonly listeners = new Set<Listener>();

  constructor(private readonly limits: { perPrincipal: number; total: number; keepaliveMs: number }) {}

  /** Which filter fields this gateway honours (the acknowledgement lists only these). */
  static honoured(filter: ListenFilter): ListenFilter {
    const out: ListenFilter = {};
    for (const field of Object.values(FILTER_FIELD)) if (filter[field] === true) out[field] = true;
    return out;
  }

  open(
    id: JsonRpcId,
    principal: Principal,
    filter: ListenFilter,
    seen: Seen,
    onClose?: () => void,
  ): SseStream {
    const mine = [...this.listeners].filter((l) => l.principal.key === principal.key);
    while (mine.length >= this.limits.perPrincipal) this.end(mine.shift()!);
    if (this.listeners.size >= this.limits.total) this.end(this.listeners.values().next().value!);
    const stream = new SseStream({ keepaliveMs: this.limits.keepaliveMs });
    const listener: Listener = { id, principal, filter, stream, seen };
    this.listeners.add(listener);
    stream.onclose = () => {
      this.listeners.delete(listener);
      onClose?.();
    };
    // The acknowledgement comes first, before any notification (patterns/subscriptions, "Acknowledgment").
    stream.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'notifications/subscriptions/acknowledged',
        params: { _meta: { [META.subscriptionId]: id }, notifications: filter },
      }),
    );
    return stream;
  }

  /**
   * Announces a verified change to every stream that asked for it and whose principal's view
   * changed. `viewOf` returns a digest of what a principal can see now.
   */
  changed(kind: ChangeKind, viewOf: (p: Principal) => string): void {
    for (const l of this.listeners) {
      if (!l.filter[FILTER_FIELD[kind]]) continue;
      const now = viewOf(l.principal);
      if (now === l.seen[kind]) continue;
      l.seen[kind] = now;
      l.stream.send(
        JSON.stringify({
          jsonrpc: '2.0',
          method: `notifications/${kind}/list_changed`,
          params: { _meta: { [META.subscriptionId]: l.id } },
        }),
      );
    }
  }

  /** Ends every stream with the graceful-closure result (patterns/subscriptions, "Graceful Closure"). */
  closeAll(): void {
    for (const l of [...this.listeners]) this.end(l);
  }

  get size(): number {
    return this.listeners.size;
  }

  private end(l: Listener): void {
    this.listeners.delete(l);
    l.stream.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: l.id,
        result: { resultType: 'complete', _meta: { [META.subscriptionId]: l.id } },
      }),
    );
    l.stream.close();
  }
}
