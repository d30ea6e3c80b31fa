import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  EVERYTHING,
  eventually,
  FIXTURE,
  freePort,
  type LogLine,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

// SECURITY F1-F4: one broken upstream is a diagnostic; its siblings keep serving.

interface UpstreamHealth {
  name: string;
  transport: string;
  state: string;
  tools: number;
  lastError?: string;
  consecutiveFailures: number;
}

async function health(gw: TestGateway): Promise<{ status: string; upstreams: UpstreamHealth[] }> {
  return (await fetch(gw.url.replace('/mcp', '/healthz'))).json();
}

function upstream(h: { upstreams: UpstreamHealth[] }, name: string): UpstreamHealth {
  const u = h.upstreams.find((x) => x.name === name);
  if (!u) throw new Error(`/healthz does not list ${name}`);
  return u;
}

function textOf(res: unknown): string {
  return (res as { content: { text: string }[] }).content[0]?.text ?? '';
}

/** A real HTTP server on loopback that answers every request with `respond`. */
function brokenHttpServer(respond: (res: ServerResponse) => void): Promise<Server> {
  return new Promise((resolve) => {
    const s = createServer((req, res) => {
      req.resume();
      req.on('end', () => respond(res));
    });
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}

const ESC = String.fromCharCode(0x1b);
const HOSTILE_HEAD = `${ESC}[31mupstream exploded\u202e`;
// C0/C1 controls and bidi overrides: none may reach an operator's terminal from upstream text.
function hasUnsafeChars(text: string): boolean {
  for (const ch of text) {
    const c = ch.codePointAt(0) ?? 0;
    if (
      c < 0x20 ||
      (c >= 0x7f && c <= 0x9f) ||
      (c >= 0x202a && c <= 0x202e) ||
      (c >= 0x2066 && c <= 0x2069)
    ) {
      return true;
    }
  }
  return false;
}

const urlOf = (s: Server) => `http://127.0.0.1:${(s.address() as AddressInfo).port}/mcp`;

function unavailable(logs: LogLine[], server: string): LogLine[] {
  return logs.filter((l) => l.event === 'upstream.unavailable' && l.server === server);
}

describe('failure isolation: one gateway, one good upstream among broken ones', () => {
  let gw: TestGateway;
  let client: Client;
  let startMs: number;
  let http500: Server;
  let garbage: Server;

  beforeAll(async () => {
    // A 500 whose body is large and hostile: ANSI colour, a bidi override, a second line.
    http500 = await brokenHttpServer((res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`${HOSTILE_HEAD}${'x'.repeat(100_000)}\nsecond line`);
    });
    garbage = await brokenHttpServer((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"jsonrpc": "2.0", "id": garbage ]]');
    });
    const nothing = await freePort();
    const t0 = Date.now();
    gw = await startTestGateway({
      mcpServers: {
        good: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        fx: { command: process.execPath, args: [FIXTURE] },
        missing: { command: 'manifold-no-such-command-xyz' },
        nothing: { type: 'streamable-http', url: `http://127.0.0.1:${nothing}/mcp` },
        hang: { command: process.execPath, args: [FIXTURE], env: { FIXTURE_MODE: 'hang-list' } },
        http500: { type: 'streamable-http', url: urlOf(http500) },
        garbage: { type: 'streamable-http', url: urlOf(garbage) },
      },
      // Loopback upstreams need an explicit egress entry (SECURITY D1/D3), so that they fail for
      // their own reasons rather than being refused.
      gateway: { listTimeoutMs: 1500, connectTimeoutMs: 3000, allowedHosts: ['127.0.0.1'] },
    });
    startMs = Date.now() - t0;
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
    await Promise.all([http500, garbage].map((s) => s && new Promise((r) => s.close(() => r(null)))));
  });

  it('F1: the good upstreams are listed and callable as soon as the first attempts settle', async () => {
    // The gateway waited for every first attempt: the hang is bounded by listTimeoutMs (1.5 s) and
    // the garbage by connectTimeoutMs (3 s), so a start well under 10 s proves nothing blocked on them.
    expect(startMs).toBeLessThan(10_000);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toContain('good__echo');
    expect(names).toContain('fx__sleep');
    for (const broken of ['missing', 'nothing', 'hang', 'http500', 'garbage']) {
      expect(names.filter((n) => n.startsWith(`${broken}__`))).toEqual([]);
    }
    const res = await client.callTool({ name: 'good__echo', arguments: { message: 'still here' } });
    expect(textOf(res)).toContain('still here');
  });

  it('F1: a listing while the hung upstream is being retried answers without waiting for it', async () => {
    // Wait for a fresh attempt on the hung server to begin, then list while it hangs (1.5 s).
    const spawnedHang = () => gw.logs.filter((l) => l.event === 'upstream.spawned' && l.server === 'hang');
    const seen = spawnedHang().length;
    await eventually(() => spawnedHang().length > seen, 'a new attempt on the hung upstream');
    const failuresBefore = unavailable(gw.logs, 'hang').length;
    const t0 = Date.now();
    const { tools } = await client.listTools();
    const tookMs = Date.now() - t0;
    expect(tools.map((t) => t.name)).toContain('good__echo');
    // The attempt that was hanging has not even timed out yet: the listing did not wait for it.
    expect(unavailable(gw.logs, 'hang').length).toBe(failuresBefore);
    expect(tookMs).toBeLessThan(1500);
  });

  it('F1: /healthz names each broken upstream with a non-ready state and its last error', async () => {
    const h = await health(gw);
    expect(h.status).toBe('degraded');
    expect(upstream(h, 'good').state).toBe('ready');
    expect(upstream(h, 'fx').state).toBe('ready');
    for (const name of ['missing', 'nothing', 'hang', 'http500', 'garbage']) {
      const u = upstream(h, name);
      expect(u.state, name).not.toBe('ready');
      expect(u.tools, name).toBe(0);
      expect(typeof u.lastError, name).toBe('string');
      expect(u.lastError!.length, name).toBeGreaterThan(0);
    }
    expect(upstream(h, 'missing').lastError).toMatch(/ENOENT|could not start/);
    expect(upstream(h, 'hang').lastError).toMatch(/1500 ms|timed out|deadline/i);
  });

  it('F1: an upstream answering 500 with a huge, hostile body becomes a bounded, clean one-line diagnostic', async () => {
    const u = upstream(await health(gw), 'http500');
    expect(u.state).not.toBe('ready');
    expect(u.lastError!.length).toBeLessThanOrEqual(1000);
    expect(hasUnsafeChars(u.lastError!)).toBe(false);
    expect(u.lastError).not.toContain('second line');
    const logged = unavailable(gw.logs, 'http500')[0]!;
    expect(String(logged.error).length).toBeLessThanOrEqual(1000);
    expect(hasUnsafeChars(String(logged.error))).toBe(false);
  });

  it('F1: the log has an upstream.unavailable event, with server set, for each broken upstream', () => {
    for (const name of ['missing', 'nothing', 'hang', 'http500', 'garbage']) {
      const events = unavailable(gw.logs, name);
      expect(events.length, name).toBeGreaterThanOrEqual(1);
      expect(events[0]!.level).toBe('warn');
      expect(typeof events[0]!.error).toBe('string');
    }
    for (const name of ['good', 'fx']) expect(unavailable(gw.logs, name), name).toEqual([]);
    expect(gw.logs.some((l) => l.event === 'upstream.ready' && l.server === 'good')).toBe(true);
  });

  it('F3: a call to a healthy tool completes while a call to a hung tool is in flight', async () => {
    const stats = async () => JSON.parse(textOf(await client.callTool({ name: 'fx__stats', arguments: {} })));
    const before = await stats();
    const ac = new AbortController();
    let hungSettled = false;
    const hung = client
      .callTool({ name: 'fx__sleep', arguments: { ms: 20_000 } }, CallToolResultSchema, { signal: ac.signal })
      .finally(() => {
        hungSettled = true;
      });
    hung.catch(() => {});
    await eventually(async () => (await stats()).calls > before.calls, 'the sleep call reached the fixture');
    // Another server, and the same server, both answer while the hung call is still pending.
    const [echo, sum, sameServer] = await Promise.all([
      client.callTool({ name: 'good__echo', arguments: { message: 'not blocked' } }),
      client.callTool({ name: 'good__get-sum', arguments: { a: 20, b: 22 } }),
      stats(),
    ]);
    expect(textOf(echo)).toContain('not blocked');
    expect(textOf(sum)).toContain('42');
    expect(sameServer.calls).toBe(before.calls + 1);
    expect(hungSettled).toBe(false);
    ac.abort('done');
    await expect(hung).rejects.toThrow();
    // The hung call is cancelled upstream, so nothing is left in flight for shutdown to drain.
    await eventually(
      async () => (await stats()).cancelled === before.cancelled + 1,
      'the fixture saw notifications/cancelled',
    );
  });
});

describe('F2: when every upstream fails', () => {
  let gw: TestGateway;
  let client: Client;

  beforeAll(async () => {
    const nothing = await freePort();
    gw = await startTestGateway({
      mcpServers: {
        missing: { command: 'manifold-no-such-command-xyz' },
        nothing: { type: 'streamable-http', url: `http://127.0.0.1:${nothing}/mcp` },
      },
      // Loopback upstreams need an explicit egress entry (SECURITY D1/D3), so that they fail for
      // their own reasons rather than being refused.
      gateway: { listTimeoutMs: 1500, connectTimeoutMs: 3000, allowedHosts: ['127.0.0.1'] },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
  });

  it('F2: tools/list is a JSON-RPC error that names every failed server, not an empty list', async () => {
    const outcome = await client.listTools().then(
      (r) => ({ ok: true as const, tools: r.tools }),
      (e: unknown) => ({ ok: false as const, e }),
    );
    expect(outcome.ok, 'tools/list must not succeed with an empty list').toBe(false);
    if (outcome.ok) return;
    expect(outcome.e).toBeInstanceOf(McpError);
    const err = outcome.e as McpError;
    expect(err.message).toMatch(/\bmissing\b/);
    expect(err.message).toMatch(/\bnothing\b/);
    expect(err.message).toMatch(/ENOENT|could not start/);
    const h = await health(gw);
    expect(h.status).toBe('down');
  });

  it('F2: tools/call to any name is still an ordinary unknown-tool error', async () => {
    await expect(client.callTool({ name: 'missing__anything', arguments: {} })).rejects.toThrow(
      /Unknown tool: missing__anything/,
    );
  });
});

describe('F4: a crash-looping stdio upstream', () => {
  let gw: TestGateway;
  let client: Client;

  beforeAll(async () => {
    gw = await startTestGateway({
      mcpServers: {
        good: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        crashy: { command: process.execPath, args: [FIXTURE], env: { FIXTURE_MODE: 'crash' } },
        fx: { command: process.execPath, args: [FIXTURE] },
      },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
  });

  it('F4: is restarted with growing backoff and reported failed after 5 failures; siblings stay ready', async () => {
    let last: UpstreamHealth | undefined;
    let siblings: UpstreamHealth[] = [];
    await eventually(
      async () => {
        const h = await health(gw);
        last = upstream(h, 'crashy');
        siblings = [upstream(h, 'good'), upstream(h, 'fx')];
        return last.state === 'failed';
      },
      'crashy reported failed',
      20_000,
    );
    expect(last!.consecutiveFailures).toBeGreaterThanOrEqual(5);
    expect(last!.lastError).toBeTruthy();
    for (const s of siblings) expect(s.state, s.name).toBe('ready');

    // Each restart is a new child process.
    const spawned = gw.logs.filter((l) => l.event === 'upstream.spawned' && l.server === 'crashy');
    expect(spawned.length).toBeGreaterThanOrEqual(5);
    expect(new Set(spawned.map((l) => l.pid)).size).toBe(spawned.length);

    // The streak is not reset by the short-lived connections (<30 s), and the delay grows to the cap.
    const events = unavailable(gw.logs, 'crashy');
    expect(events.slice(0, 5).map((e) => e.failures)).toEqual([1, 2, 3, 4, 5]);
    expect(events.slice(0, 5).map((e) => e.state)).toEqual([
      'backoff',
      'backoff',
      'backoff',
      'backoff',
      'failed',
    ]);
    const delays = events.slice(0, 5).map((e) => e.retryInMs as number);
    // base 200 ms, cap 1000 ms, ±10% jitter: 200, 400, 800, 1000, 1000.
    const nominal = [200, 400, 800, 1000, 1000];
    delays.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(nominal[i]! * 0.9 - 1);
      expect(d).toBeLessThanOrEqual(nominal[i]! * 1.1 + 1);
    });

    // The siblings were never disturbed and still answer.
    for (const s of ['good', 'fx']) expect(unavailable(gw.logs, s), s).toEqual([]);
    const res = await client.callTool({ name: 'good__echo', arguments: { message: 'unaffected' } });
    expect(textOf(res)).toContain('unaffected');
  });
});
