/**
 * Reads `gateway.tracing`: `false`, or `{"otlpEndpoint", "serviceName"}` (both optional; the
 * standard OTEL_* variables fill what is absent, deploy/node/runtime/tracing-env.ts).
 */
import { FIELD_TEXT, TRACING_SHAPE_TEXT } from './field-text.js';
import { error, type Findings, readSection } from './findings.js';
import type { PathSegment } from './paths.js';
import { TRACING_KEYS, tracingEntrySchema } from './schema.js';
import type { TracingConfig } from './types.js';

export function readTracing(
  f: Findings,
  raw: unknown,
  base: PathSegment[],
): TracingConfig | false | undefined {
  if (raw === false) return false;
  const picked = readSection(f, raw, base, {
    keys: TRACING_KEYS,
    schema: tracingEntrySchema,
    table: FIELD_TEXT.tracing,
    shape: TRACING_SHAPE_TEXT,
  });
  if (!picked) return undefined;
  const out: TracingConfig = {};
  const endpoint = picked.otlpEndpoint as string | undefined;
  if (endpoint !== undefined) {
    const problem = endpointProblem(endpoint);
    if (problem) {
      error(f, [...base, 'otlpEndpoint'], problem.message, problem.fix);
      return undefined;
    }
    out.otlpEndpoint = endpoint;
  }
  if (picked.serviceName !== undefined) out.serviceName = picked.serviceName as string;
  return out;
}

/** What is wrong with an endpoint, worded without its value (it may hold a secret from ${VAR}). */
function endpointProblem(endpoint: string): { message: string; fix: string } | undefined {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return {
      message: 'is not a URL',
      fix: 'write the OTLP/HTTP base URL of your collector, e.g. "http://127.0.0.1:4318"',
    };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return {
      message: `must be an http: or https: URL, got ${url.protocol}`,
      fix: 'write an http(s) URL; the OTLP/HTTP exporter does not speak other schemes',
    };
  }
  if (url.username || url.password) {
    return {
      message: 'must not carry credentials',
      fix: 'remove user:password@ from the URL and pass credentials in OTEL_EXPORTER_OTLP_HEADERS',
    };
  }
  return undefined;
}
