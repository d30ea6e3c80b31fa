import { getEventListeners } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeEgress } from '../../deploy/node/runtime/egress.js';
import type { JsonAnswer, PostJson } from '../../src/platform.js';
import { postJsonOf } from '../../src/upstream/wire/egress-fetch.js';

// Node's Platform.postJson (deploy/node/runtime/egress.ts: one exchange on undici's dispatcher),
// against a real loopback server whose routes script each answer.
const CAP = 64 * 1024;
let server: Server;
let base: string;
let post: PostJson;
/** The route's answer to a POST of `{}`, with `signal` (a fresh one by default). */
const f = (url: string, init: { headers?: Record<string, string>; signal?: AbortSignal } = {}) =>
  post({
    url,
    headers: init.headers ?? { 'content-type': 'application/json' },
    body: '{}',
    signal: init.signal ?? new AbortController().signal,
  });
const BIG: Record<string, string> = {
  '/big-ascii': JSON.stringify({ text: 'line\n"q"\\'.repeat(20_000) }),
  '/big-utf8': JSON.stringify({ text: 'žluťoučký 😀 '.repeat(10_000) }),
};
const closed: string[] = [];
const streams = new Map<string, ServerResponse>();

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = req.url ?? '/';
    res.on('close', () => closed.push(path));
    if (BIG[path] !== undefined) {
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(BIG[path]),
      });
      res.end(BIG[path]);
    } else if (path === '/bom') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('\ufeff{"ok":true}');
    } else if (path === '/gzip') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      res.end('not really gzip');
    } else if (path === '/json') {
      const body = JSON.stringify({
        ok: true,
        accept: req.headers['accept-encoding'],
        x: req.headers['x-key'],
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    } else if (path === '/chunked-big') {
      res.writeHead(200, { 'content-type': 'application/json' });
      const piece = 'x'.repeat(8192);
      let sent = 0;
      const timer = setInterval(() => {
        if (res.destroyed || sent > 40) return clearInterval(timer);
        res.write(piece);
        sent++;
      }, 1);
    } else if (path === '/declared-big') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(CAP + 1) });
      res.write('{');
    } else if (path.startsWith('/split/')) {
      // A JSON body of the given size whose one '€' (3 bytes in UTF-8) is split between two
      // writes, the second after a pause: two socket reads, the character across them.
      const size = Number(path.slice('/split/'.length));
      const head = Buffer.from('{"t":"');
      const tail = Buffer.from('"}');
      const euro = Buffer.from('€');
      const fill = size - head.length - tail.length - euro.length;
      const half = fill >> 1;
      const body = Buffer.concat([head, Buffer.alloc(half, 'a'), euro, Buffer.alloc(fill - half, 'b'), tail]);
      const cut = head.length + half + 2;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) });
      res.write(body.subarray(0, cut));
      setTimeout(() => res.end(body.subarray(cut)), 20);
    } else if (path === '/empty') {
      res.writeHead(204).end();
    } else if (path.startsWith('/one-event/')) {
      // One event of the given size, written at once: more than one socket read past 64 KiB.
      const size = Number(path.slice('/one-event/'.length));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`data: ${'z'.repeat(size)}\n\n`);
    } else if (path.startsWith('/sse')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      streams.set(path, res);
    } else if (path === '/slow') {
      // Headers only after a while: long enough to abort before the response starts.
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'), 500);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
  post = nodeEgress({ allowedHosts: [`127.0.0.1:${port}`], maxUpstreamBodyBytes: CAP }).postJson;
});

afterAll(async () => {
  for (const s of streams.values()) s.destroy();
  await new Promise((r) => server.close(r));
});

async function until(check: () => boolean, what: string) {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describe('Node postJson (undici dispatcher)', () => {
  it('a JSON answer: status, headers by any case, the body once; headers sent lowercased, uncompressed', async () => {
    const r = await f(`${base}/json`, { headers: { 'X-Key': 'k1' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('Content-Type')).toBe('application/json');
    expect(JSON.parse(await r.text())).toEqual({ ok: true, accept: 'identity', x: 'k1' });
    await expect(r.text()).rejects.toThrow(/already been read/);
  });

  it('reads ASCII and UTF-8 bodies past 64 KiB exactly', async () => {
    post = nodeEgress({ allowedHosts: [new URL(base).host], maxUpstreamBodyBytes: 1 << 20 }).postJson;
    try {
      for (const path of Object.keys(BIG)) expect(await (await f(`${base}${path}`)).text()).toBe(BIG[path]);
    } finally {
      post = nodeEgress({ allowedHosts: [new URL(base).host], maxUpstreamBodyBytes: CAP }).postJson;
    }
  });

  it("drops a leading byte order mark, as a Response's text() does on every runtime", async () => {
    const viaFetch = postJsonOf({ fetch });
    const answers: JsonAnswer[] = [
      await f(`${base}/bom`),
      await viaFetch({ url: `${base}/bom`, headers: {}, body: '{}', signal: new AbortController().signal }),
    ];
    for (const r of answers) expect(await r.text()).toBe('{"ok":true}');
  });

  it('an encoding that was not asked for is refused, not read as text', async () => {
    await expect(f(`${base}/gzip`)).rejects.toMatchObject({ code: 'ERR_UPSTREAM_ERROR' });
  });

  it('a body past the cap is refused: without a length while it streams, with one before reading', async () => {
    await expect(f(`${base}/chunked-big`)).rejects.toMatchObject({ code: 'ERR_UPSTREAM_BODY_TOO_LARGE' });
    await expect(f(`${base}/declared-big`)).rejects.toMatchObject({ code: 'ERR_UPSTREAM_BODY_TOO_LARGE' });
    // The upstream's connection was cut, not read to the end.
    await until(() => closed.includes('/chunked-big') && closed.includes('/declared-big'), 'both closed');
  });

  it('#18 a character split between two socket reads decodes whole, in a small body and in one at the cap', async () => {
    for (const size of [100, CAP]) {
      const r = await f(`${base}/split/${size}`);
      const { t } = JSON.parse(await r.text()) as { t: string };
      expect(t).toBe(`${'a'.repeat(t.indexOf('€'))}€${'b'.repeat(t.length - t.indexOf('€') - 1)}`);
      expect(Buffer.byteLength(JSON.stringify({ t }))).toBe(size);
      expect(t).not.toContain('\ufffd');
    }
  });

  it('a null-body status has no body', async () => {
    const r = await f(`${base}/empty`);
    expect(r.status).toBe(204);
    expect(r.body).toBeNull();
  });

  it('an event stream is a stream: events arrive while the answer is still open', async () => {
    const r = await f(`${base}/sse-a`);
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    const reader = r.body!.getReader();
    const decoder = new TextDecoder();
    expect(decoder.decode((await reader.read()).value)).toBe('data: first\n\n');
    streams.get('/sse-a')!.write('data: second\n\n');
    expect(decoder.decode((await reader.read()).value)).toBe('data: second\n\n');
    streams.get('/sse-a')!.end();
    expect((await reader.read()).done).toBe(true);
  });

  it('an event stream read slowly loses nothing (backpressure pauses the socket, reading resumes it)', async () => {
    const r = await f(`${base}/sse-b`);
    const res = streams.get('/sse-b')!;
    const event = `data: ${'y'.repeat(1000)}\n\n`;
    for (let i = 0; i < 300; i++) res.write(event);
    res.end();
    const reader = r.body!.getReader();
    let bytes = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      await new Promise((r2) => setImmediate(r2));
    }
    expect(bytes).toBe('data: first\n\n'.length + 300 * event.length);
  });

  // #13 item 1: undici's resume re-ran the parser on an empty buffer, the empty chunk paused the
  // socket again, and every SSE answer past one socket read (~64 KiB) spun for ever.
  it('#13.1 SSE answers of every size, from 1 byte to past the per-event cap, end: whole, or refused at the cap', async () => {
    for (const size of [1, 1000, 65_000, 65_536, 70_000, 100_000, CAP - 8, CAP, CAP + 1, 4 * CAP]) {
      const r = await f(`${base}/one-event/${size}`);
      const reader = r.body!.getReader();
      let bytes = 0;
      let chunks = 0;
      let outcome: 'done' | 'refused' | 'spinning' = 'done';
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          bytes += value.byteLength;
          // A read count far past the bytes' worth of socket reads is the spin, whatever the clock.
          if (++chunks > 10_000) {
            outcome = 'spinning';
            break;
          }
        }
      } catch (e) {
        expect(e).toMatchObject({ code: 'ERR_UPSTREAM_BODY_TOO_LARGE' });
        outcome = 'refused';
      }
      expect({ size, outcome }).toEqual({ size, outcome: size + 6 > CAP ? 'refused' : 'done' });
      if (outcome === 'done') expect(bytes).toBe(size + 8);
    }
  });

  it('aborting mid-stream errors the stream with the reason and closes the connection', async () => {
    const ac = new AbortController();
    const r = await f(`${base}/sse-c`, { signal: ac.signal });
    const reader = r.body!.getReader();
    await reader.read();
    ac.abort(new Error('enough'));
    await expect(reader.read()).rejects.toThrow('enough');
    await until(() => closed.includes('/sse-c'), 'sse-c closed');
  });

  it('aborting before the answer starts rejects with the reason at once', async () => {
    const ac = new AbortController();
    const p = f(`${base}/slow`, { signal: ac.signal });
    setTimeout(() => ac.abort(new Error('gave up')), 20);
    await expect(p).rejects.toThrow('gave up');
    await expect(f(`${base}/json`, { signal: ac.signal })).rejects.toThrow('gave up');
  });

  it('a finished request leaves no listener on its signal', async () => {
    const ac = new AbortController();
    const r = await f(`${base}/json`, { signal: ac.signal });
    await r.text();
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
    const sse = await f(`${base}/sse-d`, { signal: ac.signal });
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(1);
    streams.get('/sse-d')!.end();
    await sse.text();
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
  });
});
