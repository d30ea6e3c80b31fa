/**
 * Whether `manifold serve` traces, and where to: from `gateway.tracing` and the standard OTEL_*
 * variables (OpenTelemetry SDK configuration, "General SDK Configuration" and the OTLP exporter's
 * variables). Decided once, at start. Nothing here loads the OTel SDK: tracing.ts does, and only
 * when this says tracing is on.
 */
import type { TracingConfig } from '../../../src/config/types.js';

export type SpanExporterKind = 'otlp' | 'console';

export interface TracingSettings {
  exporters: SpanExporterKind[];
  /** Where OTLP spans are POSTed (the full traces URL). */
  tracesUrl: string;
  serviceName: string;
}

type Env = Record<string, string | undefined>;

const DEFAULT_BASE = 'http://localhost:4318';

/** `<base>/v1/traces`, as OTEL_EXPORTER_OTLP_ENDPOINT is read (the per-signal path is appended). */
function tracesPath(base: string): string {
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

const set = (v: string | undefined): v is string => v !== undefined && v.trim() !== '';

/**
 * The settings, or undefined when tracing is off. Off by default. `OTEL_SDK_DISABLED=true` and
 * `OTEL_TRACES_EXPORTER=none` always win. Otherwise it is on when `gateway.tracing` is an object,
 * when OTEL_TRACES_EXPORTER names otlp or console, or when an OTLP endpoint variable is set.
 * The config's fields win over the variables (they were written for this gateway); the variables
 * fill what it leaves out.
 */
export function tracingSettings(config: TracingConfig | false, env: Env): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const named = set(env.OTEL_TRACES_EXPORTER)
    ? env.OTEL_TRACES_EXPORTER.split(',').map((s) => s.trim().toLowerCase())
    : [];
  if (named.includes('none')) return undefined;
  const known = named.filter((n): n is SpanExporterKind => n === 'otlp' || n === 'console');
  const endpointVar = set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) || set(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  if (config === false && known.length === 0 && !endpointVar) return undefined;
  const given = config === false ? {} : config;
  let tracesUrl: string;
  if (given.otlpEndpoint !== undefined) tracesUrl = tracesPath(given.otlpEndpoint);
  else if (set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT))
    tracesUrl = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.trim();
  else if (set(env.OTEL_EXPORTER_OTLP_ENDPOINT))
    tracesUrl = tracesPath(env.OTEL_EXPORTER_OTLP_ENDPOINT.trim());
  else tracesUrl = tracesPath(DEFAULT_BASE);
  const serviceName =
    given.serviceName ?? (set(env.OTEL_SERVICE_NAME) ? env.OTEL_SERVICE_NAME.trim() : 'manifold');
  return { exporters: known.length > 0 ? [...new Set(known)] : ['otlp'], tracesUrl, serviceName };
}
