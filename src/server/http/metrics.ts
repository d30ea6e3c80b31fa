import type { Hono, MiddlewareHandler } from 'hono';
import type { Authenticator } from '../../auth/principal.js';
import { ManifoldError } from '../../errors.js';
import type { Gateway } from '../../gateway/gateway.js';
import type { MetricsExporter } from '../../observe/metrics.js';
import { type LabelLimits, RequestMetrics } from '../../observe/request-metrics.js';
import { type EdgeCounts, stateFamilies } from '../../observe/state-metrics.js';

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
 * record per call at all (observe.ts `active`).
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
      ...stateFamilies(gateway, route.edge()),
    ]);
    return c.body(body, 200, { 'content-type': contentType, 'cache-control': 'no-store' });
  });
}
