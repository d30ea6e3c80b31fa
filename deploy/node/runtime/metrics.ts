import { Counter, collectDefaultMetrics, type Metric, Registry } from 'prom-client';
import type { Exposition, MetricFamily, MetricsExporter } from '../../../src/observe/metrics.js';

/**
 * The Node exporter: prom-client's registry writes the exposition (its escaping, its format), with
 * its default metrics (process CPU and memory, heap, event loop lag, GC) prefixed `manifold_`.
 *
 * The gateway's own families are counted in the core (src/observe/metrics.ts), not in prom-client
 * metrics, which hash their labels on every observation. Each family is registered as an object
 * of the shape the registry reads from its own metrics (`get()` answering name, help, type and
 * values), holding the values of the scrape under way.
 */
export function promExporter(): MetricsExporter {
  const registry = new Registry();
  const before = process.cpuUsage();
  collectDefaultMetrics({ register: registry, prefix: 'manifold_' });
  // prom-client counts CPU from when it starts, and it is loaded by the first scrape (serve.ts):
  // the CPU spent before is credited, so the counters are the process's totals.
  const credit = (name: string, micros: number) => {
    const counter = registry.getSingleMetric(`manifold_process_cpu_${name}`);
    if (counter instanceof Counter) counter.inc(micros / 1e6);
  };
  credit('user_seconds_total', before.user);
  credit('system_seconds_total', before.system);
  credit('seconds_total', before.user + before.system);
  let current = new Map<string, MetricFamily>();
  const registered = new Set<string>();
  const adapter = (name: string) => ({
    name,
    // The registry reads these when it renders; they describe the family of this scrape.
    get help() {
      return current.get(name)?.help ?? name;
    },
    get type() {
      return current.get(name)?.type ?? 'gauge';
    },
    aggregator: 'sum' as const,
    get: async () => {
      const f = current.get(name);
      return {
        name,
        help: f?.help ?? name,
        type: f?.type ?? 'gauge',
        aggregator: 'sum' as const,
        values: (f?.samples ?? []).map((s) => ({ metricName: s.name, labels: s.labels, value: s.value })),
      };
    },
    reset() {},
  });
  return {
    async render(families): Promise<Exposition> {
      current = new Map(families.map((f) => [f.name, f]));
      for (const f of families) {
        if (registered.has(f.name)) continue;
        registered.add(f.name);
        registry.registerMetric(adapter(f.name) as unknown as Metric);
      }
      // The registry calls each `get()` before its first await, so one scrape reads one `current`.
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
