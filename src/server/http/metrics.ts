import type { Hono, MiddlewareHandler } from 'hono';
import type { Authenticator } from '../../auth/principal.js';
import { ManifoldError } from '../../errors.js';
import type { Gateway } from '../../gateway/gateway.js';
import type { DriftEvent } from '../../guards/drift/verdict.js';
import type { MetricFamily, MetricsExporter, Sample } from '../../observe/metrics.js';
import { type LabelLimits, RequestMetrics } from '../../observe/request-metrics.js';
import type { UpstreamState } from '../../upstream/types.js';

export interface MetricsRoute {
  gateway: Gateway;
  exporter: MetricsExporter;
  /** `gateway.metricsPath`. */
  path: string;
  /** The Origin and Host guard /healthz has (IP literals allowed: Prometheus scrapes by address). */
  guard: MiddlewareHandler;
  /** Set when `gateway.auth` is on: a scrape then needs a token with the admin scope. */
  authenticate?: Authenticator;
  edge: () => EdgeCounts;
  limits?: LabelLimits;
}

/**
 * `GET <metricsPath>` in the exporter's format (Prometheus text on Node). The request counters
 * start listening here, so a gateway without an exporter, or with `metricsPath: false`, builds no
 * record per call at all (observe/record.ts `active`).
 *
 * @example
 * mountMetrics(app, { gateway, exporter, path: '/metrics', guard, edge: () => counts });
 */
export function mountMetrics(app: Hono, route: MetricsRoute): void {
  const { gateway, exporter, authenticate } = route;
  const requests = new RequestMetrics(() => gateway.catalog, route.limits);
  gateway.observers.add(requests.observe);
  app.use(route.path, route.guard);
  app.get(route.path, async (c) => {
    if (authenticate) {
      // A missing or bad token throws the 401 /mcp answers with; a valid one without the admin
      // scope learns nothing either: counts per tool and tenant are operator detail.
      const principal = await authenticate(c.req.raw);
      if (!principal.admin) {
        throw new ManifoldError('ERR_FORBIDDEN', 'metrics need a token with the manifold:admin scope');
      }
    }
    const { contentType, body } = await exporter.render([
      ...requests.families(),
      ...gateway.policyMetrics.families(),
      ...stateFamilies(gateway, route.edge()),
    ]);
    return c.body(body, 200, { 'content-type': contentType, 'cache-control': 'no-store' });
  });
}

/** Every state an upstream can be in: each gets a 0/1 sample, so a change is a value change. */
const STATES: readonly UpstreamState[] = [
  'connecting',
  'ready',
  'backoff',
  'failed',
  'disabled',
  'unsupported',
  'idle',
  'closed',
];

/** What the HTTP edge holds, read when scraped (the edge owns sessions and listen streams). */
export interface EdgeCounts {
  /** Legacy (2025-11-25 and earlier) sessions in the session table. */
  sessions: number;
  /** Open `subscriptions/listen` streams (2026-07-28). */
  listenStreams: number;
}

type Kind = MetricFamily['type'];

const family = (name: string, type: Kind, help: string, samples: Omit<Sample, 'name'>[]): MetricFamily => ({
  name,
  help,
  type,
  samples: samples.map((s) => ({ name, ...s })),
});

/**
 * The gauges and the counters kept by other parts (upstream reconnects, drift decisions),
 * collected when scraped: nothing is added to any request's path for them. Labels are server
 * names from the config, states and drift kinds from code: bounded.
 */
export function stateFamilies(gateway: Gateway, edge: EdgeCounts): MetricFamily[] {
  const upstreams = gateway.health().upstreams;
  const per = (value: (u: (typeof upstreams)[number]) => number) =>
    upstreams.map((u) => ({ labels: { server: u.name }, value: value(u) }));
  const events: Omit<Sample, 'name'>[] = [];
  for (const [server, counts] of gateway.drift.events) {
    for (const [kind, value] of counts)
      events.push({ labels: { server, kind: kind satisfies DriftEvent }, value });
  }
  return [
    family(
      'manifold_upstream_up',
      'gauge',
      '1 when the upstream is connected and listed, 0 otherwise.',
      per((u) => (u.state === 'ready' ? 1 : 0)),
    ),
    family(
      'manifold_upstream_state',
      'gauge',
      'The upstream state: 1 for the current one, 0 for the others.',
      upstreams.flatMap((u) =>
        STATES.map((state) => ({ labels: { server: u.name, state }, value: u.state === state ? 1 : 0 })),
      ),
    ),
    family(
      'manifold_upstream_info',
      'gauge',
      'The transport in use and, once connected, the era and protocol revision the upstream speaks (always 1).',
      upstreams.map((u) => ({
        labels: {
          server: u.name,
          transport: u.transport,
          era: u.era ?? '',
          protocol_version: u.protocolVersion ?? '',
        },
        value: 1,
      })),
    ),
    family(
      'manifold_upstream_tools',
      'gauge',
      'Tools the upstream lists (0 while not ready).',
      per((u) => u.tools),
    ),
    family(
      'manifold_upstream_consecutive_failures',
      'gauge',
      'Failed connection attempts since the last good connection.',
      per((u) => u.consecutiveFailures),
    ),
    family(
      'manifold_upstream_reconnects_total',
      'counter',
      'Connection attempts after the first: retries after a failure or a lost connection, and session renewals.',
      per((u) => u.reconnects),
    ),
    family(
      'manifold_upstream_instances',
      'gauge',
      'Live per-tenant or per-subject instances of a server with isolation.',
      upstreams.flatMap((u) => {
        const isolation = gateway.pool.get(u.name)?.config.isolation;
        if (!isolation || isolation === 'shared') return [];
        return [{ labels: { server: u.name }, value: gateway.isolated.count(u.name) }];
      }),
    ),
    family(
      'manifold_drift_events_total',
      'counter',
      'Drift decisions, each counted once as it is logged: quarantined, withheld, removed, identity_changed, baseline_unreadable.',
      events,
    ),
    family(
      'manifold_drift_quarantined',
      'gauge',
      'Tools held in quarantine (changed since trusted).',
      per((u) => u.drift?.quarantined.length ?? 0),
    ),
    family(
      'manifold_drift_withheld',
      'gauge',
      'New tools withheld until re-trusted.',
      per((u) => u.drift?.withheld.length ?? 0),
    ),
    family(
      'manifold_drift_identity_changed',
      'gauge',
      '1 when the configured identity changed since trust and nothing of the server is served.',
      per((u) => (u.drift?.identityChanged ? 1 : 0)),
    ),
    family('manifold_catalog_tools', 'gauge', 'Tools in the merged catalog.', [
      { labels: {}, value: gateway.catalog.entries.length },
    ]),
    family('manifold_calls_in_flight', 'gauge', 'Calls relayed and not yet answered.', [
      { labels: {}, value: gateway.inflightCalls },
    ]),
    family('manifold_sessions', 'gauge', 'Legacy (2025-11-25) sessions held by this instance.', [
      { labels: {}, value: edge.sessions },
    ]),
    family('manifold_listen_streams', 'gauge', 'Open subscriptions/listen streams (2026-07-28).', [
      { labels: {}, value: edge.listenStreams },
    ]),
  ];
}
