/**
 * The OpenTelemetry SDK behind `manifold serve` when tracing is on: a BasicTracerProvider with a
 * BatchSpanProcessor per exporter (OTLP/HTTP, or the console). cli/main.ts loads this module with a
 * dynamic import only then, so a gateway without tracing never loads the SDK.
 * The provider is not registered globally: the tracer reaches the core through `Platform`.
 */
import type { Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import type { TracingSettings } from './tracing-env.js';

export interface RunningTracing {
  tracer: Tracer;
  /** Exports what is buffered and stops; bounded by `timeoutMs`, never throws. */
  shutdown(timeoutMs?: number): Promise<void>;
}

export function startTracing(settings: TracingSettings, version: string): RunningTracing {
  // OTEL_RESOURCE_ATTRIBUTES first, then our name and version over it.
  const resource = defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': version }));
  const exporters: SpanExporter[] = settings.exporters.map((kind) =>
    // Headers (OTEL_EXPORTER_OTLP_HEADERS), timeout and compression still come from the variables.
    kind === 'console' ? new ConsoleSpanExporter() : new OTLPTraceExporter({ url: settings.tracesUrl }),
  );
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: exporters.map((e) => new BatchSpanProcessor(e)),
  });
  return {
    tracer: provider.getTracer('manifold', version),
    async shutdown(timeoutMs = 5000) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
        timer.unref();
      });
      await Promise.race([provider.shutdown().catch(() => {}), late]);
      clearTimeout(timer);
    },
  };
}
