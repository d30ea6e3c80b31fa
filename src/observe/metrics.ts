/**
 * The gateway's metrics as plain data, runtime-neutral: the core counts and collects them
 * (request-metrics.ts, server/http/metrics.ts), and the runtime turns them into an exposition
 * (Node: prom-client, in deploy/node/runtime/metrics.ts; elsewhere `textExporter`, below).
 * Nothing here imports a metrics library.
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

/** Prometheus text format 0.0.4, as prom-client's registry names it. */
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Label values escape backslash, double quote and newline (exposition formats: text format). */
const labelValue = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
/** HELP text escapes backslash and newline only. */
const helpText = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function number(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
  return String(v);
}

/**
 * The exposition written without a library, for a runtime without prom-client (the Worker): the
 * gateway's own families only, in the layout prom-client writes (a blank line between families).
 * Names and label names come from the code; label values and help are escaped here.
 */
export function textExporter(): MetricsExporter {
  return {
    async render(families: readonly MetricFamily[]): Promise<Exposition> {
      const blocks = families.map((f) => {
        const lines = [`# HELP ${f.name} ${helpText(f.help)}`, `# TYPE ${f.name} ${f.type}`];
        for (const s of f.samples) {
          const pairs = Object.entries(s.labels).map(([k, v]) => `${k}="${labelValue(v)}"`);
          lines.push(`${s.name}${pairs.length > 0 ? `{${pairs.join(',')}}` : ''} ${number(s.value)}`);
        }
        return lines.join('\n');
      });
      return { contentType: CONTENT_TYPE, body: `${blocks.join('\n\n')}\n` };
    },
  };
}
