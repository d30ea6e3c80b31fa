import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Cancellation } from '../../src/lib/cancellation.js';
import { silentLogger } from '../../src/lib/log.js';
import type { JsonAnswer, JsonPost, PostJson } from '../../src/platform.js';
import { DirectCaller } from '../../src/upstream/wire/direct-call.js';
import { legacyWire } from '../../src/upstream/wire/http.js';
import { bundleForChild } from '../helpers/dist.js';

/** A request that never answers, until its signal aborts it. */
function hang(signal: AbortSignal): Promise<JsonAnswer> {
  return new Promise<JsonAnswer>((_, reject) =>
    signal.addEventListener('abort', () => reject(signal.reason), { once: true }),
  );
}

/** A direct caller on `post` and `clock`, recording the ids it cancels upstream. */
function directCaller(post: PostJson, clock: () => number = Date.now) {
  const cancelled: string[] = [];
  const direct = new DirectCaller({
    http: {
      url: 'http://upstream.test/mcp',
      post,
      wire: legacyWire({ sessionId: 's', protocolVersion: '2025-11-25', send: async () => {} }, {}),
    },
    deliver: () => {},
    cancel: (id) => cancelled.push(id),
    now: clock,
    log: silentLogger,
  });
  return { direct, cancelled };
}

// Which abort signal each direct call's request carries. The post here is a recording double that
// answers like a JSON-mode upstream (real requests with signals are tested in post-json.test.ts).
function caller(options: { hang?: (body: { params: { name: string } }) => boolean } = {}) {
  const signals: AbortSignal[] = [];
  const post = async (request: JsonPost): Promise<JsonAnswer> => {
    signals.push(request.signal);
    const message = JSON.parse(request.body) as { id: string; params: { name: string } };
    if (options.hang?.(message)) return hang(request.signal);
    return new Response(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { content: [] } }), {
      headers: { 'content-type': 'application/json' },
    });
  };
  const { direct, cancelled } = directCaller(post);
  const call = (name = 'echo', cancellation?: Cancellation) =>
    direct.request(
      'tools/call',
      { name, arguments: {} },
      { timeoutMs: 5_000, maxTotalMs: 5_000, cancellation },
    );
  return { call, signals, cancelled };
}

describe('direct calls: request signals', () => {
  it('each request has a signal of its own, whether the calls are concurrent or one after another', async () => {
    const { call, signals } = caller();
    await Promise.all([call(), call(), call()]);
    await call();
    expect(new Set(signals).size).toBe(4);
    expect(signals.every((s) => !s.aborted)).toBe(true);
  });

  it('a cancelled call aborts its own request only', async () => {
    const { call, signals, cancelled } = caller({ hang: (m) => m.params.name === 'hang' });
    const c = new Cancellation();
    const hung = call('hang', c);
    const other = call();
    c.abort(new Error('cancelled by the client'));
    await expect(hung).rejects.toThrow('cancelled by the client');
    await expect(other).resolves.toEqual({ content: [] });
    expect(cancelled).toEqual([expect.stringMatching(/^manifold:\d+$/)]);
    const [hangSignal, otherSignal] = signals;
    expect(hangSignal!.aborted).toBe(true);
    expect(otherSignal!.aborted).toBe(false);
  });
});

describe('direct calls: deadlines', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  // A call whose request never answers; progress is fed through route() as the transport would.
  function hangingCall(clock: () => number, timeoutMs: number, maxTotalMs: number) {
    const { direct, cancelled } = directCaller((request) => hang(request.signal), clock);
    const result = direct
      .request('tools/call', { name: 'tick', arguments: {} }, { timeoutMs, maxTotalMs, onprogress: () => {} })
      .then(
        () => undefined,
        (e: unknown) => e as McpError,
      );
    const progress = (n: number) =>
      direct.route({
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: 'manifold:1', progress: n },
      });
    return { result, progress, cancelled };
  }

  it('without progress: the idle timeout, cancelled upstream', async () => {
    vi.useFakeTimers();
    const { result, cancelled } = hangingCall(() => Date.now(), 100, 1_000);
    await vi.advanceTimersByTimeAsync(100);
    const e = await result;
    expect(e?.data).toEqual({ timeout: 100 });
    expect(cancelled).toEqual(['manifold:1']);
  });

  it('progress restarts the idle timeout, and the absolute maximum ends the call even when the wall clock runs slow', async () => {
    vi.useFakeTimers();
    // A wall clock 1% slower than the timers: when the last timer fires, the clock says the
    // maximum is a few milliseconds away. The error must still name the maximum.
    const t0 = Date.now();
    const clock = () => t0 + Math.floor((Date.now() - t0) * 0.99);
    const { result, progress, cancelled } = hangingCall(clock, 1_000, 1_500);
    for (let t = 1; t <= 4; t++) {
      await vi.advanceTimersByTimeAsync(300);
      expect(progress(t)).toBe(true);
    }
    await vi.advanceTimersByTimeAsync(400);
    const e = await result;
    expect(e?.data).toMatchObject({ maxTotalTimeout: 1_500 });
    expect(cancelled).toEqual(['manifold:1']);
  });
});

describe('direct calls: one timer for every deadline', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A stdio-like caller: lines are "written" and answered only when the test says so. */
  function stdioCaller() {
    const cancelled: string[] = [];
    const sent: string[] = [];
    const direct = new DirectCaller({
      send: async (message) => {
        sent.push(String((message as { id: string }).id));
      },
      deliver: () => {},
      cancel: (id) => cancelled.push(id),
      now: () => Date.now(),
      log: silentLogger,
    });
    const call = (timeoutMs: number) =>
      direct.request('tools/call', { name: 'x', arguments: {} }, { timeoutMs, maxTotalMs: 60_000 }).then(
        () => 'answered',
        (e: McpError) => `timed out after ${(e.data as { timeout?: number }).timeout}`,
      );
    const answer = (id: string) =>
      direct.route({ jsonrpc: '2.0', id, result: { content: [] } } as Parameters<typeof direct.route>[0]);
    return { direct, call, answer, cancelled, sent };
  }

  it('a later call with an earlier deadline times out first; each call times out at its own deadline', async () => {
    vi.useFakeTimers();
    const { call, cancelled } = stdioCaller();
    const slow = call(300);
    const quick = call(100);
    await vi.advanceTimersByTimeAsync(100);
    expect(await quick).toBe('timed out after 100');
    expect(cancelled).toEqual(['manifold:2']);
    await vi.advanceTimersByTimeAsync(199);
    expect(cancelled).toEqual(['manifold:2']);
    await vi.advanceTimersByTimeAsync(1);
    expect(await slow).toBe('timed out after 300');
    expect(cancelled).toEqual(['manifold:2', 'manifold:1']);
  });

  it('an answered call is never timed out, and the calls after it keep their deadlines', async () => {
    vi.useFakeTimers();
    const { call, answer, cancelled } = stdioCaller();
    const first = call(100);
    const second = call(250);
    await vi.advanceTimersByTimeAsync(50);
    expect(answer('manifold:1')).toBe(true);
    expect(await first).toBe('answered');
    // The timer armed for the first call's deadline fires and finds nothing due.
    await vi.advanceTimersByTimeAsync(100);
    expect(cancelled).toEqual([]);
    await vi.advanceTimersByTimeAsync(100);
    expect(await second).toBe('timed out after 250');
    // The last sweep found nothing left: no timer is armed again.
    expect(vi.getTimerCount()).toBe(0);
    // A new call arms it again.
    const third = call(100);
    expect(vi.getTimerCount()).toBe(1);
    expect(answer('manifold:3')).toBe(true);
    expect(await third).toBe('answered');
    // Node's timer has `unref`: it stays armed with nothing in flight, holding no process, so
    // the next call arms nothing (#18).
    expect(vi.getTimerCount()).toBe(1);
    const fourth = call(200);
    expect(vi.getTimerCount()).toBe(1);
    // It fires for the third call's deadline, finds nothing due and is armed for the fourth's.
    await vi.advanceTimersByTimeAsync(100);
    expect(cancelled).toEqual(['manifold:2']);
    expect(vi.getTimerCount()).toBe(1);
    expect(answer('manifold:4')).toBe(true);
    expect(await fourth).toBe('answered');
    await vi.advanceTimersByTimeAsync(100);
    expect(cancelled).toEqual(['manifold:2']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('where a timer has no unref (Workers), it goes with the last call, and a call still times out', async () => {
    vi.useFakeTimers();
    const fake = globalThis.setTimeout;
    // Workers' setTimeout gives a number; the fake clock's clearTimeout takes one.
    vi.stubGlobal('setTimeout', (fn: () => void, ms?: number) => Number(fake(fn, ms)));
    try {
      const { call, answer, cancelled } = stdioCaller();
      const first = call(100);
      expect(vi.getTimerCount()).toBe(1);
      expect(answer('manifold:1')).toBe(true);
      expect(await first).toBe('answered');
      expect(vi.getTimerCount()).toBe(0);
      const second = call(100);
      expect(vi.getTimerCount()).toBe(1);
      await vi.advanceTimersByTimeAsync(100);
      expect(await second).toBe('timed out after 100');
      expect(cancelled).toEqual(['manifold:2']);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it('a timer left armed with nothing in flight does not hold the process', () => {
    // A child Node runs the caller as it is bundled: one call with a 10-minute timeout, answered
    // at once. It must exit on its own as soon as that is done.
    const dir = mkdtempSync(join(tmpdir(), 'manifold-direct-timer-'));
    try {
      bundleForChild('src/upstream/wire/direct-call.ts', dir, 'direct-call.mjs');
      writeFileSync(
        join(dir, 'child.mjs'),
        `import { DirectCaller } from './direct-call.mjs';
const log = { debug() {}, info() {}, warn() {}, error() {}, child() { return log; } };
let direct;
direct = new DirectCaller({
  send: async (m) => setImmediate(() => direct.route({ jsonrpc: '2.0', id: m.id, result: { content: [] } })),
  deliver: () => {},
  cancel: () => {},
  now: Date.now,
  log,
});
const options = { timeoutMs: 600_000, maxTotalMs: 600_000 };
await direct.request('tools/call',{ name: 'x', arguments: {} }, options);
await direct.request('tools/call',{ name: 'x', arguments: {} }, options);
console.log(JSON.stringify({ armed: direct.timer !== undefined }));
`,
      );
      // Killed, and the test failed, if it is still running after a minute: well inside the
      // calls' timeout, which a held timer would wait for.
      const printed = execFileSync(process.execPath, [join(dir, 'child.mjs')], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(JSON.parse(printed)).toEqual({ armed: true });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('direct calls: answers by id', () => {
  it('an answer reaches its call only under the id exactly as it was written, long ids included', async () => {
    const sent: { id: string }[] = [];
    const direct = new DirectCaller({
      send: async (message) => {
        sent.push(message as unknown as { id: string });
      },
      deliver: () => {},
      cancel: () => {},
      now: Date.now,
      log: silentLogger,
    });
    // Ids of 13 characters and more, which V8 builds as cons strings: `manifold:99999`.
    (direct as unknown as { seq: number }).seq = 99_998;
    let settled: unknown;
    const answered = direct
      .request('tools/call', { name: 'echo', arguments: {} }, { timeoutMs: 5_000, maxTotalMs: 5_000 })
      .then((r) => {
        settled = r;
      });
    expect(sent.map((m) => m.id)).toEqual(['manifold:99999']);
    const lookalikes = [
      'manifold:099999',
      'manifold:99999.0',
      'manifold:+99999',
      'manifold: 99999',
      'manifold:99999 ',
      'manifold:9.9999e4',
      'manifold:0x1869f',
      'manifold:99999n',
    ];
    for (const id of lookalikes) {
      // Ours by its prefix, so taken (and dropped, as a late answer is), but answering nothing.
      expect(
        direct.route({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: id }] } }),
        id,
      ).toBe(true);
    }
    await new Promise((r) => setTimeout(r, 10));
    expect(settled).toBeUndefined();
    expect(direct.route({ jsonrpc: '2.0', id: 'manifold:99999', result: { content: [] } })).toBe(true);
    await answered;
    expect(settled).toEqual({ content: [] });
  });
});

describe('direct calls: messages that name no request (SECURITY G5)', () => {
  /** A stdio-like caller whose calls are answered only when the test says so. */
  function shared() {
    const direct = new DirectCaller({
      send: async () => {},
      deliver: () => {},
      cancel: () => {},
      now: () => Date.now(),
      log: silentLogger,
    });
    const logs: Record<string, string[]> = {};
    const call = (caller: string | undefined, label: string) => {
      logs[label] = [];
      void direct
        .request(
          'tools/call',
          { name: 'x', arguments: {} },
          {
            caller,
            timeoutMs: 60_000,
            maxTotalMs: 60_000,
            onlog: (m) => logs[label]!.push(String(m.data)),
            onInput: async () => ({}),
          },
        )
        .catch(() => {});
    };
    const answer = (n: number) =>
      direct.route({ jsonrpc: '2.0', id: `manifold:${n}`, result: {} } as Parameters<typeof direct.route>[0]);
    const log = (data: string) =>
      direct.route({
        jsonrpc: '2.0',
        method: 'notifications/message',
        params: { level: 'info', data },
      } as Parameters<typeof direct.route>[0]);
    return { direct, call, answer, log, logs };
  }

  it("49.5: after tenant A's call, a log line or a question that names no call never reaches tenant B's", () => {
    const { direct, call, answer, log, logs } = shared();
    call('acme', 'a');
    answer(1);
    call('globex', 'b');
    // Taken off the wire (the SDK client never sees it), delivered to nobody.
    expect(log("acme's secret")).toBe(true);
    expect(logs.b).toEqual([]);
    expect(direct.inputFor(undefined)).toBeUndefined();
    // A's later call alone in flight: the connection has carried two callers, so not A's either.
    answer(2);
    call('acme', 'a2');
    log("globex's secret");
    expect(logs.a2).toEqual([]);
    expect(direct.inputFor(undefined)).toBeUndefined();
  });

  it("49.5: on a connection one caller ever used, the one call in flight gets it; two in flight, neither; the gateway's own request, nobody", () => {
    const { direct, call, answer, log, logs } = shared();
    call(undefined, 'gateway');
    expect(direct.inputFor(undefined)).toBeUndefined();
    answer(1);
    call('acme', 'a');
    log('mine');
    expect(logs.a).toEqual(['mine']);
    expect(direct.inputFor(undefined)).toBeTypeOf('function');
    call('acme', 'a2');
    log('whose?');
    expect([...logs.a!, ...logs.a2!]).toEqual(['mine']);
    expect(direct.inputFor(undefined)).toBeUndefined();
  });
});
