import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectLegacy, connectModern, resultText, startReferenceHttp } from '../helpers/clients.js';
import { EVERYTHING, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { legacySession } from '../helpers/legacy.js';

/**
 * #49.2: a 2025-03-26 session's JSON-RPC batch is bounded, in its messages and in the bytes of
 * its answer. Real sessions (raw fetch after initialize at 2025-03-26), a legacy upstream
 * (server-everything over stdio) and a modern one (the reference fixture over HTTP); afterwards
 * the v1 and v2 SDK clients are still served.
 */
type Obj = Record<string, unknown>;
type Answer = { id: unknown; result?: Obj; error?: { code: number; message: string } };
const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

const call = (id: string, name: string, args: Obj = {}) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});
const request = (id: string | number, method: string) => ({ jsonrpc: '2.0', id, method });
const note = { jsonrpc: '2.0', method: 'notifications/initialized' };

/** tools/list requests, as many as fit in `size` bytes of JSON. */
function batchOf(prefix: string, size: number): unknown[] {
  const batch: unknown[] = [];
  for (let i = 0, used = 2; ; i++) {
    const m = request(`${prefix}${i}`, 'tools/list');
    used += JSON.stringify(m).length + 1;
    if (used > size) return batch;
    batch.push(m);
  }
}

async function postBatch(url: string, headers: Record<string, string>, batch: unknown[]) {
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(batch) });
  const raw = await res.text();
  return { status: res.status, raw, answers: JSON.parse(raw) as Answer[] | Answer };
}

/** Both eras' SDK clients are still served: a listing, and a call to each upstream named. */
async function stillServes(gw: TestGateway, calls: [string, Obj, string][]): Promise<void> {
  const legacy = await connectLegacy(gw.url);
  const modern = await connectModern(gw.url);
  try {
    for (const h of [legacy, modern]) {
      expect((await h.client.listTools()).tools.length).toBeGreaterThan(0);
      const c = h.client as unknown as { callTool(p: Obj): Promise<unknown> };
      for (const [name, args, text] of calls) {
        expect(resultText(await c.callTool({ name, arguments: args }))).toContain(text);
      }
    }
  } finally {
    await legacy.close();
    await modern.close();
  }
}

const BOTH: [string, Obj, string][] = [
  ['ev__echo', { message: 'after' }, 'after'],
  ['ref__test_simple_text', {}, 'simple text response'],
];

describe('49.2: bounded JSON-RPC batches (2025-03-26)', () => {
  let gw: TestGateway;
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let session: Record<string, string>;
  const CAP = 18_000;
  const audited = (tool: string) =>
    gw.logs.filter((l) => l.event === 'audit.tools_call' && l.tool === tool).length;

  beforeAll(async () => {
    ref = await startReferenceHttp();
    gw = await startTestGateway({
      mcpServers: {
        ev: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        ref: { url: ref.url },
      },
      gateway: {
        allowedHosts: [`127.0.0.1:${ref.port}`],
        maxBatchMessages: 5,
        maxBatchAnswerBytes: CAP,
        // A short first page, so that a tools/list answer fits in the small budget.
        pageSize: 2,
      },
    });
    session = await legacySession(gw.url, { version: '2025-03-26' });
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
    await ref?.stop();
  });

  it('49.2: a batch past gateway.maxBatchMessages runs only its first messages; each request past them gets an error with its id', async () => {
    const r = await postBatch(gw.url, session, [
      request('a', 'ping'),
      note,
      request('b', 'tools/list'),
      call('c', 'ev__echo', { message: 'legacy upstream' }),
      call('d', 'ref__test_simple_text'),
      // Past the five messages taken: not run, each answered with its own id.
      call('e', 'ev__get-sum', { a: 1, b: 2 }),
      note,
      request(7, 'ping'),
      call('g', 'ref__test_audio_content'),
    ]);
    expect(r.status).toBe(200);
    const answers = r.answers as Answer[];
    expect(answers.map((a) => a.id)).toEqual(['a', 'b', 'c', 'd', 'e', 7, 'g']);
    expect(answers[1]!.result!.tools).toHaveLength(2);
    expect(JSON.stringify(answers[2]!.result)).toContain('legacy upstream');
    expect(JSON.stringify(answers[3]!.result)).toContain('simple text response');
    for (const a of answers.slice(4)) {
      expect(a.result).toBeUndefined();
      expect(a.error!.code).toBe(-32600);
      expect(a.error!.message).toMatch(
        /^not run: a batch takes at most 5 messages \(gateway\.maxBatchMessages\)/,
      );
    }
    expect(audited('ev__get-sum')).toBe(0);
    expect(audited('ref__test_audio_content')).toBe(0);
    expect(bytes(r.raw)).toBeLessThanOrEqual(CAP);
  });

  it('49.2: a batch whose answers would pass gateway.maxBatchAnswerBytes stays within it: the request that did not fit says it ran, the rest are not run', async () => {
    const big = 'x'.repeat(9000);
    const r = await postBatch(gw.url, session, [
      call('c1', 'ev__echo', { message: big }),
      call('c2', 'ref__test_simple_text'),
      call('c3', 'ev__echo', { message: `${big}!` }),
      call('c4', 'ref__test_image_content'),
      request('c5', 'ping'),
    ]);
    expect(r.status).toBe(200);
    expect(bytes(r.raw)).toBeLessThanOrEqual(CAP);
    const answers = r.answers as Answer[];
    expect(answers.map((a) => a.id)).toEqual(['c1', 'c2', 'c3', 'c4', 'c5']);
    expect(JSON.stringify(answers[0]!.result)).toContain(big);
    expect(JSON.stringify(answers[1]!.result)).toContain('simple text response');
    // c3 reached its upstream (audited), but its answer is not in the batch: -32011, outcome unknown.
    expect(answers[2]!.error).toMatchObject({ code: -32011 });
    expect(answers[2]!.error!.message).toMatch(
      /ran, but its answer did not fit .*gateway\.maxBatchAnswerBytes/,
    );
    expect(audited('ev__echo')).toBeGreaterThanOrEqual(2);
    for (const a of answers.slice(3)) {
      expect(a.error!.code).toBe(-32600);
      expect(a.error!.message).toMatch(/^not run: the answers to this batch reached 18000 bytes/);
    }
    expect(audited('ref__test_image_content')).toBe(0);
    await stillServes(gw, BOTH);
  });

  it('49.2: a batch too big to answer even with errors is refused whole, and the gateway still serves', async () => {
    // A body just under the 1 MiB default cap: thousands of tools/list, whose errors alone would
    // pass 18,000 bytes.
    const batch = batchOf('l', 1_000_000);
    const results = await Promise.all(Array.from({ length: 10 }, () => postBatch(gw.url, session, batch)));
    for (const r of results) {
      expect(r.status).toBe(400);
      expect(bytes(r.raw)).toBeLessThan(1000);
      expect((r.answers as Answer).error).toMatchObject({ code: -32600 });
      expect((r.answers as Answer).error!.message).toMatch(/gateway\.maxBatchAnswerBytes/);
    }
    await stillServes(gw, BOTH);
  });
});

describe('49.2: the default bounds against the reported batches', () => {
  let gw: TestGateway;
  let session: Record<string, string>;
  const DEFAULT_CAP = 4_194_304;

  beforeAll(async () => {
    gw = await startTestGateway({
      mcpServers: { ev: { command: process.execPath, args: [EVERYTHING, 'stdio'] } },
    });
    session = await legacySession(gw.url, { version: '2025-03-26' });
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
  });

  it('49.2: a 49 KB batch of tools/list, ten at once, is answered within the default bounds, element by element', async () => {
    const batch = batchOf('t', 49_000);
    const results = await Promise.all(Array.from({ length: 10 }, () => postBatch(gw.url, session, batch)));
    for (const r of results) {
      expect(r.status).toBe(200);
      expect(bytes(r.raw)).toBeLessThanOrEqual(DEFAULT_CAP);
      const answers = r.answers as Answer[];
      expect(answers.map((a) => a.id)).toEqual(batch.map((m) => (m as { id: string }).id));
      // The first 100 ran (answered, or withheld once the answer was full); the rest did not.
      expect(answers[0]!.result!.tools).toBeDefined();
      for (const a of answers.slice(100)) expect(a.error?.code).toBe(-32600);
    }
    const legacy = await connectLegacy(gw.url);
    try {
      expect((await legacy.client.listTools()).tools.length).toBeGreaterThan(0);
    } finally {
      await legacy.close();
    }
  });
});
