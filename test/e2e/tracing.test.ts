import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  connectModern,
  type ModernHandle,
  startHttpTap,
  startReferenceHttp,
  type TapExchange,
} from '../helpers/clients.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { modernRequest } from '../helpers/modern.js';

// Tracing (#16) with an in-memory exporter: a gateway in front of the reference fixture, once as a
// modern upstream (`mod`) and once pinned to 2025-11-25 (`leg`), each behind an HTTP tap that
// records what the upstream received. Clients of both eras send (or do not send) trace context.

type Obj = Record<string, unknown>;
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';
const HEADER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const HEADER_PARENT = '00f067aa0ba902b7';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('manifold-test');

let gw: TestGateway;
let off: TestGateway;
let modern: ModernHandle;
let modernOff: ModernHandle;
const taps: Record<string, TapExchange[]> = {};
const stops: (() => Promise<void>)[] = [];

/** A v1 client; with `traceparent`, every HTTP request it makes carries that header. */
async function legacyClient(url: string, headers: Record<string, string> = {}): Promise<LegacyClient> {
  const client = new LegacyClient({ name: 'trace-legacy', version: '1.0.0' });
  await client.connect(new LegacyTransport(new URL(url), { requestInit: { headers } }));
  stops.push(() => client.close());
  return client;
}

/** What the upstream behind `server`'s tap last received for `method` (and `name`, if given). */
function received(server: string, method: string, name?: string): Obj {
  const found = taps[server]!.filter((e) => {
    const params = e.body?.params as Obj | undefined;
    return e.body?.method === method && (name === undefined || params?.name === name);
  }).at(-1);
  expect(found, `${server} received ${method} ${name ?? ''}`).toBeDefined();
  return ((found!.body!.params as Obj)._meta ?? {}) as Obj;
}

/** The finished spans, once the request's SERVER span and its `children` CLIENT spans have ended. */
async function spansOf(
  method: string,
  children = 1,
): Promise<{ server: ReadableSpan; clients: ReadableSpan[] }> {
  let server: ReadableSpan | undefined;
  let clients: ReadableSpan[] = [];
  await eventually(() => {
    const spans = exporter.getFinishedSpans();
    server = spans.find((s) => s.kind === SpanKind.SERVER && s.attributes['mcp.method.name'] === method);
    clients = server
      ? spans.filter(
          (s) => s.kind === SpanKind.CLIENT && s.parentSpanContext?.spanId === server!.spanContext().spanId,
        )
      : [];
    return server !== undefined && clients.length >= children;
  }, `the spans of ${method}`);
  return { server: server!, clients };
}

/** The upstream got the CLIENT span's own context: same trace, that span as its parent. */
function expectPropagated(meta: Obj, client: ReadableSpan): void {
  const { traceId, spanId } = client.spanContext();
  expect(meta.traceparent).toBe(`00-${traceId}-${spanId}-01`);
}

beforeAll(async () => {
  const ref = await startReferenceHttp();
  stops.push(ref.stop);
  const [modTap, legTap] = await Promise.all([startHttpTap(ref.port), startHttpTap(ref.port)]);
  stops.push(modTap.stop, legTap.stop);
  taps.mod = modTap.exchanges;
  taps.leg = legTap.exchanges;
  const config = {
    mcpServers: {
      mod: { url: `http://127.0.0.1:${modTap.port}/mcp` },
      leg: { url: `http://127.0.0.1:${legTap.port}/mcp`, protocol: '2025-11-25' },
    },
    gateway: { allowedHosts: [modTap.port, legTap.port].map((p) => `127.0.0.1:${p}`) },
  };
  [gw, off] = await Promise.all([startTestGateway(config, { tracer }), startTestGateway(config)]);
  stops.push(gw.stop, off.stop);
  [modern, modernOff] = await Promise.all([connectModern(gw.url), connectModern(off.url)]);
  stops.push(modern.close, modernOff.close);
}, 60_000);

afterAll(async () => {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  await provider.shutdown();
});

beforeEach(() => exporter.reset());

describe('tracing on', () => {
  it('setup: one upstream of each era', () => {
    const health = Object.fromEntries(gw.gateway.health().upstreams.map((u) => [u.name, u.era]));
    expect(health).toEqual({ mod: 'modern', leg: 'legacy' });
  });

  it('modern client, traceparent in _meta, tools/call: the request continues its trace; the upstream gets the child span', async () => {
    const r = await modern.client.callTool({
      name: 'mod__test_simple_text',
      arguments: {},
      _meta: {
        traceparent: `00-${TRACE}-${PARENT}-01`,
        tracestate: 'congo=t61rcWkgMzE',
        baggage: 'userId=alice',
      },
    });
    expect(r.isError).toBeFalsy();
    const { server, clients } = await spansOf('tools/call');
    expect(server.name).toBe('tools/call mod__test_simple_text');
    expect(server.spanContext().traceId).toBe(TRACE);
    expect(server.parentSpanContext?.spanId).toBe(PARENT);
    expect(server.attributes).toMatchObject({
      'gen_ai.tool.name': 'mod__test_simple_text',
      'gen_ai.operation.name': 'execute_tool',
      'mcp.protocol.version': '2026-07-28',
      'manifold.era': 'modern',
      'manifold.verdict': 'allowed',
      'manifold.server': 'mod',
      'network.transport': 'tcp',
    });
    expect(typeof server.attributes['jsonrpc.request.id']).toBe('string');
    expect(server.status.code).toBe(SpanStatusCode.UNSET);
    const [client] = clients;
    expect(client!.name).toBe('tools/call test_simple_text');
    expect(client!.spanContext().traceId).toBe(TRACE);
    expect(client!.attributes).toMatchObject({
      'gen_ai.tool.name': 'test_simple_text',
      'manifold.server': 'mod',
      'manifold.upstream.era': 'modern',
    });
    const meta = received('mod', 'tools/call', 'test_simple_text');
    expectPropagated(meta, client!);
    expect(meta.tracestate).toBe('congo=t61rcWkgMzE');
    expect(meta.baggage).toBe('userId=alice');
  });

  it('modern client, traceparent in _meta, prompts/get on a legacy upstream: the same, in the other era', async () => {
    await modern.client.getPrompt({
      name: 'leg__test_simple_prompt',
      _meta: { traceparent: `00-${TRACE}-${PARENT}-01` },
    });
    const { server, clients } = await spansOf('prompts/get');
    expect(server.name).toBe('prompts/get leg__test_simple_prompt');
    expect(server.spanContext().traceId).toBe(TRACE);
    expect(server.parentSpanContext?.spanId).toBe(PARENT);
    expect(server.attributes['gen_ai.prompt.name']).toBe('leg__test_simple_prompt');
    expect(clients[0]!.attributes).toMatchObject({
      'manifold.upstream.era': 'legacy',
      'gen_ai.prompt.name': 'test_simple_prompt',
    });
    const meta = received('leg', 'prompts/get', 'test_simple_prompt');
    expectPropagated(meta, clients[0]!);
    expect(meta.tracestate).toBeUndefined();
  });

  it('legacy client, traceparent HTTP header: tools/call and resources/read continue the header trace', async () => {
    const client = await legacyClient(gw.url, { traceparent: `00-${HEADER_TRACE}-${HEADER_PARENT}-01` });
    await client.callTool({ name: 'leg__test_simple_text', arguments: {} });
    const call = await spansOf('tools/call');
    expect(call.server.spanContext().traceId).toBe(HEADER_TRACE);
    expect(call.server.parentSpanContext?.spanId).toBe(HEADER_PARENT);
    expect(call.server.attributes).toMatchObject({
      'manifold.era': 'legacy',
      'mcp.protocol.version': '2025-11-25',
    });
    expectPropagated(received('leg', 'tools/call', 'test_simple_text'), call.clients[0]!);

    const uri = (await client.listResources()).resources.find((r) => r.uri.includes('static-text'))!.uri;
    exporter.reset();
    await client.readResource({ uri });
    const read = await spansOf('resources/read');
    expect(read.server.spanContext().traceId).toBe(HEADER_TRACE);
    expect(read.server.name).toBe('resources/read');
    expect(read.server.attributes['mcp.resource.uri']).toBe(uri);
    const server = read.clients[0]!.attributes['manifold.server'] as string;
    expectPropagated(received(server, 'resources/read'), read.clients[0]!);
  });

  it('no incoming context: a new trace, still propagated', async () => {
    const client = await legacyClient(gw.url);
    await client.callTool({ name: 'mod__test_simple_text', arguments: {} });
    const { server, clients } = await spansOf('tools/call');
    expect(server.parentSpanContext).toBeUndefined();
    expect(server.spanContext().traceId).not.toBe(TRACE);
    expect(server.spanContext().traceId).not.toBe(HEADER_TRACE);
    expectPropagated(received('mod', 'tools/call', 'test_simple_text'), clients[0]!);
  });

  it('_meta wins over the HTTP header; the header context becomes a link', async () => {
    const client = await legacyClient(gw.url, { traceparent: `00-${HEADER_TRACE}-${HEADER_PARENT}-01` });
    await client.callTool({
      name: 'mod__test_simple_text',
      arguments: {},
      _meta: { traceparent: `00-${TRACE}-${PARENT}-01` },
    });
    const { server } = await spansOf('tools/call');
    expect(server.spanContext().traceId).toBe(TRACE);
    expect(server.links.map((l) => l.context.spanId)).toEqual([HEADER_PARENT]);
  });

  it('an unsampled client trace (flags 00): nothing recorded, the context still goes on, unsampled', async () => {
    await modern.client.callTool({
      name: 'mod__test_simple_text',
      arguments: {},
      _meta: { traceparent: `00-${TRACE}-${PARENT}-00` },
    });
    const sent = received('mod', 'tools/call', 'test_simple_text').traceparent as string;
    const [, trace, span, flags] = sent.split('-');
    expect([trace, flags]).toEqual([TRACE, '00']);
    expect(span).not.toBe(PARENT);
    // A later request's span is exported; none of the unsampled trace ever is.
    await modern.client.listTools(undefined, { cacheMode: 'bypass' });
    await spansOf('tools/list', 0);
    expect(exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === TRACE)).toEqual([]);
  });

  it("a tool's isError result: both spans are errors of type tool_error", async () => {
    const r = await modern.client.callTool({ name: 'mod__test_error_handling', arguments: {} });
    expect(r.isError).toBe(true);
    const { server, clients } = await spansOf('tools/call');
    for (const span of [server, clients[0]!]) {
      expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(span.attributes['error.type']).toBe('tool_error');
    }
  });

  it("an upstream's JSON-RPC error: both spans are errors with its code, and no message text", async () => {
    await expect(
      modern.client.getPrompt({ name: 'mod__test_prompt_with_arguments', arguments: {} }),
    ).rejects.toThrow();
    const { server, clients } = await spansOf('prompts/get');
    for (const span of [server, clients[0]!]) {
      expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(span.attributes['error.type']).toBe('-32602');
      expect(span.status.message).toMatch(/^ERR_[A-Z_]+$/);
    }
  });

  it('a modern client that goes away mid-call: the upstream span is cancelled, the request an error', async () => {
    const abort = new AbortController();
    const before = taps.mod!.length;
    const pending = modernRequest(
      gw.url,
      'tools/call',
      { name: 'mod__test_tool_with_progress', arguments: {} },
      { signal: abort.signal },
    ).catch((e: Error) => e);
    // Closed once the call is on its way upstream (the tool takes about 100 ms to answer).
    const sent = () =>
      taps
        .mod!.slice(before)
        .some((e) => (e.body?.params as Obj | undefined)?.name === 'test_tool_with_progress');
    await eventually(sent, 'the call on its way upstream', 15_000, 2);
    abort.abort();
    expect(await pending).toBeInstanceOf(Error);
    const { server, clients } = await spansOf('tools/call');
    expect(clients[0]!.attributes['error.type']).toBe('cancelled');
    expect(clients[0]!.status.code).toBe(SpanStatusCode.ERROR);
    expect(server.attributes['manifold.verdict']).toBe('error');
    expect(server.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('a refused request (unknown tool): the request span is an error, and nothing went upstream', async () => {
    const before = taps.mod!.length + taps.leg!.length;
    const client = await legacyClient(gw.url);
    const r = await client.callTool({ name: 'mod__no_such_tool', arguments: {} }).catch((e: Error) => e);
    expect(r).toBeInstanceOf(Error);
    const { server, clients } = await spansOf('tools/call', 0);
    expect(clients).toEqual([]);
    expect(server.status).toEqual({ code: SpanStatusCode.ERROR, message: 'ERR_TOOL_UNKNOWN' });
    expect(server.attributes).toMatchObject({ 'error.type': '-32602', 'manifold.verdict': 'denied' });
    expect(taps.mod!.length + taps.leg!.length).toBe(before);
  });

  it('tools/list gets a span too (no upstream call: served from the catalog)', async () => {
    await modern.client.listTools(undefined, { cacheMode: 'bypass' });
    const { server, clients } = await spansOf('tools/list', 0);
    expect(server.name).toBe('tools/list');
    expect(clients).toEqual([]);
  });
});

describe('tracing off', () => {
  it("no spans, and the upstream receives the client's own _meta as before", async () => {
    const mine = `00-${TRACE}-${PARENT}-01`;
    await modernOff.client.callTool({
      name: 'mod__test_simple_text',
      arguments: {},
      _meta: { traceparent: mine, tracestate: 'congo=t61rcWkgMzE', 'com.example/x': 1 },
    });
    const client = await legacyClient(off.url, { traceparent: `00-${HEADER_TRACE}-${HEADER_PARENT}-01` });
    await client.getPrompt({ name: 'leg__test_simple_prompt', _meta: { traceparent: mine } });
    const meta = received('mod', 'tools/call', 'test_simple_text');
    expect(meta).toMatchObject({ traceparent: mine, tracestate: 'congo=t61rcWkgMzE', 'com.example/x': 1 });
    expect(received('leg', 'prompts/get', 'test_simple_prompt').traceparent).toBe(mine);
    // The same envelope again and again: the gateway learns its text within 16 requests and then
    // shares one parse of it (#18, envelope-cache.ts); what is relayed upstream stays the same.
    for (let i = 0; i < 18; i++) {
      await modernOff.client.callTool({
        name: 'mod__test_simple_text',
        arguments: {},
        _meta: { traceparent: mine, 'com.example/x': i < 17 ? 1 : 2 },
      });
      const relayed = received('mod', 'tools/call', 'test_simple_text');
      expect(relayed).toMatchObject({ traceparent: mine, 'com.example/x': i < 17 ? 1 : 2 });
    }
    expect(exporter.getFinishedSpans()).toEqual([]);
    expect(off.gateway.platform.tracer).toBeUndefined();
  });
});
