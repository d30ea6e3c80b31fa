import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, ROOT, stopChild } from '../helpers/harness.js';
import { modernRequest } from '../helpers/modern.js';

// `manifold serve` (dist/manifold.js: `npm run build` first) switched on by the standard OTEL_*
// variables alone, exporting over OTLP/HTTP to a collector stand-in on loopback.
const CLI = resolve(ROOT, 'dist/manifold.js');
const REFERENCE = resolve(ROOT, 'test/fixtures/reference-server.mjs');
const TRACE = '0af7651916cd43dd8448eb211c80319c';

interface Export {
  path: string;
  contentType: string | undefined;
  body: { resourceSpans?: { resource?: { attributes?: Attr[] }; scopeSpans?: { spans?: OtlpSpan[] }[] }[] };
}
interface Attr {
  key: string;
  value: { stringValue?: string };
}
interface OtlpSpan {
  name: string;
  traceId: string;
  kind: number;
}

let collector: Server;
let endpoint: string;
const exports: Export[] = [];
const children: ChildProcess[] = [];
let config: string;

/** Starts the CLI with these variables; resolves with its URL and the log lines so far. */
function serve(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; url: string; log: () => string }> {
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--config', config, '--port', '0', '--log-format', 'json'],
    {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  children.push(child);
  let log = '';
  return new Promise((res, rej) => {
    child.stderr?.on('data', (d: Buffer) => {
      log += String(d);
      const m = /"event":"gateway.listening","url":"([^"]+)"/.exec(log);
      if (m) res({ child, url: m[1]!, log: () => log });
    });
    child.once('exit', (code) => rej(new Error(`manifold serve exited (${code}): ${log.slice(-2000)}`)));
  });
}

function spans(): OtlpSpan[] {
  return exports.flatMap((e) =>
    (e.body.resourceSpans ?? []).flatMap((r) => (r.scopeSpans ?? []).flatMap((s) => s.spans ?? [])),
  );
}

beforeAll(async () => {
  collector = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      exports.push({
        path: req.url ?? '',
        contentType: req.headers['content-type'],
        body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Export['body'],
      });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => collector.listen(0, '127.0.0.1', () => r()));
  endpoint = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;
  const dir = mkdtempSync(join(tmpdir(), 'mf-tracing-'));
  config = join(dir, 'manifold.json');
  writeFileSync(
    config,
    JSON.stringify({
      mcpServers: { ref: { command: process.execPath, args: [REFERENCE, 'stdio'] } },
      gateway: { store: false },
    }),
  );
});

afterAll(async () => {
  for (const c of children) await stopChild(c);
  await new Promise<void>((r) => collector.close(() => r()));
});

/** One tools/call with the client's trace context in `_meta`. */
async function call(url: string): Promise<void> {
  const r = await modernRequest(url, 'tools/call', {
    name: 'ref__test_simple_text',
    arguments: {},
    _meta: { traceparent: `00-${TRACE}-b7ad6b7169203331-01` },
  });
  expect(r.body.error, JSON.stringify(r.body)).toBeUndefined();
}

describe('manifold serve with OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  it('exports the spans of a call to <endpoint>/v1/traces, under OTEL_SERVICE_NAME', async () => {
    const gw = await serve({
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_SERVICE_NAME: 'manifold-e2e',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    await call(gw.url);
    await eventually(() => spans().some((s) => s.traceId === TRACE), 'a trace export', 10_000);
    const ours = spans().filter((s) => s.traceId === TRACE);
    expect(ours.map((s) => s.name).sort()).toEqual([
      'tools/call ref__test_simple_text',
      'tools/call test_simple_text',
    ]);
    const e = exports.find((x) => JSON.stringify(x.body).includes(TRACE))!;
    expect(e.path).toBe('/v1/traces');
    expect(e.contentType).toContain('application/json');
    const resource = e.body.resourceSpans![0]!.resource!.attributes!;
    expect(resource.find((a) => a.key === 'service.name')?.value.stringValue).toBe('manifold-e2e');
    // The start line says tracing is on, without the endpoint (a URL can carry a token).
    expect(gw.log()).toContain('"event":"tracing.on"');
    expect(
      gw
        .log()
        .split('\n')
        .find((l) => l.includes('tracing.on')),
    ).not.toContain(endpoint);
  });

  it('SIGTERM exports what is still buffered before the process ends', async () => {
    exports.length = 0;
    // A minute between scheduled exports: only the shutdown flush can send this call's spans.
    const gw = await serve({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_BSP_SCHEDULE_DELAY: '60000' });
    await call(gw.url);
    expect(spans()).toEqual([]);
    const exited = new Promise<number | null>((r) => gw.child.once('exit', (code) => r(code)));
    gw.child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(spans().filter((s) => s.traceId === TRACE)).toHaveLength(2);
  });

  it('without OTEL_* variables or gateway.tracing, nothing is exported', async () => {
    exports.length = 0;
    const gw = await serve({ OTEL_SERVICE_NAME: 'x' });
    await call(gw.url);
    const exited = new Promise<number | null>((r) => gw.child.once('exit', (code) => r(code)));
    gw.child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(gw.log()).not.toContain('tracing.on');
    expect(exports).toEqual([]);
  });
});

describe('the bundle', () => {
  it('keeps the OTel SDK out of the entry chunk: it is loaded only when tracing is on', () => {
    // Strings only the SDK and the OTLP exporter hold (minification keeps string literals).
    const sdkOnly = ['OTEL_BSP_SCHEDULE_DELAY', 'OTEL_EXPORTER_OTLP_COMPRESSION', 'OTEL_TRACES_SAMPLER'];
    const entry = readFileSync(CLI, 'utf8');
    for (const s of sdkOnly) expect(entry, s).not.toContain(s);
    const dir = resolve(ROOT, 'dist/chunks');
    const holders = readdirSync(dir).filter(
      (f) => f.endsWith('.js') && sdkOnly.every((s) => readFileSync(join(dir, f), 'utf8').includes(s)),
    );
    expect(holders.map((f) => f.replace(/-[A-Z0-9]+\.js$/, ''))).toEqual(['tracing']);
  });
});
