import { resolve } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, type MockInstance, vi } from 'vitest';
import { DirectCaller } from '../../src/upstream/wire/direct-call.js';
import { type Fixture, type FixtureEvent, health, startFixture } from '../helpers/fixture.js';
import {
  connectClient,
  eventually,
  ROOT,
  type Spawned,
  startEverythingHttp,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

// The direct tools/call path to streamable-HTTP upstreams (src/upstream/direct-call.ts), end to
// end: a client, the gateway in this process, and a scripted upstream whose every answer is raw
// HTTP written by the test fixture, which reports what it received on stdout.

const SCRIPTED = resolve(ROOT, 'test/fixtures/scripted-http.mjs');

/** The fixture's `call` event for the call tagged `tag` (waits for it). */
async function callEvent(fixture: Fixture, tag: string): Promise<FixtureEvent> {
  await eventually(() => fixture.events.some((e) => e.event === 'call' && e.tag === tag), `call ${tag}`);
  return fixture.events.find((e) => e.event === 'call' && e.tag === tag)!;
}

function has(fixture: Fixture, match: (e: FixtureEvent) => boolean): boolean {
  return fixture.events.some(match);
}

/** The upstream got notifications/cancelled for the call `id`, and saw its request closed. */
async function cancelledAndAborted(fixture: Fixture, id: unknown) {
  await eventually(
    () => has(fixture, (ev) => ev.event === 'cancelled' && ev.requestId === id),
    'notifications/cancelled upstream',
  );
  await eventually(
    () => has(fixture, (ev) => ev.event === 'request-closed' && ev.id === id),
    'the upstream request closed',
  );
}

/** Rejection of a tools/call through the gateway, as the McpError the client got. */
async function callError(p: Promise<unknown>): Promise<McpError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(McpError);
  return e as McpError;
}

/** The content of a tool result, as text to search. */
function text(res: unknown): string {
  return JSON.stringify((res as { content?: unknown }).content);
}

const MANIFOLD_ID = /^manifold:\d+$/;

/**
 * A gateway in front of the scripted fixture, the fixture named `name`, and a client on it: one
 * per describe block. `stillConnected` checks that the upstream is still the connection made at
 * start (ready, never reconnected).
 */
function scripted(name: string, gateway: Record<string, unknown>, server: Record<string, unknown>) {
  let running: { fixture: Fixture; gw: TestGateway; client: Client } | undefined;
  return {
    async start() {
      const fixture = await startFixture(SCRIPTED);
      const gw = await startTestGateway({
        gateway: { allowedHosts: [`127.0.0.1:${fixture.port}`], ...gateway },
        mcpServers: { [name]: { url: fixture.url, ...server } },
      });
      running = { fixture, gw, client: await connectClient(gw.url) };
      return running;
    },
    async stop() {
      await running?.client.close();
      await running?.gw.stop();
      await running?.fixture.stop();
    },
    async stillConnected() {
      const { fixture, gw } = running!;
      expect((await health(gw))[name]).toMatchObject({ state: 'ready', tools: 14 });
      expect(fixture.events.filter((e) => e.event === 'initialize')).toHaveLength(1);
      expect(gw.logs.filter((l) => l.event === 'upstream.ready' && l.server === name)).toHaveLength(1);
    },
  };
}

describe('direct tools/call: answers of a scripted streamable-HTTP upstream', () => {
  let fixture: Fixture;
  let gw: TestGateway;
  let client: Client;
  const setup = scripted('s', {}, { timeoutMs: 10_000 });
  beforeAll(async () => {
    ({ fixture, gw, client } = await setup.start());
  });
  afterAll(() => setup.stop());
  const stillConnected = () => setup.stillConnected();

  it('sends the call with a manifold:<n> string id on the negotiated session and protocol version', async () => {
    const res = await client.callTool({ name: 's__echo', arguments: { tag: 'first' } });
    expect(text(res)).toContain('echo:first');
    const call = await callEvent(fixture, 'first');
    const init = fixture.events.find((e) => e.event === 'initialize')!;
    expect(call.id).toMatch(MANIFOLD_ID);
    expect(call.session).toBe(init.session);
    expect(call.protocolVersion).toBe(init.protocolVersion);
    // No progress asked for: no progressToken upstream.
    expect(call.progressToken).toBeNull();
  });

  it('numbers its calls: each has its own manifold: id', async () => {
    await Promise.all(
      ['n1', 'n2', 'n3'].map((tag) => client.callTool({ name: 's__echo', arguments: { tag } })),
    );
    const ids = await Promise.all(['n1', 'n2', 'n3'].map(async (tag) => (await callEvent(fixture, tag)).id));
    for (const id of ids) expect(id).toMatch(MANIFOLD_ID);
    expect(new Set(ids).size).toBe(3);
  });

  it('JSON batch: progress before the response reaches the client; the progressToken upstream is the request id', async () => {
    const seen: number[] = [];
    const res = await client.callTool(
      { name: 's__batch', arguments: { tag: 'batch-progress' } },
      CallToolResultSchema,
      { onprogress: (p) => seen.push(p.progress) },
    );
    expect(text(res)).toContain('batch done');
    const call = await callEvent(fixture, 'batch-progress');
    expect(call.id).toMatch(MANIFOLD_ID);
    expect(call.progressToken).toBe(call.id);
    // The SDK client may settle the response before running the last progress handler.
    await eventually(() => seen.length === 2, 'both progress notifications');
    expect(seen).toEqual([1, 2]);
  });

  it('JSON batch: the messages that are not the answer go to the SDK client (list_changed makes it relist)', async () => {
    const listsBefore = fixture.events.filter((e) => e.event === 'tools-list').length;
    const changedBefore = gw.logs.filter(
      (l) => l.event === 'upstream.list_changed' && l.server === 's',
    ).length;
    const res = await client.callTool({ name: 's__batch', arguments: { tag: 'batch-plain' } });
    expect(text(res)).toContain('batch done');
    expect((await callEvent(fixture, 'batch-plain')).progressToken).toBeNull();
    await eventually(
      () =>
        gw.logs.filter((l) => l.event === 'upstream.list_changed' && l.server === 's').length > changedBefore,
      'the gateway saw list_changed',
    );
    await eventually(
      () => fixture.events.filter((e) => e.event === 'tools-list').length > listsBefore,
      'the gateway listed tools again',
    );
    // A message handed to the SDK client is not a transport error.
    expect(gw.logs.filter((l) => l.event === 'upstream.transport_error' && l.server === 's')).toEqual([]);
  });

  it('202: the answer pushed later on the standalone GET stream completes the call', async () => {
    const res = await client.callTool({ name: 's__later', arguments: { tag: 'later-1' } });
    expect(text(res)).toContain('later done');
    const call = await callEvent(fixture, 'later-1');
    expect(has(fixture, (e) => e.event === 'pushed' && e.id === call.id)).toBe(true);
  });

  it('SSE: a stream that ends after a priming event is resumed (GET with Last-Event-ID) and answered there', async () => {
    const res = await client.callTool({ name: 's__sse_resumable', arguments: { tag: 'resume-1' } });
    expect(text(res)).toContain('resumed done');
    const call = await callEvent(fixture, 'resume-1');
    const primed = fixture.events.find((e) => e.event === 'primed' && e.id === call.id);
    expect(primed).toBeDefined();
    expect(has(fixture, (e) => e.event === 'resumed' && e.lastEventId === primed!.eventId)).toBe(true);
    await stillConnected();
  });

  it('SSE: the resumption waits for the delay the server asked for with retry:, not at once', async () => {
    const res = await client.callTool({
      name: 's__sse_resumable',
      arguments: { tag: 'resume-2', delayMs: 400 },
    });
    expect(text(res)).toContain('resumed done');
    const call = await callEvent(fixture, 'resume-2');
    const primed = fixture.events.find((e) => e.event === 'primed' && e.id === call.id);
    const resumed = fixture.events.find((e) => e.event === 'resumed' && e.id === call.id);
    // A lower bound from the server's own clock: the gateway's timer may fire a little early.
    expect(Number(resumed?.at) - Number(primed?.at)).toBeGreaterThanOrEqual(380);
  });

  it('SSE: a stream that ends unanswered without an event id fails at once as outcome unknown, not by timeout', async () => {
    const e = await callError(client.callTool({ name: 's__sse_cut', arguments: { tag: 'cut-1' } }));
    expect(e.message).toContain('outcome is unknown');
    expect(e.message).not.toContain('timed out');
    const call = await callEvent(fixture, 'cut-1');
    expect(has(fixture, (ev) => ev.event === 'resumed' && ev.id === call.id)).toBe(false);
  });

  it('a JSON-RPC error answer (code -32603) is a JSON-RPC error to the client saying the server returned an error', async () => {
    const e = await callError(
      client.callTool({ name: 's__fail_rpc', arguments: { tag: 'rpc-1', code: -32603 } }),
    );
    expect(e.message).toContain('returned an error');
    expect(e.message).toContain('boom');
    expect(e.message).not.toContain('outcome is unknown');
    // The upstream's own standard code is kept.
    expect(e.code).toBe(-32603);
    await stillConnected();
  });

  // An upstream's own -32000 is its error, not the SDK's "connection closed".
  it('a JSON-RPC error answer with code -32000 is a JSON-RPC error to the client saying the server returned an error', async () => {
    const e = await callError(client.callTool({ name: 's__fail_rpc', arguments: { tag: 'rpc-2' } }));
    expect(e.message).toContain('returned an error');
    expect(e.message).toContain('boom');
    expect(e.code).toBe(-32000);
    await stillConnected();
  });

  it('not_object: a result that is not an object is said to be an invalid answer, not a failed connection', async () => {
    const e = await callError(client.callTool({ name: 's__not_object', arguments: { tag: 'not_object-1' } }));
    expect(e.message).toContain(
      'server s answered the tools/call with an invalid result: the answer has no result object',
    );
    expect(e.message).toContain('outcome is unknown');
    expect(e.message).not.toContain('connection');
    // Sent once: the same request would get the same answer.
    expect(fixture.events.filter((ev) => ev.event === 'call' && ev.tag === 'not_object-1')).toHaveLength(1);
    await stillConnected();
    const res = await client.callTool({ name: 's__echo', arguments: { tag: 'after-not_object' } });
    expect(text(res)).toContain('echo:after-not_object');
  });

  it.each([
    ['bad_type', 'an unexpected content type'],
    ['http_500', 'HTTP 500'],
  ])('%s: %s is outcome unknown; the upstream answers the probe ping and stays ready', async (tool) => {
    const pings = fixture.events.filter((e) => e.event === 'ping').length;
    const e = await callError(client.callTool({ name: `s__${tool}`, arguments: { tag: `${tool}-1` } }));
    expect(e.message).toContain('outcome is unknown');
    expect(e.message).not.toContain('returned an error');
    await eventually(() => fixture.events.filter((ev) => ev.event === 'ping').length > pings, 'probe ping');
    await stillConnected();
    const res = await client.callTool({ name: 's__echo', arguments: { tag: `after-${tool}` } });
    expect(text(res)).toContain(`echo:after-${tool}`);
  });

  it('client cancellation: notifications/cancelled with the same id goes upstream and the request is aborted', async () => {
    const controller = new AbortController();
    const pending = client.callTool(
      { name: 's__hang', arguments: { tag: 'cancel-1' } },
      CallToolResultSchema,
      {
        signal: controller.signal,
      },
    );
    const settled = pending.then(
      () => 'resolved',
      () => 'rejected',
    );
    const call = await callEvent(fixture, 'cancel-1');
    expect(call.id).toMatch(MANIFOLD_ID);
    controller.abort(new Error('the user gave up'));
    expect(await settled).toBe('rejected');
    await eventually(
      () => has(fixture, (e) => e.event === 'cancelled' && e.requestId === call.id),
      'notifications/cancelled upstream',
    );
    await eventually(
      () => has(fixture, (e) => e.event === 'request-closed' && e.id === call.id),
      'the upstream request closed',
    );
    const cancelled = fixture.events.find((e) => e.event === 'cancelled' && e.requestId === call.id)!;
    expect(cancelled.session).toBe(call.session);
    await stillConnected();
  });
});

describe('direct tools/call: deadlines (timeoutMs 300, maxCallTimeoutMs 1500)', () => {
  let fixture: Fixture;
  let gw: TestGateway;
  let client: Client;
  const setup = scripted('t', { callTimeoutMs: 300, maxCallTimeoutMs: 1500 }, { timeoutMs: 300 });
  beforeAll(async () => {
    ({ fixture, gw, client } = await setup.start());
  });
  afterAll(() => setup.stop());
  const stillConnected = () => setup.stillConnected();

  it('idle timeout: the call fails, is cancelled upstream with its manifold: id, and its request is aborted', async () => {
    const e = await callError(client.callTool({ name: 't__hang', arguments: { tag: 'idle-1' } }));
    expect(e.message).toContain('timed out after 300 ms without progress');
    const call = await callEvent(fixture, 'idle-1');
    expect(call.id).toMatch(MANIFOLD_ID);
    await cancelledAndAborted(fixture, call.id);
    await stillConnected();
  });

  it('a late answer and late progress for a timed-out call are dropped silently; the upstream stays ready', async () => {
    const logsBefore = gw.logs.length;
    const seen: number[] = [];
    const e = await callError(
      client.callTool({ name: 't__late_answer', arguments: { tag: 'late-1' } }, CallToolResultSchema, {
        onprogress: (p) => seen.push(p.progress),
      }),
    );
    expect(e.message).toContain('timed out');
    const call = await callEvent(fixture, 'late-1');
    expect(call.progressToken).toBe(call.id);
    await eventually(
      () => has(fixture, (ev) => ev.event === 'request-closed' && ev.id === call.id),
      'the upstream request closed',
    );
    await eventually(
      () => has(fixture, (ev) => ev.event === 'pushed' && ev.id === call.id),
      'late answer sent',
    );
    // `later` is answered on the same GET stream, after the late messages: once it is answered,
    // the gateway has handled them.
    const res = await client.callTool({ name: 't__later', arguments: { tag: 'after-late' } });
    expect(text(res)).toContain('later done');
    expect(seen).toEqual([]);
    const newLogs = gw.logs.slice(logsBefore);
    // Handed to the SDK client, they would be reported as unknown ids (a transport error).
    expect(newLogs.filter((l) => l.event === 'upstream.transport_error')).toEqual([]);
    expect(newLogs.filter((l) => l.event === 'upstream.unavailable')).toEqual([]);
    await stillConnected();
  });

  // A call answered on another stream keeps its request signal until it ends: its timeout must
  // not abort a signal that a later call reuses.
  it('a call after a 202-answered call that timed out is still sent upstream and answered', async () => {
    const first = await callError(
      client.callTool({ name: 't__later', arguments: { tag: 'slow-202', delayMs: 1000 } }),
    );
    expect(first.message).toContain('timed out after 300 ms without progress');
    const res = await client.callTool({ name: 't__echo', arguments: { tag: 'after-slow-202' } });
    expect(text(res)).toContain('echo:after-slow-202');
    expect((await callEvent(fixture, 'after-slow-202')).id).toMatch(MANIFOLD_ID);
  });
});

// Progress every 50 ms against a 1 s idle timeout: only a stall of a whole second (never seen, even
// on a loaded CI machine) could end the call before its absolute maximum.
describe('direct tools/call: progress against the absolute maximum (timeoutMs 1000, maxCallTimeoutMs 2500)', () => {
  let fixture: Fixture;
  let client: Client;
  const setup = scripted('t', { callTimeoutMs: 1000, maxCallTimeoutMs: 2500 }, { timeoutMs: 1000 });
  beforeAll(async () => {
    ({ fixture, client } = await setup.start());
  });
  afterAll(() => setup.stop());
  const stillConnected = () => setup.stillConnected();

  it('progress restarts the idle timeout; the absolute maximum still ends the call, cancelled and aborted upstream', async () => {
    const seen: number[] = [];
    const e = await callError(
      client.callTool({ name: 't__ticking', arguments: { tag: 'tick-1' } }, CallToolResultSchema, {
        onprogress: (p) => seen.push(p.progress),
      }),
    );
    // Not the idle timeout: progress kept the call alive until the absolute maximum.
    expect(e.message).toContain('absolute maximum of 2500 ms');
    expect(e.message).not.toContain('without progress');
    expect(seen.length).toBeGreaterThan(3);
    const call = await callEvent(fixture, 'tick-1');
    expect(call.progressToken).toBe(call.id);
    await cancelledAndAborted(fixture, call.id);
    await stillConnected();
  });
});

describe('direct tools/call: server-everything over streamable HTTP (SSE answers)', () => {
  let everything: Spawned;
  let gw: TestGateway;
  let client: Client;
  let spy: MockInstance<DirectCaller['request']>;

  beforeAll(async () => {
    spy = vi.spyOn(DirectCaller.prototype, 'request');
    everything = await startEverythingHttp('streamableHttp');
    gw = await startTestGateway({
      gateway: { allowedHosts: [`127.0.0.1:${everything.port}`] },
      mcpServers: { e: { type: 'streamable-http', url: everything.url } },
    });
    client = await connectClient(gw.url);
  });
  afterEach(() => spy.mockClear());
  afterAll(async () => {
    spy.mockRestore();
    await client?.close();
    await gw?.stop();
    await everything?.stop();
  });

  it('a plain call (echo) goes through the direct path', async () => {
    const res = await client.callTool({ name: 'e__echo', arguments: { message: 'straight through' } });
    expect(text(res)).toContain('straight through');
    expect(spy).toHaveBeenCalledTimes(1);
    expect(spy.mock.calls[0]![0]).toBe('tools/call');
    expect(spy.mock.calls[0]![1]).toMatchObject({ name: 'echo' });
    expect(await spy.mock.results[0]!.value).toMatchObject({ content: expect.any(Array) });
  });

  it('a call with progress goes through the direct path and its progress reaches the client', async () => {
    const seen: number[] = [];
    const res = await client.callTool(
      { name: 'e__trigger-long-running-operation', arguments: { duration: 0.4, steps: 3 } },
      CallToolResultSchema,
      { onprogress: (p) => seen.push(p.progress) },
    );
    expect(text(res)).toContain('Long running operation completed');
    expect(spy).toHaveBeenCalledTimes(1);
    expect(spy.mock.calls[0]![2].onprogress).toBeTypeOf('function');
    await eventually(() => seen.length === 3, 'three progress notifications');
    expect(seen).toEqual([1, 2, 3]);
    expect(gw.logs.filter((l) => l.event === 'upstream.transport_error' && l.server === 'e')).toEqual([]);
  });
});
