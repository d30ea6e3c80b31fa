import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectModern, DRIFT } from '../helpers/clients.js';
import { stdioServer, type TestIssuer, testIssuer } from '../helpers/factories.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { freshDatabase } from '../helpers/postgres.js';

// #15: a legacy session opened on one instance is served by another on the same Postgres. The
// client's requests go to whichever instance `route.to` names: a load balancer without stickiness.
const ISS = 'https://issuer.example';
const AUD = 'manifold-sessions';
const ACCEPT = 'application/json, text/event-stream';

interface Route {
  to: number;
  /** Which instance each request reached, by its JSON-RPC method (GET and DELETE by verb). */
  served: [string, number][];
}

/** fetch for the v1 transport: the same path on the instance `route.to` names. */
function routed(urls: () => string[], route: Route): typeof fetch {
  return async (_input, init) => {
    const target = urls()[route.to]!;
    let what = init?.method ?? 'GET';
    if (typeof init?.body === 'string')
      what = (JSON.parse(init.body) as { method?: string }).method ?? 'reply';
    route.served.push([what, route.to]);
    return fetch(target, init);
  };
}

describe('legacy sessions on any instance of one Postgres', () => {
  let dir: string;
  let issuer: TestIssuer;
  const tokens = { alice: '', bob: '' };
  const stopAll: (() => Promise<void>)[] = [];

  /** Each start's database, by the name it was asked for. */
  const databases = new Map<string, string>();
  const start = async (database: string, idleSeconds: number): Promise<TestGateway[]> => {
    const url = await freshDatabase(database);
    databases.set(database, url);
    const toolsFile = join(dir, 'tools.json');
    const raw = {
      mcpServers: { fx: stdioServer(DRIFT, [], { env: { DRIFT_TOOLS_FILE: toolsFile } }) },
      gateway: {
        store: { postgres: '${MANIFOLD_PG_URL}' },
        sessionIdleSeconds: idleSeconds,
        auth: issuer.auth,
      },
    };
    const env = { MANIFOLD_PG_URL: url };
    const gateways = await Promise.all([startTestGateway(raw, { env }), startTestGateway(raw, { env })]);
    for (const gw of gateways) stopAll.push(() => gw.stop());
    return gateways;
  };

  const legacy = async (urls: () => string[], token: string, route: Route) => {
    const transport = new LegacyTransport(new URL(urls()[0]!), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
      fetch: routed(urls, route),
    });
    const client = new LegacyClient({ name: 'roaming-legacy', version: '1.0.0' });
    await client.connect(transport);
    stopAll.push(() => client.close());
    return { client, transport };
  };

  const post = (url: string, token: string, sid: string, body: Record<string, unknown>) =>
    fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: ACCEPT,
        authorization: `Bearer ${token}`,
        'mcp-session-id': sid,
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify(body),
    });
  const listTools = { jsonrpc: '2.0', id: 7, method: 'tools/list' };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mf-sessions-'));
    writeFileSync(
      join(dir, 'tools.json'),
      JSON.stringify([{ name: 'alpha', description: 'Alpha.', inputSchema: { type: 'object' } }]),
    );
    issuer = await testIssuer(ISS, AUD);
    tokens.alice = await issuer.mint({ scope: 'tools:*' }, 'alice');
    tokens.bob = await issuer.mint({ scope: 'tools:*' }, 'bob');
  }, 600_000);

  afterAll(async () => {
    for (const stop of stopAll.reverse()) await stop().catch(() => {});
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe('two instances, default idle time', () => {
    let gateways: TestGateway[];
    const urls = () => gateways.map((gw) => gw.url);
    beforeAll(async () => {
      gateways = await start('roaming', 3600);
    }, 120_000);

    it('initialize on A, then tools/list and tools/call on B with the same session id (legacy client)', async () => {
      const route: Route = { to: 0, served: [] };
      const { client, transport } = await legacy(urls, tokens.alice, route);
      const sid = transport.sessionId!;
      expect(route.served[0]).toEqual(['initialize', 0]);
      route.to = 1;
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['fx__alpha']);
      const result = (await client.callTool({ name: 'fx__alpha', arguments: {} })) as {
        content: { text: string }[];
      };
      expect(result.content[0]!.text).toBe('called alpha');
      await client.setLoggingLevel('error');
      expect(route.served.filter(([, at]) => at === 1).map(([m]) => m)).toEqual(
        expect.arrayContaining(['tools/list', 'tools/call', 'logging/setLevel']),
      );
      // Back on A, and again on B: the same session throughout.
      route.to = 0;
      expect((await client.listTools()).tools).toHaveLength(1);
      expect(transport.sessionId).toBe(sid);
      // The row names the owner and the version; no token or header is in it.
      const db = new pg.Client({ connectionString: databases.get('roaming') });
      await db.connect();
      try {
        const { rows } = await db.query('SELECT * FROM manifold_sessions WHERE id = $1', [sid]);
        expect(rows).toHaveLength(1);
        expect(rows[0].protocol_version).toBe('2025-11-25');
        expect(rows[0].log_level).toBe('error');
        expect(JSON.parse(rows[0].client_capabilities)).toEqual(expect.any(Object));
        const text = JSON.stringify(rows);
        for (const secret of [tokens.alice, tokens.alice.split('.')[2]!, 'Bearer']) {
          expect(text).not.toContain(secret);
        }
      } finally {
        await db.end();
      }
    });

    it("A4: another subject's token with that id is refused on B exactly like an unknown id", async () => {
      const route: Route = { to: 0, served: [] };
      const { transport } = await legacy(urls, tokens.alice, route);
      const sid = transport.sessionId!;
      const [a, b] = urls() as [string, string];
      const stolen = await post(b, tokens.bob, sid, listTools);
      const unknown = await post(b, tokens.bob, crypto.randomUUID(), listTools);
      expect(stolen.status).toBe(404);
      expect(unknown.status).toBe(404);
      expect(await stolen.json()).toEqual(await unknown.json());
      // And the refusal did not hand the session to bob on A either; alice still has it on both.
      expect((await post(a, tokens.bob, sid, listTools)).status).toBe(404);
      expect((await post(b, tokens.alice, sid, listTools)).status).toBe(200);
      expect((await post(a, tokens.alice, sid, listTools)).status).toBe(200);
    });

    it('B4: DELETE on B, and the id is 404 on A too', async () => {
      const route: Route = { to: 0, served: [] };
      const { client, transport } = await legacy(urls, tokens.alice, route);
      const sid = transport.sessionId!;
      await client.listTools();
      route.to = 1;
      await transport.terminateSession();
      expect(route.served.at(-1)).toEqual(['DELETE', 1]);
      const [a, b] = urls() as [string, string];
      expect((await post(b, tokens.alice, sid, listTools)).status).toBe(404);
      // A held the session in its table: the delete's notification ends it there.
      await eventually(
        async () => (await post(a, tokens.alice, sid, listTools)).status === 404,
        'the session deleted on B is gone on A',
        5000,
      );
    });

    it('a modern client needs nothing: it is served by either instance', async () => {
      for (const url of urls()) {
        const modern = await connectModern(url, tokens.alice);
        stopAll.push(() => modern.close());
        expect((await modern.client.listTools()).tools.map((t) => t.name)).toEqual(['fx__alpha']);
      }
    });
  });

  describe('two instances, sessionIdleSeconds 1', () => {
    let gateways: TestGateway[];
    const urls = () => gateways.map((gw) => gw.url);
    beforeAll(async () => {
      gateways = await start('idle', 1);
    }, 120_000);

    it('E5: a session idle past sessionIdleSeconds is gone on both instances', async () => {
      const route: Route = { to: 0, served: [] };
      const { client, transport } = await legacy(urls, tokens.alice, route);
      const sid = transport.sessionId!;
      route.to = 1;
      await client.listTools();
      const [a, b] = urls() as [string, string];
      // Time itself must pass (the idle limit); asking meanwhile would count as use.
      await new Promise((r) => setTimeout(r, 2500));
      expect((await post(b, tokens.alice, sid, listTools)).status).toBe(404);
      expect((await post(a, tokens.alice, sid, listTools)).status).toBe(404);
    });
  });
});
