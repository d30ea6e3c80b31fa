/**
 * The gateway's metrics as plain data, runtime-neutral: the core counts and collects them
 * (request-metrics.ts, server/http/metrics.ts), and the runtime turns them into an exposition (Node: prom-client, in
 * deploy/node/runtime/metrics.ts). Nothing here imports a metrics library.
 */

/** One line of an exposition: the full sample name (`_bucket`, `_sum`, `_count` included). */
export interface Sample {
  name: string;
  labels: Readonly<Record<string, string>>;
  value: number;
}

/** A metric family: one `# HELP` and `# TYPE`, and its samples. */
export interface MetricFamily {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  samples: Sample[];
}

/** What a scrape answers with. */
export interface Exposition {
  contentType: string;
  body: string;
}

/**
 * The runtime's side of `/metrics`: renders the gateway's families, with whatever the runtime
 * adds of its own (Node: process CPU, memory, event loop lag).
 */
export interface MetricsExporter {
  render(families: readonly MetricFamily[]): Promise<Exposition>;
}

/** The label value that stands for anything not labelled by its own name (unknown, or over a cap). */
export const OTHER = 'other';
