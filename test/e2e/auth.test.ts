import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { everythingStdio, memoryStdio, type TestIssuer, testIssuer } from '../helpers/factories.js';
import { ROOT, startTestGateway, stopChild, type TestGateway } from '../helpers/harness.js';
import { modernRequest } from '../helpers/modern.js';

const ISS = 'https://issuer.example';
const AUD = 'manifold-test';
const COOKIE = 'sid=cookie-secret-value';
const ACCEPT = 'application/json, text/event-stream';

describe('per-tenant JWT grants, end to end', () => {
  let gw: TestGateway;
  let recorder: ReturnType<typeof spawn>;
  let issuer: TestIssuer;
  const tokens = { alice: '', bob: '', carol: '', admin: '', dave: '' };
  const clients: Client[] = [];
  const mint = (claims: Record<string, unknown>) => issuer.mint(claims);

  async function connect(token: string): Promise<Client> {
    const client = new Client({ name: 'tenant', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${token}`, cookie: COOKIE } },
      }),
    );
    clients.push(client);
    return client;
  }
  const names = async (c: Client) => {
    const all: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 50; page++) {
      const r = await c.listTools(cursor ? { cursor } : {});
      all.push(...r.tools.map((t) => t.name));
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    return all;
  };
  const post = (body: unknown, headers: Record<string, string> = {}, url = gw.url) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
      body: JSON.stringify(body),
    });
  const init = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };

  beforeAll(async () => {
    issuer = await testIssuer(ISS, AUD);
    recorder = spawn(process.execPath, [`${ROOT}/test/fixtures/header-recorder.mjs`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const port = await new Promise<number>((resolve) =>
      recorder.stdout?.once('data', (d) => resolve(Number(String(d).trim()))),
    );
    gw = await startTestGateway({
      mcpServers: {
        everything: everythingStdio(),
        memory: memoryStdio({
          env: { MEMORY_FILE_PATH: '/tmp/manifold-auth-memory.jsonl' },
          budgetTokens: 300,
        }),
        recorder: { url: `http://127.0.0.1:${port}/mcp` },
      },
      gateway: {
        allowedHosts: [`127.0.0.1:${port}`],
        pageSize: 4,
        auth: {
          ...issuer.auth,
          tenantClaim: 'tid',
          authorizationServers: [ISS],
          tenants: { acme: { grants: ['everything__*', 'recorder__*'] }, umbrella: { callsPerMinute: 3 } },
        },
      },
    });
    tokens.alice = await mint({
      sub: 'alice',
      tid: 'acme',
      scope: 'tools:everything__* tools:memory__read_graph tools:recorder__*',
    });
    tokens.bob = await mint({ sub: 'bob', tid: 'globex', scope: ['tools:memory__*'] });
    tokens.dave = await mint({ sub: 'dave', tid: 'umbrella', scope: 'tools:memory__*' });
    tokens.carol = await mint({ sub: 'carol', tid: 'initech' });
    tokens.admin = await mint({ sub: 'ops', tid: 'ops', scope: 'manifold:admin tools:*' });
  });
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await gw?.stop();
    if (recorder) await stopChild(recorder);
  });

  it('A1: no token is 401 pointing at the resource metadata; a bad one adds error="invalid_token"', async () => {
    const none = await post(init);
    expect(none.status).toBe(401);
    const origin = new URL(gw.url).origin;
    expect(none.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`,
    );
    for (const h of ['Bearer', 'Bearer not.a.jwt', `Basic ${btoa('a:b')}`, `Bearer ${tokens.alice}x`]) {
      const bad = await post(init, { authorization: h });
      expect(bad.status).toBe(401);
      expect(bad.headers.get('www-authenticate')).toContain('error="invalid_token"');
    }
  });

  it('A2: protected-resource metadata is served at the root and the path-specific form', async () => {
    const origin = new URL(gw.url).origin;
    for (const path of [
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/mcp',
    ]) {
      const r = await fetch(`${origin}${path}`);
      expect(r.status).toBe(200);
      const m = await r.json();
      expect(m.resource).toBe(gw.url);
      expect(m.authorization_servers).toEqual([ISS]);
      expect(m.bearer_methods_supported).toEqual(['header']);
      // The grammar only: anonymous callers learn no server names (#13.14).
      expect(m.scopes_supported).toEqual(['tools:*', 'prompts:*', 'resources:*', 'manifold:admin']);
    }
  });

  it('A3: a token in the query string is never accepted', async () => {
    const r = await post(init, {}, `${gw.url}?access_token=${tokens.alice}`);
    expect(r.status).toBe(401);
  });

  it('A4: a session id alone grants nothing, and another subject cannot use it', async () => {
    const r = await post(init, { authorization: `Bearer ${tokens.alice}` });
    const sid = r.headers.get('mcp-session-id')!;
    const ping = { jsonrpc: '2.0', id: 2, method: 'ping' };
    expect(
      (await post(ping, { authorization: `Bearer ${tokens.alice}`, 'mcp-session-id': sid })).status,
    ).toBe(200);
    expect((await post(ping, { 'mcp-session-id': sid })).status).toBe(401);
    expect((await post(ping, { authorization: `Bearer ${tokens.bob}`, 'mcp-session-id': sid })).status).toBe(
      404,
    );
  });

  it('A13/A14: each tenant sees only what its token grants, capped by its tenant', async () => {
    const alice = await names(await connect(tokens.alice));
    expect(alice).toContain('everything__echo');
    expect(alice).toContain('recorder__seen_headers');
    // The token grants memory__read_graph, but tenant acme's cap does not.
    expect(alice.some((n) => n.startsWith('memory__'))).toBe(false);
    const bobClient = await connect(tokens.bob);
    const bob = await names(bobClient);
    expect(bob).toContain('memory__read_graph');
    const graph = await bobClient.callTool({ name: 'memory__read_graph', arguments: {} });
    expect(graph.isError).toBeFalsy();
    expect(bob.some((n) => n.startsWith('everything__') || n.startsWith('recorder__'))).toBe(false);
    expect(await names(await connect(tokens.carol))).toEqual([]);
  });

  it('A13: an invisible tool fails exactly like an unknown one, in calls and in describe_tool', async () => {
    const alice = await connect(tokens.alice);
    const hidden = await alice
      .callTool({ name: 'memory__read_graph', arguments: {} })
      .catch((e: Error) => e.message);
    const unknown = await alice
      .callTool({ name: 'memory__nope', arguments: {} })
      .catch((e: Error) => e.message);
    expect(String(hidden).replace('memory__read_graph', 'X')).toBe(
      String(unknown).replace('memory__nope', 'X'),
    );
    // describe_tool is visible because alice sees something, but reveals only what she sees.
    expect(await names(alice)).toContain('manifold__describe_tool');
    const d = await alice.callTool({
      name: 'manifold__describe_tool',
      arguments: { name: 'memory__create_entities' },
    });
    expect(d.isError).toBe(true);
    expect(JSON.stringify(d.content)).toContain('Unknown tool: memory__create_entities');
    const bob = await connect(tokens.bob);
    const ok = await bob.callTool({
      name: 'manifold__describe_tool',
      arguments: { name: 'memory__create_entities' },
    });
    expect(ok.isError).toBeFalsy();
  });

  it("A14: a tenant cannot page through another tenant's list with its cursor", async () => {
    const bob = await connect(tokens.bob);
    const first = await bob.listTools();
    expect(first.nextCursor).toBeDefined();
    const alice = await connect(tokens.alice);
    await expect(alice.listTools({ cursor: first.nextCursor })).rejects.toThrow(/cursor/);
  });

  it('#18: two subjects with the same grants share a view, but each pages with cursors of its own (both eras)', async () => {
    // bob2 is bob's tenant and grants under another subject: the gateway lists both from one
    // view, yet a first page that ends in a cursor is sealed to its caller, never shared.
    const bob2Token = await mint({ sub: 'bob2', tid: 'globex', scope: ['tools:memory__*'] });
    const bob = await connect(tokens.bob);
    const bobFirst = await bob.listTools();
    expect(bobFirst.nextCursor).toBeDefined();
    type Page = { tools: { name: string }[]; nextCursor?: string };
    const list2 = async (cursor?: string): Promise<Page> => {
      const r = await modernRequest(gw.url, 'tools/list', cursor ? { cursor } : {}, {
        headers: { authorization: `Bearer ${bob2Token}` },
      });
      if (!r.body.result) throw new Error(`tools/list: ${r.body.error?.message}`);
      return r.body.result as Page;
    };
    const bob2First = await list2();
    expect(bob2First.tools.map((t) => t.name)).toEqual(bobFirst.tools.map((t) => t.name));
    expect(bob2First.nextCursor).toBeDefined();
    expect(bob2First.nextCursor).not.toBe(bobFirst.nextCursor);
    await expect(list2(bobFirst.nextCursor)).rejects.toThrow(/cursor/);
    const all2: string[] = [...bob2First.tools.map((t) => t.name)];
    for (let cursor = bob2First.nextCursor; cursor; ) {
      const page = await list2(cursor);
      all2.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    }
    expect(all2).toEqual(await names(bob));
    expect(all2.every((n) => n.startsWith('memory__') || n.startsWith('manifold__'))).toBe(true);
    // Bob's own cursor still serves him after bob2 listed.
    expect((await bob.listTools({ cursor: bobFirst.nextCursor })).tools.length).toBeGreaterThan(0);
  });

  it('A12: the downstream Authorization header and cookies never reach an upstream', async () => {
    const alice = await connect(tokens.alice);
    const res = await alice.callTool({ name: 'recorder__seen_headers', arguments: {} });
    const seen = JSON.stringify(res.content);
    expect(seen).not.toContain(tokens.alice);
    expect(seen).not.toContain('cookie-secret-value');
    const sets = JSON.parse((res.content as { text: string }[])[0]!.text) as Record<string, string>[];
    expect(sets.length).toBeGreaterThan(0);
    for (const h of sets) {
      expect(h.authorization).toBeUndefined();
      expect(h.cookie).toBeUndefined();
    }
  });

  it('/healthz: anonymous callers learn only that the gateway is alive; admins get detail', async () => {
    const h = gw.url.replace('/mcp', '/healthz');
    expect(await (await fetch(h)).json()).toEqual({ status: 'alive' });
    const bob = await (await fetch(h, { headers: { authorization: `Bearer ${tokens.bob}` } })).json();
    expect(bob.upstreams).toBeUndefined();
    const admin = await (await fetch(h, { headers: { authorization: `Bearer ${tokens.admin}` } })).json();
    expect(admin.upstreams.map((u: { name: string }) => u.name)).toEqual([
      'everything',
      'memory',
      'recorder',
    ]);
  });

  it('per-tenant rate limit: over the limit, the call gets an error saying when to retry', async () => {
    const dave = await connect(tokens.dave);
    const results: string[] = [];
    for (let i = 0; i < 5; i++) {
      results.push(
        await dave
          .callTool({ name: 'memory__read_graph', arguments: {} })
          .then(() => 'ok')
          .catch((e: Error) => e.message),
      );
    }
    expect(results.slice(0, 3)).toEqual(['ok', 'ok', 'ok']);
    expect(results[3]).toMatch(/retry after \d+ s/);
  });

  it('audit: one line per call with tenant, tool, verdict and sizes, never argument values', async () => {
    const alice = await connect(tokens.alice);
    await alice.callTool({ name: 'everything__echo', arguments: { message: 'super-secret-argument' } });
    const line = gw.logs.find((l) => l.event === 'audit.tools_call' && l.tool === 'everything__echo');
    expect(line).toMatchObject({
      tenant: 'acme',
      subject: 'alice',
      server: 'everything',
      verdict: 'allowed',
    });
    expect(typeof line?.durationMs).toBe('number');
    expect(line?.bytesIn).toBeGreaterThan(0);
    const denied = gw.logs.find(
      (l) => l.event === 'audit.tools_call' && l.tool === 'memory__read_graph' && l.tenant === 'acme',
    );
    expect(denied?.verdict).toBe('denied');
  });

  it('A15: tokens, cookies, argument values and upstream URLs never appear in logs', () => {
    const all = JSON.stringify(gw.logs);
    expect(all).not.toContain(gw.config.servers.find((s) => s.name === 'recorder')!.url!);
    for (const t of Object.values(tokens)) expect(all).not.toContain(t);
    expect(all).not.toContain('cookie-secret-value');
    expect(all).not.toContain('super-secret-argument');
  });
});
