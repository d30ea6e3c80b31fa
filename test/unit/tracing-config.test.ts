import { describe, expect, it } from 'vitest';
import { tracingSettings } from '../../deploy/node/runtime/tracing-env.js';
import { GATEWAY_DEFAULTS } from '../../src/config/defaults.js';
import { parseConfigObject } from '../../src/config/load.js';
import type { ConfigResult } from '../../src/config/types.js';

const withGateway = (gateway: Record<string, unknown>) => ({
  mcpServers: { a: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] } },
  gateway,
});

function tracingOf(result: ConfigResult): unknown {
  if (!result.ok) throw new Error(`expected ok, got ${JSON.stringify(result.errors)}`);
  return result.config.gateway.tracing;
}

function errorsOf(result: ConfigResult): { at: string; fix: string | undefined }[] {
  if (result.ok) throw new Error('expected errors, got ok');
  return result.errors.map((e) => ({ at: `${e.path}: ${e.message}`, fix: e.fix }));
}

describe('gateway.tracing', () => {
  it('is off (false) by default', () => {
    expect(GATEWAY_DEFAULTS.tracing).toBe(false);
    expect(tracingOf(parseConfigObject(withGateway({}), {}))).toBe(false);
  });

  it('accepts false, {}, and an endpoint and service name (with ${VAR})', () => {
    expect(tracingOf(parseConfigObject(withGateway({ tracing: false }), {}))).toBe(false);
    expect(tracingOf(parseConfigObject(withGateway({ tracing: {} }), {}))).toEqual({});
    const given = parseConfigObject(
      withGateway({ tracing: { otlpEndpoint: 'http://${COLLECTOR}:4318', serviceName: 'edge-gw' } }),
      { COLLECTOR: '127.0.0.1' },
    );
    expect(tracingOf(given)).toEqual({ otlpEndpoint: 'http://127.0.0.1:4318', serviceName: 'edge-gw' });
  });

  it('rejects bad values with the JSON path and a fix, never echoing the endpoint', () => {
    const shape =
      'gateway.tracing: expected an object such as {"otlpEndpoint": "http://127.0.0.1:4318"}, or false';
    const cases: [unknown, string][] = [
      [true, `${shape}, got true`],
      ['http://x', `${shape}, got string`],
      [null, `${shape}, got null`],
      [{ otlpEndpoint: '' }, 'gateway.tracing.otlpEndpoint: must not be empty'],
      [{ otlpEndpoint: 3 }, 'gateway.tracing.otlpEndpoint: expected an http(s) URL string, got number'],
      [{ otlpEndpoint: 'not a url' }, 'gateway.tracing.otlpEndpoint: is not a URL'],
      [
        { otlpEndpoint: 'ftp://c:21' },
        'gateway.tracing.otlpEndpoint: must be an http: or https: URL, got ftp:',
      ],
      [{ otlpEndpoint: 'https://u:s3cret@c' }, 'gateway.tracing.otlpEndpoint: must not carry credentials'],
      [{ serviceName: '' }, 'gateway.tracing.serviceName: must not be empty'],
    ];
    for (const [tracing, expected] of cases) {
      const errors = errorsOf(parseConfigObject(withGateway({ tracing }), {}));
      expect(
        errors.map((e) => e.at),
        JSON.stringify(tracing),
      ).toEqual([expected]);
      expect(errors[0]!.fix?.length).toBeGreaterThan(10);
      expect(errors[0]!.at).not.toContain('s3cret');
    }
  });

  it('warns about an unknown key inside tracing', () => {
    const result = parseConfigObject(withGateway({ tracing: { endpoint: 'http://c' } }), {});
    if (!result.ok) throw new Error('expected ok');
    expect(result.warnings.map((w) => w.path)).toEqual(['gateway.tracing.endpoint']);
  });
});

describe('tracingSettings (config and OTEL_* variables)', () => {
  it('is off when neither the config nor a variable asks for it', () => {
    expect(tracingSettings(false, {})).toBeUndefined();
    expect(
      tracingSettings(false, { OTEL_SERVICE_NAME: 'x', OTEL_TRACES_EXPORTER: 'zipkin' }),
    ).toBeUndefined();
  });

  it('is on with the config object, with defaults from the variables or built in', () => {
    expect(tracingSettings({}, {})).toEqual({
      exporters: ['otlp'],
      tracesUrl: 'http://localhost:4318/v1/traces',
      serviceName: 'manifold',
    });
    expect(
      tracingSettings({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/', OTEL_SERVICE_NAME: 'from-env' }),
    ).toEqual({ exporters: ['otlp'], tracesUrl: 'http://c:4318/v1/traces', serviceName: 'from-env' });
    // The config's own fields win over the variables.
    expect(
      tracingSettings(
        { otlpEndpoint: 'http://cfg:4318', serviceName: 'cfg' },
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318', OTEL_SERVICE_NAME: 'env' },
      ),
    ).toEqual({ exporters: ['otlp'], tracesUrl: 'http://cfg:4318/v1/traces', serviceName: 'cfg' });
  });

  it('is on with the standard variables alone; the per-signal endpoint is taken as it is', () => {
    expect(tracingSettings(false, { OTEL_TRACES_EXPORTER: 'otlp' })?.tracesUrl).toBe(
      'http://localhost:4318/v1/traces',
    );
    expect(tracingSettings(false, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })?.tracesUrl).toBe(
      'http://c:4318/v1/traces',
    );
    expect(
      tracingSettings(false, {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:9999/custom',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      })?.tracesUrl,
    ).toBe('http://t:9999/custom');
    expect(tracingSettings(false, { OTEL_TRACES_EXPORTER: 'console, otlp' })?.exporters).toEqual([
      'console',
      'otlp',
    ]);
  });

  it('OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none win over everything', () => {
    const on = { otlpEndpoint: 'http://c:4318' };
    expect(tracingSettings(on, { OTEL_SDK_DISABLED: 'TRUE' })).toBeUndefined();
    expect(tracingSettings(on, { OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
    expect(
      tracingSettings(false, { OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }),
    ).toBeUndefined();
    expect(tracingSettings(on, { OTEL_SDK_DISABLED: 'false' })).toBeDefined();
  });
});
