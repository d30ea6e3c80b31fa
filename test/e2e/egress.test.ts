import { createServer, type Server } from 'node:net';
import { resolve } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Fixture, health, startFixture } from '../helpers/fixture.js';
import {
  connectClient,
  eventually,
  FIXTURE,
  ROOT,
  type Spawned,
  startEverythingHttp,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

// SECURITY D: egress through the whole gateway, with real upstreams on loopback. Loopback is a
// private range, so an HTTP upstream there is reachable only when its host:port is listed.

const REDIRECT_SERVER = resolve(ROOT, 'test/fixtures/redirect-server.mjs');
const HUGE_BODY_SERVER = resolve(ROOT, 'test/fixtures/huge-body-server.mjs');

describe('egress: an HTTP upstream on loopback that is listed in allowedHosts', () => {
  let everything: Spawned;
  let gw: TestGateway;
  let client: Client;

  beforeAll(async () => {
    everything = await startEverythingHttp('streamableHttp');
    gw = await startTestGateway({
      gateway: { allowedHosts: [`127.0.0.1:${everything.port}`] },
      mcpServers: { ehttp: { type: 'streamable-http', url: everything.url } },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
    await everything?.stop();
  });

  it('D1/D2: is connected over plain http and its tools are listed and callable', async () => {
    expect((await health(gw)).ehttp).toMatchObject({ state: 'ready' });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain('ehttp__echo');
    const res = await client.callTool({ name: 'ehttp__echo', arguments: { message: 'through the guard' } });
    expect(JSON.stringify(res.content)).toContain('through the guard');
  });
});

describe('egress: refused upstreams are isolated and reported with rule egress-denied', () => {
  let everything: Spawned;
  let gw: TestGateway;
  let client: Client;

  beforeAll(async () => {
    everything = await startEverythingHttp('streamableHttp');
    gw = await startTestGateway({
      // No allowedHosts: any public https host, nothing private, no plain http.
      mcpServers: {
        ehttp: { type: 'streamable-http', url: everything.url },
        sibling: { command: process.execPath, args: [FIXTURE] },
      },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
    await everything?.stop();
  });

  it('D3: a loopback upstream that is not listed is not connected and its tools are not listed', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names.filter((n) => n.startsWith('ehttp__'))).toEqual([]);
    expect(names).toContain('sibling__stats');
  });

  it('D3: /healthz reports the server unavailable with a generic error; the reason is logged', async () => {
    const h = await health(gw);
    expect(h.ehttp).toMatchObject({ tools: 0 });
    expect(h.ehttp?.state).not.toBe('ready');
    expect(h.ehttp?.lastError).toBe('egress to this host is not allowed');
    expect(h.sibling).toMatchObject({ state: 'ready' });
    const unavailable = gw.logs.find((l) => l.event === 'upstream.unavailable' && l.server === 'ehttp');
    expect(unavailable).toBeDefined();
    // The detailed reason goes to the log only.
    const denied = gw.logs.find((l) => l.event === 'egress.denied' && l.server === 'ehttp');
    expect(String(denied?.reason)).toContain(`127.0.0.1:${everything.port}`);
  });

  it('D3: /healthz names the server with rule egress-denied', async () => {
    expect((await health(gw)).ehttp).toMatchObject({ rule: 'egress-denied' });
  });

  it('D7: the client sees no internal address; the stdio sibling still serves', async () => {
    const res = await client.callTool({ name: 'sibling__stats', arguments: {} });
    expect(res.isError).toBeFalsy();
    const err = await client
      .callTool({ name: 'ehttp__echo', arguments: { message: 'x' } })
      .catch((e: Error) => e);
    const text = err instanceof Error ? err.message : JSON.stringify(err);
    expect(text).not.toContain('127.0.0.1');
    expect(text).not.toContain(String(everything.port));
  });
});

describe('egress: redirects to private addresses and huge bodies, through the gateway', () => {
  let toMetadata: Fixture;
  let toPrivate: Fixture;
  let toTrap: Fixture;
  let huge: Fixture;
  let trap: Server;
  let trapConnections = 0;
  let gw: TestGateway;
  let client: Client;

  beforeAll(async () => {
    // A listener standing for an internal service a redirect points at: every connection counts.
    trap = createServer((s) => {
      trapConnections++;
      s.destroy();
    });
    await new Promise<void>((r) => trap.listen(0, '127.0.0.1', r));
    const trapPort = (trap.address() as { port: number }).port;
    [toMetadata, toPrivate, toTrap, huge] = await Promise.all([
      startFixture(REDIRECT_SERVER, { LOCATION: 'http://169.254.169.254/mcp' }),
      startFixture(REDIRECT_SERVER, { LOCATION: 'http://10.0.0.1/mcp', STATUS: '308' }),
      startFixture(REDIRECT_SERVER, { LOCATION: `http://127.0.0.1:${trapPort}/mcp` }),
      startFixture(HUGE_BODY_SERVER),
    ]);
    gw = await startTestGateway({
      gateway: {
        allowedHosts: [toMetadata, toPrivate, toTrap, huge].map((f) => `127.0.0.1:${f.port}`),
      },
      mcpServers: {
        meta: { type: 'streamable-http', url: toMetadata.url },
        priv: { type: 'streamable-http', url: toPrivate.url },
        trapped: { type: 'streamable-http', url: toTrap.url },
        huge: { type: 'streamable-http', url: huge.url },
        sibling: { command: process.execPath, args: [FIXTURE] },
      },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
    await Promise.all([toMetadata, toPrivate, toTrap, huge].map((f) => f?.stop()));
    await new Promise<void>((r) => (trap ? trap.close(() => r()) : r()));
  });

  it('D5: a listed upstream that redirects to 169.254.169.254 or 10.0.0.1 is refused with egress-denied', async () => {
    const h = await health(gw);
    for (const name of ['meta', 'priv', 'trapped']) {
      expect(h[name], name).toMatchObject({ tools: 0, lastError: 'egress to this host is not allowed' });
      expect(h[name]?.state, name).not.toBe('ready');
    }
    // The first hop was contacted (it is listed) ...
    expect(toMetadata.events.some((e) => e.event === 'request' && e.method === 'POST')).toBe(true);
    expect(toPrivate.events.some((e) => e.event === 'request' && e.method === 'POST')).toBe(true);
    // ... and the hop was refused by the URL check, which runs before any connection is made.
    const reasons = gw.logs.filter((l) => l.event === 'egress.denied').map((l) => String(l.reason));
    expect(reasons.some((r) => r.includes('169.254.169.254'))).toBe(true);
    expect(reasons.some((r) => r.includes('10.0.0.1'))).toBe(true);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).filter((n) => /^(meta|priv|trapped)__/.test(n))).toEqual([]);
    expect(tools.map((t) => t.name)).toContain('sibling__stats');
  });

  it('D5: /healthz names each redirecting server with rule egress-denied', async () => {
    const h = await health(gw);
    for (const name of ['meta', 'priv', 'trapped'])
      expect(h[name], name).toMatchObject({ rule: 'egress-denied' });
  });

  it('D5: no connection is ever made to the redirect target', async () => {
    // Let the refused upstreams retry a few times, then check the trap was never reached.
    await eventually(
      () => toTrap.events.filter((e) => e.event === 'request').length >= 2,
      'the trapped upstream retried at least once',
    );
    expect(trapConnections).toBe(0);
  });

  it('a 100 MB tool result is cut off at maxUpstreamBodyBytes; gateway memory stays bounded', async () => {
    expect((await health(gw)).huge).toMatchObject({ state: 'ready' });
    const limit = gw.config.gateway.maxUpstreamBodyBytes;
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 10);
    let seen: unknown;
    try {
      seen = await client
        .callTool({ name: 'huge__huge', arguments: {} }, CallToolResultSchema, { timeout: 60_000 })
        .then(
          (r) => ({ result: r }),
          (e: Error & { code?: number; data?: unknown }) => ({
            error: { code: e.code, message: e.message, data: e.data },
          }),
        );
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, process.memoryUsage().rss);
    // What the client sees: the tools/call layer turns ERR_UPSTREAM_BODY_TOO_LARGE into an isError
    // result naming the cap (a JSON-RPC error -32014 would be acceptable too).
    const mentionsCap = expect.stringContaining(`exceeded maxUpstreamBodyBytes (${limit} bytes)`);
    if ((seen as { error?: unknown }).error) {
      expect(seen).toMatchObject({ error: { code: -32014, message: mentionsCap } });
    } else {
      expect(seen).toMatchObject({
        result: { isError: true, content: [{ type: 'text', text: mentionsCap }] },
      });
    }
    // The upstream was cut off long before it could send 100 MB.
    await eventually(() => huge.events.some((e) => e.event === 'huge-closed'), 'the huge response closed');
    const closed = huge.events.find((e) => e.event === 'huge-closed')!;
    expect(closed.finished).toBe(false);
    expect(Number(closed.written)).toBeLessThan(100 * 1024 * 1024);
    const growthMb = (peak - before) / 1024 / 1024;
    expect(growthMb, `RSS grew ${growthMb.toFixed(1)} MB`).toBeLessThan(60);
    // And the connection is still usable for the next call.
    const small = await client.callTool({ name: 'huge__small', arguments: {} });
    expect(JSON.stringify(small.content)).toContain('small ok');
  });
});
