import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AnyHandle,
  connectLegacy,
  connectModern,
  DRIFT,
  startHttpTap,
  startReferenceHttp,
} from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { eventually, type Spawned, startEverythingHttp, stopChild } from '../helpers/harness.js';
import { modernRequest } from '../helpers/modern.js';
import { type RunningWorker, startWorker } from '../helpers/workerd.js';
import { QUARANTINED } from '../shared/scenarios.js';

/**
 * The Workers layout of #15 in real workerd (Miniflare): isolates serve modern requests to modern
 * upstreams with no Durable Object in the path; one object per upstream holds its baseline,
 * verification, legacy session and re-trust; one object per tenant holds legacy sessions.
 * Objects count the requests they receive (in memory), read through Miniflare's namespaces.
 */

const ISS = 'https://issuer.example';
const AUD = 'manifold-layout';
const KEY_OBJECT = 'manifold:deployment-key';

type ToolDef = { name: string; description: string; inputSchema: Record<string, unknown> };
const tool = (name: string, description: string): ToolDef => ({
  name,
  description,
  inputSchema: { type: 'object' },
});
const textOf = (result: unknown) =>
  ((result as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('\n');

describe('workers layout (#15): isolates and owner-sharded objects', () => {
  let dir: string;
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let everything: Spawned;
  let jwks: { keys: Record<string, unknown>[] };
  let user: string;
  let admin: string;
  /** Another tenant (the tenant is the `sub` claim by default), with no legacy session anywhere. */
  let bob: string;
  const workers: RunningWorker[] = [];
  const clients: { close(): Promise<void> }[] = [];
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-layout-'));
    ref = await startReferenceHttp();
    everything = await startEverythingHttp('streamableHttp');
    const issuer = await testIssuer(ISS, AUD, { kid: 'k1' });
    jwks = issuer.jwks;
    const mint = (scope: string, sub = 'alice') => issuer.mint({ scope }, sub);
    user = await mint('tools:* prompts:* resources:*');
    admin = await mint('tools:* manifold:admin');
    bob = await mint('tools:*', 'bob');
  });

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    for (const w of workers) await w.stop().catch(() => {});
    for (const c of children) await stopChild(c);
    await ref?.stop();
    await everything?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function boot(
    servers: Record<string, unknown>,
    hosts: string[],
    vars: Record<string, string> = {},
    gateway: Record<string, unknown> = {},
  ): Promise<RunningWorker> {
    const worker = await startWorker({
      config: {
        mcpServers: servers,
        gateway: {
          allowedHosts: hosts,
          auth: { issuer: ISS, audience: AUD, jwksFile: 'MANIFOLD_JWKS' },
          logLevel: 'error',
          ...gateway,
        },
      },
      vars: { MANIFOLD_JWKS: JSON.stringify(jwks), ...vars },
    });
    workers.push(worker);
    return worker;
  }
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const hostOf = (url: string) => new URL(url).host;
  /** Every object this deployment could have touched, by binding and name: its request count. */
  const touched = async (w: RunningWorker, upstreams: string[]) => {
    const counts: Record<string, number> = {};
    for (const name of upstreams) counts[`UPSTREAMS:${name}`] = await w.objectRequests('UPSTREAMS', name);
    for (const name of ['tenant:alice', KEY_OBJECT])
      counts[`TENANTS:${name}`] = await w.objectRequests('TENANTS', name);
    counts['MANIFOLD:gateway'] = await w.objectRequests('MANIFOLD', 'gateway');
    return counts;
  };
  const track = <T extends AnyHandle>(c: T): T => {
    clients.push(c);
    return c;
  };

  it('a modern client lists and calls a modern upstream in the isolate: once the snapshot is warm, no Durable Object receives a request', async () => {
    // A long snapshot ttl, so that no refresh falls inside the measured round.
    const w = await boot(
      { ref: { url: ref.url } },
      [hostOf(ref.url)],
      { MANIFOLD_SNAPSHOT_TTL_MS: '600000' },
      { maxBodyBytes: 100_000 },
    );
    const warm = await modernRequest(w.url, 'tools/list', {}, { headers: bearer(user) });
    expect(warm.status).toBe(200);
    const before = await touched(w, ['ref']);
    // The isolate read ref's snapshot from ref's object, and the deployment key once.
    expect(before['UPSTREAMS:ref']).toBeGreaterThan(0);
    expect(before[`TENANTS:${KEY_OBJECT}`]).toBeGreaterThan(0);
    // Concurrent clients: each request's upstream I/O is its own (workerd forbids sharing it).
    const rounds = await Promise.all(
      [1, 2, 3, 4].map(async (i) => {
        const c = track(await connectModern(w.url, user, { name: `layout-${i}` }));
        const names = (await c.client.listTools()).tools.map((t) => t.name);
        const call = await c.client.callTool({ name: 'ref__test_simple_text', arguments: {} });
        const again = await c.client.callTool({ name: 'ref__test_simple_text', arguments: {} });
        return { names, texts: [textOf(call), textOf(again)] };
      }),
    );
    for (const r of rounds) {
      expect(r.names).toContain('ref__test_simple_text');
      for (const t of r.texts) expect(t).toContain('simple text');
    }
    // A body over the cap is refused in the isolate (B2).
    const big = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'ping',
      params: { pad: 'x'.repeat(200_000) },
    });
    const tooLarge = await fetch(w.url, {
      method: 'POST',
      headers: {
        ...bearer(user),
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: big,
    });
    expect(tooLarge.status).toBe(413);
    expect(await touched(w, ['ref'])).toEqual(before);
    // The objects' own routes are not reachable from outside.
    const base = w.url.replace(/\/mcp$/, '');
    for (const path of ['/__manifold/snapshot', '/__manifold/requests', '/__manifold/key']) {
      expect((await fetch(`${base}${path}`, { headers: { 'x-manifold-server': 'ref' } })).status).toBe(404);
    }
  });

  it("snapshots refreshed while concurrent calls run: every call is answered (no request waits on another request's I/O)", async () => {
    const w = await boot({ ref: { url: ref.url } }, [hostOf(ref.url)], { MANIFOLD_SNAPSHOT_TTL_MS: '1000' });
    const c = track(await connectModern(w.url, user));
    const before = await w.objectRequests('UPSTREAMS', 'ref');
    // Calls until ref's object has been asked for a new snapshot at least twice, from 8 clients.
    const handles = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map(() => connectModern(w.url, user)));
    for (const h of handles) track(h);
    let refreshed = false;
    const texts: string[] = [];
    await Promise.all([
      ...handles.map(async (h) => {
        while (!refreshed) {
          const r = await h.client.callTool({ name: 'ref__test_simple_text', arguments: {} });
          texts.push(textOf(r));
        }
      }),
      (async () => {
        await eventually(
          async () => (await w.objectRequests('UPSTREAMS', 'ref')) >= before + 2,
          'two snapshot refreshes during the calls',
        );
        refreshed = true;
      })(),
    ]);
    expect(texts.length).toBeGreaterThan(0);
    for (const t of texts) expect(t).toContain('simple text');
    expect((await c.client.listTools()).tools.map((t) => t.name)).toContain('ref__test_simple_text');
  });

  it('a cold isolate: concurrent first requests are all served (one boot, no request left waiting)', async () => {
    const w = await boot({ ref: { url: ref.url } }, [hostOf(ref.url)]);
    const answers = await Promise.all(
      [1, 2, 3, 4, 5, 6].map(() => modernRequest(w.url, 'tools/list', {}, { headers: bearer(user) })),
    );
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(((a.body.result?.tools ?? []) as { name: string }[]).map((t) => t.name)).toContain(
        'ref__test_simple_text',
      );
    }
    // The deployment key was read once by the isolate's one boot, and once by ref's object.
    expect(await w.objectRequests('TENANTS', KEY_OBJECT)).toBe(2);
  });

  it('two upstreams live in two objects: each object holds and publishes only its own server', async () => {
    const w = await boot({ ref: { url: ref.url }, everything: { url: everything.url } }, [
      hostOf(ref.url),
      `127.0.0.1:${everything.port}`,
    ]);
    const listed = await modernRequest(w.url, 'tools/list', {}, { headers: bearer(user) });
    const names = ((listed.body.result?.tools ?? []) as { name: string }[]).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['ref__test_simple_text', 'everything__echo']));
    for (const [server, own, other] of [
      ['ref', 'test_simple_text', 'echo'],
      ['everything', 'echo', 'test_simple_text'],
    ] as const) {
      const headers = { 'x-manifold-server': server };
      const snap = (await (
        await w.objectFetch('UPSTREAMS', server, '/__manifold/snapshot', headers)
      ).json()) as {
        server: string;
        state: string;
        listing: { tools: { name: string }[] };
        verified: { trusted: { name: string }[] };
      };
      expect(snap.server).toBe(server);
      expect(snap.state).toBe('ready');
      expect(snap.listing.tools.map((t) => t.name)).toContain(own);
      expect(snap.listing.tools.map((t) => t.name)).not.toContain(other);
      expect(snap.verified.trusted.map((t) => t.name)).toContain(own);
      // The object's gateway (and so its store) has this one server only.
      const health = (await (
        await w.objectFetch('UPSTREAMS', server, '/healthz', { ...headers, ...bearer(admin) })
      ).json()) as { upstreams: { name: string }[] };
      expect(health.upstreams.map((u) => u.name)).toEqual([server]);
    }
  });

  it('legacy paths: a v1 client through its tenant object; a modern client to a legacy upstream through its object; an MRTR round completes', async () => {
    const all = { sampling: true, elicitation: true, roots: true };
    const w = await boot({ everything: { url: everything.url, clientFeatures: all } }, [
      `127.0.0.1:${everything.port}`,
    ]);
    // A legacy client: initialize, then its session, in the tenant's object.
    const tenantBefore = await w.objectRequests('TENANTS', 'tenant:alice');
    const legacy = track(await connectLegacy(w.url, user));
    expect((await legacy.client.listTools()).tools.map((t) => t.name)).toContain('everything__echo');
    const echoed = await legacy.client.callTool({ name: 'everything__echo', arguments: { message: 'v1' } });
    expect(textOf(echoed)).toBe('Echo: v1');
    expect(await w.objectRequests('TENANTS', 'tenant:alice')).toBeGreaterThan(tenantBefore);

    // A modern client's call to the legacy upstream: forwarded to everything's object, and its
    // tenant's object is never asked (bob's: alice's legacy client may still be opening its GET).
    const modern = track(await connectModern(w.url, bob));
    const upstreamNow = await w.objectRequests('UPSTREAMS', 'everything');
    const call = await modern.client.callTool({ name: 'everything__echo', arguments: { message: 'v2' } });
    expect(textOf(call)).toBe('Echo: v2');
    expect(await w.objectRequests('UPSTREAMS', 'everything')).toBeGreaterThan(upstreamNow);

    // MRTR: the legacy upstream asks for elicitation mid-call; the modern client answers on its
    // retry, which reaches the object holding the call.
    const asked: unknown[] = [];
    const client = new ModernClient(
      { name: 'layout-mrtr', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    client.setRequestHandler('elicitation/create', async (r) => {
      asked.push(r.params);
      return { action: 'accept' as const, content: { name: 'Ada on Workers' } };
    });
    await client.connect(new ModernTransport(new URL(w.url), { requestInit: { headers: bearer(bob) } }));
    clients.push(client);
    const answered = await client.callTool({
      name: 'everything__trigger-elicitation-request',
      arguments: {},
    });
    expect(asked).toHaveLength(1);
    expect(textOf(answered)).toContain('Ada on Workers');
    expect(await w.objectRequests('TENANTS', 'tenant:bob')).toBe(0);
  });

  it('a legacy client calling across snapshot refreshes: its tenant object keeps one legacy session to the upstream', async () => {
    const tap = await startHttpTap(everything.port);
    try {
      const w = await boot(
        { everything: { url: `http://127.0.0.1:${tap.port}/mcp` } },
        [`127.0.0.1:${tap.port}`],
        {
          MANIFOLD_SNAPSHOT_TTL_MS: '1000',
        },
      );
      const legacy = track(await connectLegacy(w.url, user));
      const before = await w.objectRequests('UPSTREAMS', 'everything');
      // Calls until the snapshot has been read again at least 4 times (by the isolate and by the
      // tenant object, which both see each call), then one more call on the fresh snapshot.
      let n = 0;
      const call = async () => {
        const r = await legacy.client.callTool({
          name: 'everything__echo',
          arguments: { message: `m${++n}` },
        });
        expect(textOf(r)).toBe(`Echo: m${n}`);
      };
      while ((await w.objectRequests('UPSTREAMS', 'everything')) < before + 4) await call();
      await call();
      const initializes = tap.exchanges.filter((e) => e.body?.method === 'initialize');
      // One session for everything's object (it lists and verifies), one for the tenant's calls.
      expect(initializes).toHaveLength(2);
    } finally {
      await tap.stop();
    }
  });

  it('MRTR with a modern upstream: the question is relayed from the isolate, the retry reaches the upstream object', async () => {
    const all = { sampling: true, elicitation: true, roots: true };
    const w = await boot({ ref: { url: ref.url, clientFeatures: all } }, [hostOf(ref.url)], {
      MANIFOLD_SNAPSHOT_TTL_MS: '600000',
    });
    const client = new ModernClient(
      { name: 'layout-mrtr-modern', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    client.setRequestHandler('elicitation/create', async () => ({
      action: 'accept' as const,
      content: { name: 'Ada on Workers' },
    }));
    await client.connect(new ModernTransport(new URL(w.url), { requestInit: { headers: bearer(bob) } }));
    clients.push(client);
    await client.listTools();
    const before = await w.objectRequests('UPSTREAMS', 'ref');
    const answered = await client.callTool({
      name: 'ref__test_input_required_result_elicitation',
      arguments: {},
    });
    expect(textOf(answered)).toContain('Hello, Ada on Workers!');
    // Only the retry (it carries requestState) went to ref's object.
    expect(await w.objectRequests('UPSTREAMS', 'ref')).toBe(before + 1);
  });

  it('drift and re-trust: the object quarantines, the isolate and a legacy session see it; an admin re-trust rewrites the baseline in the object and the isolate serves the new tool', async () => {
    const toolsFile = join(dir, 'drift-tools.json');
    writeFileSync(toolsFile, JSON.stringify([tool('alpha', 'Alpha v1.'), tool('beta', 'Beta v1.')]));
    const child = spawn(process.execPath, [DRIFT, '--http'], {
      env: { ...process.env, DRIFT_TOOLS_FILE: toolsFile },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    const port = await new Promise<number>((res, rej) => {
      child.once('exit', (code) => rej(new Error(`drift server exited with ${code}`)));
      child.stdout?.once('data', (d) => res(Number(String(d).trim())));
    });
    child.stdout?.resume();
    const w = await boot(
      { d: { url: `http://127.0.0.1:${port}/mcp` } },
      [`127.0.0.1:${port}`],
      { MANIFOLD_SNAPSHOT_TTL_MS: '1000' },
      { drift: { recheckSeconds: 1 } },
    );
    const tools = async () => {
      const r = await modernRequest(w.url, 'tools/list', {}, { headers: bearer(user) });
      return (r.body.result?.tools ?? []) as { name: string; description?: string }[];
    };
    const alpha = async () => (await tools()).find((t) => t.name === 'd__alpha')?.description;
    expect(await alpha()).toBe('Alpha v1.');
    // A legacy client's session (and its GET stream) in the tenant object hears of the change too.
    const legacy = track(await connectLegacy(w.url, user));
    expect((await legacy.client.listTools()).tools.map((t) => t.name)).toEqual(['d__alpha', 'd__beta']);

    writeFileSync(
      toolsFile,
      JSON.stringify([tool('alpha', 'Alpha v2: also reads mail.'), tool('beta', 'Beta v1.')]),
    );
    await eventually(async () => (await alpha()) === QUARANTINED, 'the isolate to serve the quarantine');
    const refused = await modernRequest(
      w.url,
      'tools/call',
      { name: 'd__alpha', arguments: {} },
      { headers: bearer(user) },
    );
    expect(textOf(refused.body.result)).toMatch(/^Quarantined: .*re-trust server d/);
    await eventually(() => legacy.listChanged.count > 0, 'tools/list_changed on the legacy session');
    const seen = (await legacy.client.listTools()).tools.find((t) => t.name === 'd__alpha');
    expect(seen?.description).toBe(QUARANTINED);

    const base = `${w.url.replace(/\/mcp$/, '')}/admin/servers/d`;
    // Without the admin grant: refused by the isolate, without a request to d's object. The
    // isolate's own snapshot refreshes (a 1 s TTL here) may reach it meanwhile: not counted.
    const requestsToD = async () => {
      const { '/__manifold/snapshot': _refreshes, ...rest } = await w.objectPaths('UPSTREAMS', 'd');
      return rest;
    };
    const objectBefore = await requestsToD();
    expect((await fetch(`${base}/drift`, { headers: bearer(user) })).status).toBe(403);
    expect((await fetch(`${base}/drift`)).status).toBe(401);
    expect(await requestsToD()).toEqual(objectBefore);
    const shown = await fetch(`${base}/drift`, { headers: bearer(admin) });
    expect(shown.status).toBe(200);
    const review = (await shown.json()) as { changes: number; lines: string[]; digest: string };
    expect(review.changes).toBe(1);
    expect(review.lines.join('\n')).toContain('+ Alpha v2: also reads mail.');
    const accepted = await fetch(`${base}/retrust`, {
      method: 'POST',
      headers: { ...bearer(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ digest: review.digest }),
    });
    expect(accepted.status).toBe(200);
    expect(await accepted.json()).toEqual({ retrusted: 'd', changes: 1 });
    // #52: the drift history, kept in d's object beside its baseline.
    const history = await fetch(`${base}/drift/history?tool=alpha`, { headers: bearer(admin) });
    expect(history.status).toBe(200);
    expect(((await history.json()) as { history: unknown[] }).history).toEqual([
      expect.objectContaining({ kind: 'accepted', by: 'alice', digest: review.digest }),
      expect.objectContaining({ kind: 'quarantined' }),
    ]);
    // Every isolate reads the object's snapshot again within its ttl: poll, no sleep.
    await eventually(
      async () => (await alpha()) === 'Alpha v2: also reads mail.',
      'the re-trusted definition served by the isolate',
    );
    const ran = await modernRequest(
      w.url,
      'tools/call',
      { name: 'd__alpha', arguments: {} },
      { headers: bearer(user) },
    );
    expect(textOf(ran.body.result)).toBe('called alpha');
  });

  it("rate limits: a tenant's calls in the isolate, in its tenant object (legacy client) and in an upstream object (legacy upstream) are counted in one place, the tenant's object", async () => {
    const LIMIT = 5;
    const w = await boot(
      { ref: { url: ref.url }, everything: { url: everything.url } },
      [hostOf(ref.url), `127.0.0.1:${everything.port}`],
      {},
      { callsPerMinute: LIMIT },
    );
    // The count is per fixed one-minute window: start well inside one, so the round stays in it.
    while (Date.now() % 60_000 > 45_000) await new Promise((r) => setTimeout(r, 500));
    const window = Math.floor(Date.now() / 60_000);
    const modern = track(await connectModern(w.url, user, { name: 'limit-modern' }));
    const legacy = track(await connectLegacy(w.url, user));
    const outcomes: string[] = [];
    const attempt = async (c: AnyHandle, name: string, args: Record<string, unknown>) => {
      try {
        await c.client.callTool({ name, arguments: args });
        outcomes.push('ok');
      } catch (e) {
        outcomes.push(String((e as Error).message));
      }
    };
    for (let i = 0; i < 4; i++) {
      // Served in the isolate, in alice's tenant object, and in everything's upstream object.
      await attempt(modern, 'ref__test_simple_text', {});
      await attempt(legacy, 'ref__test_simple_text', {});
      await attempt(modern, 'everything__echo', { message: `m${i}` });
    }
    expect(Math.floor(Date.now() / 60_000)).toBe(window);
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(LIMIT);
    for (const refused of outcomes.filter((o) => o !== 'ok')) expect(refused).toMatch(/rate limit/i);
    // Another tenant has a budget of its own.
    const other = track(await connectModern(w.url, bob, { name: 'limit-bob' }));
    await expect(
      other.client.callTool({ name: 'ref__test_simple_text', arguments: {} }),
    ).resolves.toBeDefined();
    expect(await w.objectRequests('TENANTS', 'tenant:bob')).toBeGreaterThan(0);
  });

  it('MANIFOLD_ROUTE=object: every request goes to the one object, which serves the call', async () => {
    const w = await boot({ ref: { url: ref.url } }, [hostOf(ref.url)], { MANIFOLD_ROUTE: 'object' });
    const c = track(await connectModern(w.url, user));
    const call = await c.client.callTool({ name: 'ref__test_simple_text', arguments: {} });
    expect(textOf(call)).toContain('simple text');
    expect(await w.objectRequests('MANIFOLD', 'gateway')).toBeGreaterThan(0);
    expect(await w.objectRequests('UPSTREAMS', 'ref')).toBe(0);
  });
});
