import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern, DRIFT } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { EVERYTHING, eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { parsePromText, type Scrape } from '../helpers/prom-text.js';

const ISS = 'https://issuer.example';
const AUD = 'manifold-metrics';
const tool = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
});
const V1 = [tool('alpha', 'Alpha v1.'), tool('beta', 'Beta v1.')];

/** The pid of this process's child running the drift fixture with `marker` among its arguments. */
function childWith(marker: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (ppid === process.pid && args.includes(DRIFT) && args.includes(marker)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

describe('GET /metrics: Prometheus text, scraped and parsed', () => {
  let gw: TestGateway;
  let dir: string;
  let toolsFile: string;
  const tokens = { admin: '', acme: '', limited: '' };
  const clients: AnyHandle[] = [];

  const scrapeRaw = (token?: string, headers: Record<string, string> = {}) =>
    fetch(new URL('/metrics', gw.url), {
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    });
  const scrape = async (): Promise<Scrape> => {
    const res = await scrapeRaw(tokens.admin);
    expect(res.status).toBe(200);
    return parsePromText(await res.text());
  };
  /** A call's outcome: its result's isError, or what the client threw (a JSON-RPC error). */
  const call = async (
    h: AnyHandle,
    name: string,
    args: Record<string, unknown> = {},
  ): Promise<{ isError?: boolean; thrown?: unknown }> => {
    try {
      const r =
        h.era === 'legacy'
          ? await h.client.callTool({ name, arguments: args })
          : await h.client.callTool({ name, arguments: args });
      return { isError: r.isError === true };
    } catch (e) {
      return { thrown: e };
    }
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-metrics-'));
    toolsFile = join(dir, 'tools.json');
    writeFileSync(toolsFile, JSON.stringify(V1));
    const issuer = await testIssuer(ISS, AUD);
    gw = await startTestGateway({
      mcpServers: {
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        fx: {
          command: process.execPath,
          args: [DRIFT, '--label=metrics-fx'],
          env: { DRIFT_TOOLS_FILE: toolsFile },
        },
      },
      gateway: {
        drift: { recheckSeconds: 0 },
        auth: {
          ...issuer.auth,
          tenantClaim: 'tid',
          tenants: { limited: { callsPerMinute: 1 } },
        },
      },
    });
    tokens.admin = await issuer.mint({ tid: 'ops', scope: 'manifold:admin tools:*' }, 'ops');
    tokens.acme = await issuer.mint({ tid: 'acme', scope: 'tools:*' }, 'alice');
    tokens.limited = await issuer.mint({ tid: 'limited', scope: 'tools:*' }, 'lim');
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('auth on: no token 401, a tenant token 403, an admin token 200 in the text format; foreign Origin or Host refused', async () => {
    const none = await scrapeRaw();
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toContain('Bearer resource_metadata=');
    expect((await scrapeRaw('not.a.token')).status).toBe(401);
    const tenant = await scrapeRaw(tokens.acme);
    expect(tenant.status).toBe(403);
    expect(await tenant.text()).not.toContain('manifold_requests_total');
    const admin = await scrapeRaw(tokens.admin);
    expect(admin.status).toBe(200);
    expect(admin.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    parsePromText(await admin.text());
    // The /healthz guard: a DNS-rebinding page (foreign Origin, or a Host the gateway does not serve).
    expect((await scrapeRaw(tokens.admin, { origin: 'https://evil.example' })).status).toBe(403);
    const url = new URL('/metrics', gw.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        url,
        { headers: { host: 'evil.example', authorization: `Bearer ${tokens.admin}` } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(403);
  });

  it('counts calls of a legacy and a modern client by server, tool and verdict, with latency, bytes and rate-limit refusals', async () => {
    const legacy = await connectLegacy(gw.url, tokens.acme);
    const modern = await connectModern(gw.url, tokens.acme, { listen: true });
    const limited = await connectModern(gw.url, tokens.limited);
    clients.push(legacy, modern, limited);
    expect(await call(legacy, 'everything__echo', { message: 'one' })).toEqual({ isError: false });
    expect(await call(legacy, 'everything__echo', { message: 'two' })).toEqual({ isError: false });
    expect(await call(modern, 'everything__echo', { message: 'three' })).toEqual({ isError: false });
    expect(await call(legacy, 'everything__no_such_tool')).toHaveProperty('thrown');
    expect(await call(modern, 'secret_tool_of_nobody')).toHaveProperty('thrown');
    expect(await call(limited, 'everything__echo', { message: 'four' })).toEqual({ isError: false });
    expect(await call(limited, 'everything__echo', { message: 'five' })).toHaveProperty('thrown');

    const m = await scrape();
    const echo = { method: 'tools/call', server: 'everything', tool: 'everything__echo' };
    expect(m.value('manifold_requests_total', { ...echo, verdict: 'allowed' })).toBe(4);
    expect(m.value('manifold_requests_total', { ...echo, verdict: 'denied' })).toBe(1);
    // Unknown names are never a label value.
    expect(
      m.value('manifold_requests_total', {
        method: 'tools/call',
        server: '',
        tool: 'other',
        verdict: 'denied',
      }),
    ).toBe(2);
    const names = new Set(gw.gateway.catalog.entries.map((e) => e.name));
    for (const s of m.find('manifold_requests_total')) {
      expect(names.has(s.labels.tool!) || s.labels.tool === 'other', s.labels.tool).toBe(true);
    }
    expect(m.value('manifold_rate_limited_total', { tenant: 'limited' })).toBe(1);
    expect(m.find('manifold_rate_limited_total')).toHaveLength(1);

    const latency = { method: 'tools/call', server: 'everything', verdict: 'allowed' };
    expect(m.value('manifold_request_duration_seconds_count', latency)).toBe(4);
    expect(m.value('manifold_request_duration_seconds_bucket', { ...latency, le: '+Inf' })).toBe(4);
    expect(m.value('manifold_request_duration_seconds_bucket', { ...latency, le: '60' })).toBe(4);
    expect(m.value('manifold_request_duration_seconds_sum', latency)).toBeGreaterThanOrEqual(0);

    // Bytes moved: exactly what the audit lines say, and something was moved both ways.
    const audits = gw.logs.filter((l) => l.event === 'audit.tools_call');
    expect(audits).toHaveLength(7);
    const total = (k: 'bytesIn' | 'bytesOut') => audits.reduce((a, l) => a + (l[k] as number), 0);
    expect(m.sum('manifold_request_bytes_in_total', { method: 'tools/call' })).toBe(total('bytesIn'));
    expect(m.sum('manifold_request_bytes_out_total', { method: 'tools/call' })).toBe(total('bytesOut'));
    expect(m.value('manifold_request_bytes_out_total', { ...echo, verdict: 'allowed' })).toBeGreaterThan(
      4 * 20,
    );
    expect(m.value('manifold_request_bytes_in_total', { ...echo, verdict: 'allowed' })).toBeGreaterThan(
      4 * 20,
    );

    // The edge's tables: one legacy session, one listen stream.
    expect(m.value('manifold_sessions')).toBe(1);
    expect(m.value('manifold_listen_streams')).toBe(1);
    expect(m.value('manifold_catalog_tools')).toBe(gw.gateway.catalog.entries.length);
    expect(m.value('manifold_calls_in_flight')).toBe(0);
    expect(m.families.get('manifold_process_cpu_seconds_total')?.type).toBe('counter');
  });

  it('drift: a changed tool and a new one are counted as events and shown as quarantined and withheld', async () => {
    const before = await scrape();
    expect(before.value('manifold_drift_quarantined', { server: 'fx' })).toBe(0);
    expect(before.find('manifold_drift_events_total', { server: 'fx' })).toEqual([]);
    writeFileSync(
      toolsFile,
      JSON.stringify([tool('alpha', 'Alpha v2: now also sends mail.'), V1[1], tool('gamma', 'New.')]),
    );
    await eventually(
      () => gw.logs.some((l) => l.event === 'drift.quarantined' && l.tool === 'alpha'),
      'alpha quarantined',
    );
    await eventually(
      () => gw.gateway.health().upstreams.some((u) => u.drift?.withheld.includes('gamma')),
      'gamma withheld',
    );
    const legacy = clients.find((c) => c.era === 'legacy')!;
    expect(await call(legacy, 'fx__alpha', { q: 'x' })).toEqual({ isError: true });
    const m = await scrape();
    expect(m.value('manifold_drift_events_total', { server: 'fx', kind: 'quarantined' })).toBe(1);
    expect(m.value('manifold_drift_events_total', { server: 'fx', kind: 'withheld' })).toBe(1);
    expect(m.value('manifold_drift_quarantined', { server: 'fx' })).toBe(1);
    expect(m.value('manifold_drift_withheld', { server: 'fx' })).toBe(1);
    expect(m.value('manifold_drift_identity_changed', { server: 'fx' })).toBe(0);
    expect(m.value('manifold_drift_quarantined', { server: 'everything' })).toBe(0);
    expect(
      m.value('manifold_requests_total', {
        method: 'tools/call',
        server: 'fx',
        tool: 'fx__alpha',
        verdict: 'quarantined',
      }),
    ).toBe(1);
  });

  it('upstream gauges follow an upstream that goes down and comes back; reconnects are counted', async () => {
    const up = await scrape();
    expect(up.value('manifold_upstream_up', { server: 'fx' })).toBe(1);
    expect(up.value('manifold_upstream_state', { server: 'fx', state: 'ready' })).toBe(1);
    expect(up.value('manifold_upstream_state', { server: 'fx', state: 'backoff' })).toBe(0);
    expect(up.value('manifold_upstream_reconnects_total', { server: 'fx' })).toBe(0);
    expect(up.value('manifold_upstream_tools', { server: 'fx' })).toBe(3);
    const info = up.find('manifold_upstream_info', { server: 'fx', transport: 'stdio' });
    expect(info).toHaveLength(1);
    expect(['legacy', 'modern']).toContain(info[0]!.labels.era);

    // Down: its listing now fails, and its process is gone; every retry fails until the file is back.
    writeFileSync(toolsFile, 'not json');
    const pid = childWith('--label=metrics-fx');
    expect(pid).toBeDefined();
    process.kill(pid!, 'SIGKILL');
    let down: Scrape | undefined;
    await eventually(async () => {
      down = await scrape();
      return (
        (down.value('manifold_upstream_reconnects_total', { server: 'fx' }) ?? 0) >= 1 &&
        down.value('manifold_upstream_up', { server: 'fx' }) === 0
      );
    }, 'fx down after a reconnect attempt');
    expect(down!.value('manifold_upstream_up', { server: 'everything' })).toBe(1);
    expect(down!.value('manifold_upstream_state', { server: 'fx', state: 'ready' })).toBe(0);
    expect(down!.value('manifold_upstream_consecutive_failures', { server: 'fx' })).toBeGreaterThanOrEqual(1);
    expect(down!.value('manifold_upstream_tools', { server: 'fx' })).toBe(0);

    writeFileSync(toolsFile, JSON.stringify(V1));
    let back: Scrape | undefined;
    await eventually(async () => {
      back = await scrape();
      return back.value('manifold_upstream_up', { server: 'fx' }) === 1;
    }, 'fx back');
    expect(back!.value('manifold_upstream_reconnects_total', { server: 'fx' })).toBeGreaterThanOrEqual(
      down!.value('manifold_upstream_reconnects_total', { server: 'fx' })!,
    );
    expect(back!.value('manifold_upstream_state', { server: 'fx', state: 'ready' })).toBe(1);
    expect(back!.value('manifold_upstream_tools', { server: 'fx' })).toBe(2);
  });
});

describe('gateway.metricsPath', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-metrics-path-'));
    writeFileSync(join(dir, 'tools.json'), JSON.stringify(V1));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const servers = () => ({
    fx: { command: process.execPath, args: [DRIFT], env: { DRIFT_TOOLS_FILE: join(dir, 'tools.json') } },
  });

  it('false: nothing is served and no request is observed', async () => {
    // The status page keeps a recent-call window of its own: off too, so no observer at all is left.
    const gw = await startTestGateway({
      mcpServers: servers(),
      gateway: { metricsPath: false, statusPath: false },
    });
    try {
      expect((await fetch(new URL('/metrics', gw.url))).status).toBe(404);
      expect(gw.gateway.observers.active).toBe(false);
    } finally {
      await gw.stop();
    }
  });

  it('another path is served there (no auth: no token needed), and /metrics is not', async () => {
    const gw = await startTestGateway({ mcpServers: servers(), gateway: { metricsPath: '/ops/metrics' } });
    try {
      expect((await fetch(new URL('/metrics', gw.url))).status).toBe(404);
      const res = await fetch(new URL('/ops/metrics', gw.url));
      expect(res.status).toBe(200);
      const m = parsePromText(await res.text());
      expect(m.value('manifold_upstream_up', { server: 'fx' })).toBe(1);
      expect(gw.gateway.observers.active).toBe(true);
    } finally {
      await gw.stop();
    }
  });
});
