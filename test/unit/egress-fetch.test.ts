import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { nodeEgress } from '../../deploy/node/runtime/egress.js';
import { ManifoldError } from '../../src/errors.js';
import { egressPolicy } from '../../src/guards/egress/policy.js';
import { guardedFetch, guardedPost, postJsonOf } from '../../src/upstream/wire/egress-fetch.js';

// Real loopback servers. Loopback is private, so each test lists the ports it means to reach.

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

interface TestServer {
  server: Server;
  port: number;
  origin: string;
  requests: { method: string; url: string }[];
}

async function startServer(handler: Handler): Promise<TestServer> {
  const requests: { method: string; url: string }[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      body += c;
    });
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '' });
      handler(req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { server, port, origin: `http://127.0.0.1:${port}`, requests };
}

function stop(s: TestServer | undefined): Promise<void> {
  if (!s) return Promise.resolve();
  s.server.closeAllConnections();
  return new Promise((r) => s.server.close(() => r()));
}

/** Records every URL the base fetch is asked for: a URL never recorded was never connected to. */
function recording(base: typeof fetch = fetch) {
  const calls: string[] = [];
  const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
    calls.push(String(input));
    return base(input, init);
  }) as typeof fetch;
  return { f, calls };
}

async function egressError(p: Promise<unknown>): Promise<ManifoldError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(ManifoldError);
  return e as ManifoldError;
}

describe('D5: redirects followed by hand, every hop checked', () => {
  let a: TestServer;
  let b: TestServer;

  beforeAll(async () => {
    // /hop/N answers 307 to /hop/N-1; /hop/0 answers 200. /to?u=... redirects anywhere.
    // /echo reports what arrived; /status/NNN redirects to /echo with that status.
    const handler =
      (name: string): Handler =>
      (req, res, body) => {
        const u = new URL(req.url ?? '/', 'http://x');
        const hop = /^\/hop\/(\d+)$/.exec(u.pathname);
        if (hop) {
          const n = Number(hop[1]);
          if (n === 0) {
            res.end(`done at ${name}`);
            return;
          }
          res.writeHead(307, { location: `/hop/${n - 1}` }).end();
          return;
        }
        const status = /^\/status\/(\d+)$/.exec(u.pathname);
        if (status) {
          res.writeHead(Number(status[1]), { location: '/echo' }).end();
          return;
        }
        if (u.pathname === '/to') {
          res
            .writeHead(Number(u.searchParams.get('s') ?? 302), { location: u.searchParams.get('u') ?? '/' })
            .end();
          return;
        }
        if (u.pathname === '/echo') {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ server: name, method: req.method, body, headers: req.headers }));
          return;
        }
        res.writeHead(404).end();
      };
    a = await startServer(handler('a'));
    b = await startServer(handler('b'));
  });
  afterAll(async () => {
    await Promise.all([stop(a), stop(b)]);
  });
  beforeEach(() => {
    a.requests.length = 0;
    b.requests.length = 0;
  });

  const both = () => egressPolicy({ allowedHosts: [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`] });
  const onlyA = () => egressPolicy({ allowedHosts: [`127.0.0.1:${a.port}`] });

  it('D5: three hops are followed and the final answer is returned', async () => {
    const { f, calls } = recording();
    const res = await guardedFetch(f, { policy: onlyA(), maxBodyBytes: 1 << 20 })(`${a.origin}/hop/3`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('done at a');
    expect(calls.map((c) => new URL(c).pathname)).toEqual(['/hop/3', '/hop/2', '/hop/1', '/hop/0']);
  });

  it('D5: a fourth hop is refused with ERR_EGRESS_DENIED and never requested', async () => {
    const { f, calls } = recording();
    const e = await egressError(
      guardedFetch(f, { policy: onlyA(), maxBodyBytes: 1 << 20 })(`${a.origin}/hop/4`),
    );
    expect(e.code).toBe('ERR_EGRESS_DENIED');
    expect(e.data).toMatchObject({ rule: 'egress-denied', reason: 'more than 3 redirects' });
    expect(calls).toHaveLength(4);
    expect(a.requests.map((r) => r.url)).toEqual(['/hop/4', '/hop/3', '/hop/2', '/hop/1']);
  });

  it('D5: maxRedirects is honoured and validated', async () => {
    const one = guardedFetch(fetch, { policy: onlyA(), maxBodyBytes: 1 << 20, maxRedirects: 1 });
    expect(await (await one(`${a.origin}/hop/1`)).text()).toBe('done at a');
    expect((await egressError(one(`${a.origin}/hop/2`))).code).toBe('ERR_EGRESS_DENIED');
    for (const maxRedirects of [-1, 1.5, 21]) {
      expect(() => guardedFetch(fetch, { policy: onlyA(), maxBodyBytes: 1, maxRedirects })).toThrow(
        ManifoldError,
      );
    }
    for (const maxBodyBytes of [0, -1, 1.5, Number.NaN]) {
      expect(() => guardedFetch(fetch, { policy: onlyA(), maxBodyBytes })).toThrow(ManifoldError);
    }
  });

  it('D5: a hop to a host that is not listed is refused before it is requested', async () => {
    const { f, calls } = recording();
    const e = await egressError(
      guardedFetch(f, { policy: onlyA(), maxBodyBytes: 1 << 20 })(
        `${a.origin}/to?u=${encodeURIComponent(`${b.origin}/echo`)}`,
      ),
    );
    expect(e.code).toBe('ERR_EGRESS_DENIED');
    expect(calls).toHaveLength(1);
    expect(b.requests).toHaveLength(0);
  });

  it.each([
    'http://169.254.169.254/latest/meta-data/',
    'http://10.0.0.1/mcp',
    'https://169.254.169.254/mcp',
    'https://[fd00:ec2::254]/',
    'https://2852039166/',
    'https://[::ffff:a9fe:a9fe]/',
    'https://localhost/',
    'file:///etc/passwd',
    'https://user:pw@api.example.com/',
  ])('D5: a hop to %s is refused before any connection is attempted', async (target) => {
    const calls: string[] = [];
    const logged: string[] = [];
    // A scripted first hop (a public upstream is not reachable from a test): it answers 307.
    const scripted = (async (input: RequestInfo | URL) => {
      calls.push(String(input));
      return new Response(null, { status: 307, headers: { location: target } });
    }) as typeof fetch;
    const err = await egressError(
      guardedFetch(scripted, {
        policy: egressPolicy({ allowedHosts: [] }),
        maxBodyBytes: 1 << 20,
        onDenied: (r) => logged.push(r),
      })('https://public.example/start'),
    );
    expect(err.code).toBe('ERR_EGRESS_DENIED');
    expect(err.publicMessage).toBe('egress to this host is not allowed');
    expect(calls).toEqual(['https://public.example/start']);
    expect(logged.length).toBeGreaterThan(0);
  });

  it('D5: a real server redirecting to 10.0.0.1 and 169.254.169.254: refused, only the listed server is contacted', async () => {
    for (const target of ['http://10.0.0.1/mcp', 'http://169.254.169.254/mcp']) {
      const { f, calls } = recording();
      const e = await egressError(
        guardedFetch(f, { policy: onlyA(), maxBodyBytes: 1 << 20 })(
          `${a.origin}/to?s=307&u=${encodeURIComponent(target)}`,
        ),
      );
      expect(e.code).toBe('ERR_EGRESS_DENIED');
      expect(String(e.data?.reason)).toContain('not in allowedHosts');
      expect(calls).toEqual([`${a.origin}/to?s=307&u=${encodeURIComponent(target)}`]);
    }
  });

  it('D5: 307 and 308 keep method and body; 301/302 turn POST into GET; 303 turns PUT into GET', async () => {
    const f = guardedFetch(fetch, { policy: onlyA(), maxBodyBytes: 1 << 20 });
    const post = (status: number, method = 'POST') =>
      f(`${a.origin}/status/${status}`, {
        method,
        headers: { 'content-type': 'application/json', 'x-keep': 'yes' },
        body: '{"jsonrpc":"2.0"}',
      }).then((r) => r.json() as Promise<{ method: string; body: string; headers: Record<string, string> }>);
    for (const s of [307, 308]) {
      const echo = await post(s);
      expect(echo, String(s)).toMatchObject({ method: 'POST', body: '{"jsonrpc":"2.0"}' });
      expect(echo.headers['content-type']).toBe('application/json');
    }
    for (const s of [301, 302, 303]) {
      const echo = await post(s);
      expect(echo, String(s)).toMatchObject({ method: 'GET', body: '' });
      expect(echo.headers['content-type']).toBeUndefined();
      expect(echo.headers['x-keep']).toBe('yes');
    }
    expect(await post(303, 'PUT')).toMatchObject({ method: 'GET', body: '' });
    // 301/302 change only POST (Fetch Standard §4.4 step 12).
    expect(await post(302, 'PUT')).toMatchObject({ method: 'PUT', body: '{"jsonrpc":"2.0"}' });
  });

  it('D5: a redirect that crosses origins keeps only protocol headers: credentials and custom secrets are stripped', async () => {
    const f = guardedFetch(fetch, { policy: both(), maxBodyBytes: 1 << 20 });
    const headers = {
      authorization: 'Bearer s3cret',
      cookie: 'sid=1',
      'proxy-authorization': 'Basic eA==',
      'x-api-key': 'configured-secret',
      'mcp-protocol-version': '2025-11-25',
    };
    const cross = (await (
      await f(`${a.origin}/to?s=307&u=${encodeURIComponent(`${b.origin}/echo`)}`, {
        method: 'POST',
        headers,
        body: 'x',
      })
    ).json()) as { server: string; headers: Record<string, string> };
    expect(cross.server).toBe('b');
    expect(cross.headers.authorization).toBeUndefined();
    expect(cross.headers.cookie).toBeUndefined();
    expect(cross.headers['proxy-authorization']).toBeUndefined();
    expect(cross.headers['x-api-key']).toBeUndefined();
    expect(cross.headers['mcp-protocol-version']).toBe('2025-11-25');
    // Same origin: kept.
    const same = (await (await f(`${a.origin}/to?s=307&u=/echo`, { headers })).json()) as {
      headers: Record<string, string>;
    };
    expect(same.headers.authorization).toBe('Bearer s3cret');
    expect(same.headers.cookie).toBe('sid=1');
    expect(same.headers['x-api-key']).toBe('configured-secret');
  });

  it('D5: a streamed request body is not replayed on 307', async () => {
    const f = guardedFetch(fetch, { policy: onlyA(), maxBodyBytes: 1 << 20 });
    const body = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode('once'));
        c.close();
      },
    });
    const e = await f(`${a.origin}/status/307`, {
      method: 'POST',
      body,
      duplex: 'half',
    } as RequestInit).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ManifoldError);
    expect((e as ManifoldError).code).toBe('ERR_UPSTREAM_ERROR');
  });

  it('D5: redirect: "manual" returns the redirect unfollowed; "error" fails', async () => {
    const f = guardedFetch(fetch, { policy: onlyA(), maxBodyBytes: 1 << 20 });
    const res = await f(`${a.origin}/hop/1`, { redirect: 'manual' });
    expect(res.status).toBe(307);
    await expect(f(`${a.origin}/hop/1`, { redirect: 'error' })).rejects.toThrow(TypeError);
  });

  it("D5: the direct caller's POST follows the same rules: 307/308 re-sent, 301 to GET, other hosts refused", async () => {
    const signal = new AbortController().signal;
    const posts = [
      nodeEgress({ allowedHosts: [`127.0.0.1:${a.port}`], maxUpstreamBodyBytes: 1 << 20 }).postJson,
      guardedPost(
        ({ url, method, headers, body, signal: s }) =>
          fetch(url, { method, headers, body, signal: s, redirect: 'manual' }),
        {
          policy: onlyA(),
        },
      ),
    ];
    for (const post of posts) {
      const at = (path: string) =>
        post({
          url: `${a.origin}${path}`,
          headers: { 'content-type': 'application/json' },
          body: '{"id":1}',
          signal,
        });
      expect(await (await at('/hop/3')).text()).toBe('done at a');
      expect(JSON.parse(await (await at('/status/308')).text())).toMatchObject({
        method: 'POST',
        body: '{"id":1}',
      });
      expect(JSON.parse(await (await at('/status/301')).text())).toMatchObject({ method: 'GET', body: '' });
      expect((await egressError(at('/hop/4'))).code).toBe('ERR_EGRESS_DENIED');
      const off = await egressError(at(`/to?s=307&u=${encodeURIComponent(`${b.origin}/echo`)}`));
      expect(off.code).toBe('ERR_EGRESS_DENIED');
      await expect(
        post({ url: 'http://169.254.169.254/', headers: {}, body: '{}', signal }),
      ).rejects.toMatchObject({
        code: 'ERR_EGRESS_DENIED',
      });
    }
    expect(b.requests).toHaveLength(0);
    // Where a runtime has no postJson of its own, the direct caller posts with the guarded fetch.
    const viaFetch = postJsonOf({ fetch: guardedFetch(fetch, { policy: onlyA(), maxBodyBytes: 1 << 20 }) });
    expect(
      (await egressError(viaFetch({ url: `${a.origin}/hop/4`, headers: {}, body: '{}', signal }))).code,
    ).toBe('ERR_EGRESS_DENIED');
  });

  it('D5: the same guard through the Node fetch (undici Agent with the checked lookup)', async () => {
    const f = nodeEgress({ allowedHosts: [`127.0.0.1:${a.port}`], maxUpstreamBodyBytes: 1 << 20 }).fetch;
    expect(await (await f(`${a.origin}/hop/3`)).text()).toBe('done at a');
    expect((await egressError(f(`${a.origin}/hop/4`))).code).toBe('ERR_EGRESS_DENIED');
    const e = await egressError(f(`${a.origin}/to?u=${encodeURIComponent('http://169.254.169.254/')}`));
    expect(e.code).toBe('ERR_EGRESS_DENIED');
    // Same host, other port: not listed.
    expect((await egressError(f(`${b.origin}/echo`))).code).toBe('ERR_EGRESS_DENIED');
    expect(b.requests).toHaveLength(0);
  });
});

describe('upstream body cap (maxUpstreamBodyBytes), enforced while the body streams', () => {
  const TOTAL = 20 * 1024 * 1024;
  const CHUNK = 64 * 1024;
  const CAP = 1024 * 1024;
  let s: TestServer;
  let written = 0;
  let finished = false;
  let closedEarly: Promise<void> = Promise.resolve();

  beforeAll(async () => {
    s = await startServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if (u.pathname === '/huge' || u.pathname === '/huge-declared') {
        written = 0;
        finished = false;
        closedEarly = new Promise((r) => res.once('close', () => r()));
        res.writeHead(200, {
          'content-type': 'application/json',
          ...(u.pathname === '/huge-declared' ? { 'content-length': String(TOTAL) } : {}),
        });
        const chunk = Buffer.alloc(CHUNK, 0x61);
        // Writes only as fast as the peer reads (respecting 'drain'), like a real streaming upstream.
        const pump = () => {
          while (written < TOTAL && !res.destroyed) {
            written += CHUNK;
            if (!res.write(chunk)) {
              res.once('drain', pump);
              return;
            }
          }
          if (written >= TOTAL) {
            finished = true;
            res.end();
          }
        };
        pump();
        return;
      }
      if (u.pathname === '/small') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: 'x'.repeat(1000) }));
        return;
      }
      if (u.pathname === '/gzip-bomb') {
        const packed = gzipSync(Buffer.alloc(TOTAL, 0));
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' });
        res.end(packed);
        return;
      }
      if (u.pathname === '/events') {
        // Many small events, in total far more than the cap: a healthy long-lived stream.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const event = `data: ${'e'.repeat(1000)}\r\n\r\n`;
        res.end(event.repeat(Math.ceil((3 * CAP) / event.length)));
        return;
      }
      if (u.pathname === '/big-event') {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
        res.write('data: small\n\n');
        const line = `data: ${'z'.repeat(CHUNK)}\n`;
        let n = 0;
        const more = () => {
          while (n < 40 && !res.destroyed) {
            n++;
            if (!res.write(line)) {
              res.once('drain', more);
              return;
            }
          }
          res.end('\n');
        };
        more();
        return;
      }
      res.writeHead(404).end();
    });
  });
  afterAll(() => stop(s));

  const policy = () => egressPolicy({ allowedHosts: [`127.0.0.1:${s.port}`] });

  /** A base fetch that counts the body bytes the guard actually pulls off the network. */
  function counting(base: typeof fetch = fetch) {
    const seen = { bytes: 0 };
    const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const res = await base(input, init);
      if (!res.body) return res;
      const counted = res.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, c) {
            seen.bytes += chunk.byteLength;
            c.enqueue(chunk);
          },
        }),
      );
      return new Response(counted, { status: res.status, headers: res.headers });
    }) as typeof fetch;
    return { f, seen };
  }

  it('a 20 MB streamed body errors with ERR_UPSTREAM_BODY_TOO_LARGE after about the cap, and the upstream is cut off', async () => {
    const { f, seen } = counting();
    const res = await guardedFetch(f, { policy: policy(), maxBodyBytes: CAP })(`${s.origin}/huge`);
    expect(res.status).toBe(200);
    const e = (await res.text().catch((x: unknown) => x)) as ManifoldError;
    expect(e).toBeInstanceOf(ManifoldError);
    expect(e.code).toBe('ERR_UPSTREAM_BODY_TOO_LARGE');
    expect(e.publicMessage).toBe(`the upstream response exceeded maxUpstreamBodyBytes (${CAP} bytes)`);
    // The guard pulled the cap plus at most a little read-ahead, never the whole 20 MB.
    expect(seen.bytes).toBeGreaterThan(CAP);
    expect(seen.bytes).toBeLessThan(CAP + 4 * CHUNK);
    // The connection was cancelled: the server saw it close before it could write everything.
    await closedEarly;
    expect(finished).toBe(false);
    expect(written).toBeLessThan(TOTAL);
  });

  it('the same through the Node fetch (undici): bounded bytes read, upstream cut off', async () => {
    const node = nodeEgress({ allowedHosts: [`127.0.0.1:${s.port}`], maxUpstreamBodyBytes: CAP }).fetch;
    let got = 0;
    // A JSON body is read whole inside the fetch, so the cap may fire before the Response exists;
    // a streamed body fires it while being read. Either way no more than the cap is held.
    const e = await (async () => {
      const res = await node(`${s.origin}/huge`);
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return undefined;
        got += value.byteLength;
      }
    })().catch((x: unknown) => x);
    expect((e as ManifoldError).code).toBe('ERR_UPSTREAM_BODY_TOO_LARGE');
    expect(got).toBeLessThanOrEqual(CAP);
    await closedEarly;
    expect(finished).toBe(false);
  });

  it('a declared Content-Length over the cap is refused before any of the body is read', async () => {
    const { f, seen } = counting();
    const e = await guardedFetch(f, { policy: policy(), maxBodyBytes: CAP })(
      `${s.origin}/huge-declared`,
    ).catch((x: unknown) => x);
    expect((e as ManifoldError).code).toBe('ERR_UPSTREAM_BODY_TOO_LARGE');
    expect(seen.bytes).toBe(0);
    await closedEarly;
    expect(finished).toBe(false);
  });

  it('a body under the cap passes through untouched', async () => {
    const res = await guardedFetch(fetch, { policy: policy(), maxBodyBytes: CAP })(`${s.origin}/small`);
    expect(((await res.json()) as { ok: string }).ok).toHaveLength(1000);
  });

  it('the cap counts decoded bytes: a small gzip body that inflates to 20 MB is refused', async () => {
    const res = await guardedFetch(fetch, { policy: policy(), maxBodyBytes: CAP })(`${s.origin}/gzip-bomb`);
    const e = await res.arrayBuffer().catch((x: unknown) => x);
    expect((e as ManifoldError).code).toBe('ERR_UPSTREAM_BODY_TOO_LARGE');
  });

  it('an event stream is capped per event, not in total: many small events pass', async () => {
    const res = await guardedFetch(fetch, { policy: policy(), maxBodyBytes: CAP })(`${s.origin}/events`);
    const text = await res.text();
    expect(text.length).toBeGreaterThan(2 * CAP);
  });

  it('an event stream with one event larger than the cap errors', async () => {
    const res = await guardedFetch(fetch, { policy: policy(), maxBodyBytes: CAP })(`${s.origin}/big-event`);
    const e = (await res.text().catch((x: unknown) => x)) as ManifoldError;
    expect(e.code).toBe('ERR_UPSTREAM_BODY_TOO_LARGE');
    expect(e.publicMessage).toMatch(/event-stream event exceeded maxUpstreamBodyBytes/);
  });
});
