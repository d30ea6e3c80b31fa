import type { Principal } from '../../auth/principal.js';
import type { JsonRpcId } from '../../protocol/jsonrpc.js';
import { META } from '../../protocol/versions.js';
import { CallerBounds, type CallerLimits } from './caller-bounds.js';
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
 * Bounded per principal and per tenant before the total (caller-bounds.ts, SECURITY G4): past a
 * bound, the opener's own oldest stream is ended first, so one caller's flood never ends another's.
 */
export class ListenRegistry {
  private readonly listeners = new Set<Listener>();
  private readonly bounds: CallerBounds<Listener>;
  private readonly keepaliveMs: number;

  constructor({ keepaliveMs, ...limits }: CallerLimits & { keepaliveMs: number }) {
    this.bounds = new CallerBounds(limits);
    this.keepaliveMs = keepaliveMs;
  }

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
    this.bounds.admit(principal, (l) => this.end(l));
    const stream = new SseStream({ keepaliveMs: this.keepaliveMs });
    const listener: Listener = { id, principal, filter, stream, seen };
    this.listeners.add(listener);
    this.bounds.add(listener, principal);
    stream.onclose = () => {
      this.listeners.delete(listener);
      this.bounds.remove(listener);
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
    this.bounds.remove(l);
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
