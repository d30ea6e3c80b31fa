import type { Catalog } from '../aggregate/catalog.js';
import { type MetricFamily, OTHER, type Sample } from './metrics.js';
import type { RequestRecord } from './record.js';

/** Upper bounds of the latency buckets, in milliseconds: 1 ms to a minute (the default call deadline). */
export const DURATION_BUCKETS_MS = [
  1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000,
];

export interface LabelLimits {
  /** Distinct `tool` label values; past it, new names count as "other". Default 1000. */
  tools?: number;
  /** Distinct `tenant` label values (rate-limit refusals); past it, "other". Default 100. */
  tenants?: number;
}

/** Counts of one histogram series (method, server, verdict): per bucket, not yet cumulative. */
interface Latency {
  labels: Record<string, string>;
  count: number;
  sumMs: number;
  buckets: number[];
}

/** Counters of one (method, server, tool, verdict), and the latency series it feeds. */
interface Series {
  labels: Record<string, string>;
  count: number;
  bytesIn: number;
  bytesOut: number;
  latency: Latency;
}

/** A tenant label is at most this long: a token's claim is not ours to print whole. */
const MAX_TENANT_CHARS = 64;

/**
 * The request counters, fed by the gateway's observers (record.ts): one string key finds the
 * series, and the rest is additions, where a Prometheus client would hash the label set of each
 * family on every observation. The families are built only when scraped.
 *
 * Label cardinality is bounded: `tool` only names tools of the current catalog (anything else,
 * such as a misspelt or invisible name, is "other"), at most `limits.tools` of them; `tenant` at
 * most `limits.tenants`. `method`, `server` and `verdict` come from code and config.
 */
export class RequestMetrics {
  private readonly series = new Map<string, Series>();
  private readonly latency = new Map<string, Latency>();
  private readonly tools = new Set<string>();
  private readonly limited = new Map<string, number>();
  private readonly maxTools: number;
  private readonly maxTenants: number;

  constructor(
    private readonly catalog: () => Catalog,
    limits: LabelLimits = {},
  ) {
    this.maxTools = limits.tools ?? 1000;
    this.maxTenants = limits.tenants ?? 100;
  }

  /** The observer: bound, so it can be handed to `gateway.observers.add` as it is. */
  readonly observe = (r: RequestRecord): void => {
    const tool = this.toolLabel(r, this.catalog().byName);
    const server = r.server ?? '';
    const key = `${r.method}\0${server}\0${tool}\0${r.verdict}`;
    const s = this.series.get(key) ?? this.open(key, r.method, server, tool, r.verdict);
    s.count++;
    s.bytesIn += r.bytesIn;
    s.bytesOut += r.bytesOut;
    const l = s.latency;
    l.count++;
    l.sumMs += r.durationMs;
    let i = 0;
    while (i < DURATION_BUCKETS_MS.length && r.durationMs > DURATION_BUCKETS_MS[i]!) i++;
    l.buckets[i]!++;
    if (r.reason === 'ERR_RATE_LIMITED') {
      const tenant = this.tenantLabel(r.tenant);
      this.limited.set(tenant, (this.limited.get(tenant) ?? 0) + 1);
    }
  };

  /** A tool's own name only while the catalog holds it, and only for the first `maxTools` names. */
  private toolLabel(r: RequestRecord, names: Catalog['byName']): string {
    if (r.method !== 'tools/call' || r.target === null) return '';
    const name = r.target;
    if (!names.has(name)) return OTHER;
    if (this.tools.has(name)) return name;
    if (this.tools.size >= this.maxTools) return OTHER;
    this.tools.add(name);
    return name;
  }

  private tenantLabel(tenant: string): string {
    const t = tenant.slice(0, MAX_TENANT_CHARS);
    return this.limited.has(t) || this.limited.size < this.maxTenants ? t : OTHER;
  }

  private open(key: string, method: string, server: string, tool: string, verdict: string): Series {
    const latencyKey = `${method}\0${server}\0${verdict}`;
    let latency = this.latency.get(latencyKey);
    if (!latency) {
      latency = {
        labels: { method, server, verdict },
        count: 0,
        sumMs: 0,
        // One more than the bounds: the last counts what only +Inf holds.
        buckets: new Array<number>(DURATION_BUCKETS_MS.length + 1).fill(0),
      };
      this.latency.set(latencyKey, latency);
    }
    const s: Series = {
      labels: { method, server, tool, verdict },
      count: 0,
      bytesIn: 0,
      bytesOut: 0,
      latency,
    };
    this.series.set(key, s);
    return s;
  }

  families(): MetricFamily[] {
    const all = [...this.series.values()];
    const counter = (name: string, help: string, value: (s: Series) => number): MetricFamily => ({
      name,
      help,
      type: 'counter',
      samples: all.map((s) => ({ name, labels: s.labels, value: value(s) })),
    });
    return [
      counter(
        'manifold_requests_total',
        'Audited requests (tools/call and the relayed methods) by method, server, tool and verdict.',
        (s) => s.count,
      ),
      this.durations(),
      counter(
        'manifold_request_bytes_in_total',
        'Bytes of the requests received from clients, by method, server, tool and verdict.',
        (s) => s.bytesIn,
      ),
      counter(
        'manifold_request_bytes_out_total',
        'Bytes of the answers sent to clients, by method, server, tool and verdict.',
        (s) => s.bytesOut,
      ),
      {
        name: 'manifold_rate_limited_total',
        help: 'Calls refused by the per-tenant rate limit, by tenant.',
        type: 'counter',
        samples: [...this.limited].map(([tenant, value]) => ({
          name: 'manifold_rate_limited_total',
          labels: { tenant },
          value,
        })),
      },
    ];
  }

  private durations(): MetricFamily {
    const name = 'manifold_request_duration_seconds';
    const samples: Sample[] = [];
    for (const l of this.latency.values()) {
      let cumulative = 0;
      DURATION_BUCKETS_MS.forEach((bound, i) => {
        cumulative += l.buckets[i]!;
        samples.push({
          name: `${name}_bucket`,
          labels: { ...l.labels, le: String(bound / 1000) },
          value: cumulative,
        });
      });
      samples.push({ name: `${name}_bucket`, labels: { ...l.labels, le: '+Inf' }, value: l.count });
      samples.push({ name: `${name}_sum`, labels: l.labels, value: l.sumMs / 1000 });
      samples.push({ name: `${name}_count`, labels: l.labels, value: l.count });
    }
    return {
      name,
      help: 'Time from receiving a request to answering it, by method, server and verdict.',
      type: 'histogram',
      samples,
    };
  }
}
