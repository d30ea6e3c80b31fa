/**
 * Recent calls for the status page (#16): per server, and per tenant and server for a tenant's
 * own view, a ring of the last calls' durations and outcomes. Memory is bounded whatever the
 * traffic: fixed-size rings, at most `maxTenants` tenants tracked (the least recently seen one
 * goes), and at most `maxServers` server names per scope (server names come from config, plus
 * one bucket for requests that never resolved to a server). Recording a call is a few array
 * writes; percentiles are computed when the page asks, never per call.
 */
import { LRUCache } from 'lru-cache';
import type { RequestRecord } from './record.js';

/** Counts and latency of one server's recent calls, as the JSON view shows them. */
export interface CallStats {
  server: string;
  /** Calls seen since the gateway started (or since this tenant was last evicted). */
  total: number;
  /** Calls in the window the numbers below describe. */
  window: number;
  /** Of those, the ones not allowed or not answered well (verdict other than `allowed`). */
  errors: number;
  p50Ms: number;
  p99Ms: number;
}

/** The bucket of requests that named no known server (an unknown tool, say). */
export const UNRESOLVED = '(unresolved)';

class Ring {
  private readonly durations: Float64Array;
  private readonly failed: Uint8Array;
  private next = 0;
  private size = 0;
  total = 0;

  constructor(capacity: number) {
    this.durations = new Float64Array(capacity);
    this.failed = new Uint8Array(capacity);
  }

  add(durationMs: number, failed: boolean): void {
    this.durations[this.next] = durationMs;
    this.failed[this.next] = failed ? 1 : 0;
    this.next = (this.next + 1) % this.durations.length;
    if (this.size < this.durations.length) this.size++;
    this.total++;
  }

  stats(server: string): CallStats {
    const window = this.durations.slice(0, this.size).sort();
    let errors = 0;
    for (let i = 0; i < this.size; i++) errors += this.failed[i]!;
    return {
      server,
      total: this.total,
      window: this.size,
      errors,
      p50Ms: percentile(window, 0.5),
      p99Ms: percentile(window, 0.99),
    };
  }
}

/** Nearest-rank percentile of sorted values, rounded to 0.01 ms; 0 for none. */
function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1);
  return Math.round(sorted[Math.max(0, rank)]! * 100) / 100;
}

/** One scope's rings by server name. */
class Scope {
  readonly rings = new Map<string, Ring>();

  constructor(
    private readonly capacity: number,
    private readonly limits: Pick<RecentCallOptions, 'maxServers' | 'configured'>,
  ) {}

  add(server: string, durationMs: number, failed: boolean): void {
    let ring = this.rings.get(server);
    if (!ring) {
      const { maxServers } = this.limits;
      const most = typeof maxServers === 'number' ? maxServers : maxServers();
      if (this.rings.size >= most && !this.dropRemoved()) return;
      ring = new Ring(this.capacity);
      this.rings.set(server, ring);
    }
    ring.add(durationMs, failed);
  }

  /** Drops one server that is no longer configured; false when every one still is. */
  private dropRemoved(): boolean {
    const { configured } = this.limits;
    if (!configured) return false;
    for (const name of this.rings.keys()) {
      if (name !== UNRESOLVED && !configured(name)) return this.rings.delete(name);
    }
    return false;
  }

  stats(keep: (server: string) => boolean = () => true): CallStats[] {
    const out: CallStats[] = [];
    for (const [server, ring] of this.rings) if (keep(server)) out.push(ring.stats(server));
    return out.sort((a, b) => (a.server < b.server ? -1 : a.server > b.server ? 1 : 0));
  }
}

export interface RecentCallOptions {
  /** Calls kept per server for the gateway-wide numbers (default 1024). */
  window?: number;
  /** Calls kept per server in each tenant's numbers (default 128). */
  tenantWindow?: number;
  /** Tenants tracked at once (default 256); the least recently seen one is dropped for a new one. */
  maxTenants?: number;
  /** Server names per scope: the configured servers and the unresolved bucket (read as servers come). */
  maxServers: number | (() => number);
  /**
   * Whether a server is configured now. A reload may remove servers and add others: once a scope
   * is full, a server no longer configured gives its place to a new one. Absent: never.
   */
  configured?: (server: string) => boolean;
}

export class RecentCalls {
  private readonly all: Scope;
  /** The least recently seen tenant goes for a new one. */
  private readonly tenants: LRUCache<string, Scope>;
  private readonly tenantWindow: number;
  private readonly limits: Pick<RecentCallOptions, 'maxServers' | 'configured'>;

  constructor(options: RecentCallOptions) {
    this.limits = options;
    this.all = new Scope(options.window ?? 1024, this.limits);
    this.tenantWindow = options.tenantWindow ?? 128;
    this.tenants = new LRUCache({ max: options.maxTenants ?? 256 });
  }

  /** The observer to add to `gateway.observers`. */
  readonly observe = (record: RequestRecord): void => {
    const server = record.server ?? UNRESOLVED;
    const failed = record.verdict !== 'allowed';
    this.all.add(server, record.durationMs, failed);
    let scope = this.tenants.get(record.tenant);
    if (!scope) {
      scope = new Scope(this.tenantWindow, this.limits);
      this.tenants.set(record.tenant, scope);
    }
    scope.add(server, record.durationMs, failed);
  };

  /** Every server's recent calls, for an admin. */
  stats(): CallStats[] {
    return this.all.stats();
  }

  /** One tenant's recent calls on the servers `keep` lets it see. */
  tenantStats(tenant: string, keep: (server: string) => boolean): CallStats[] {
    return this.tenants.peek(tenant)?.stats(keep) ?? [];
  }

  /** How many tenants are tracked now (at most `maxTenants`). */
  get trackedTenants(): number {
    return this.tenants.size;
  }
}
