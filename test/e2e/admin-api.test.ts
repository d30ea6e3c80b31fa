import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { EVERYTHING, eventually, MEMORY, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { freshDatabase } from '../helpers/postgres.js';

/**
 * #52: the admin API's contract. Every response of every route is validated with ajv against the
 * OpenAPI document the gateway serves at /admin/openapi.json (a status the document does not list
 * fails the test too), on two instances sharing one Postgres with auth on: only a manifold:admin
 * token gets in (I4), a revoked token is refused on both instances within seconds, and the audit
 * query filters this instance's recent calls.
 */
type Obj = Record<string, unknown>;
const ISS = 'https://issuer.admin-api';
const AUD = 'manifold-admin-api';

describe('the admin API against its OpenAPI document (#52)', () => {
  const gateways: TestGateway[] = [];
  const clients: AnyHandle[] = [];
  let admin: string;
  let tenant: string;
  let doc: Obj;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const checked = new Set<string>();

  /** The document's path template that `path` matches. */
  const templateOf = (path: string) =>
    Object.keys(doc.paths as Obj).find((t) =>
      new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path.split('?')[0]!),
    );
  const pointer = (...parts: string[]) =>
    `openapi#/${parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;

  /** One admin request, its answer validated against the document. */
  const api = async (gw: TestGateway, method: string, path: string, token?: string, body?: unknown) => {
    const r = await fetch(`${new URL(gw.url).origin}${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await r.json()) as Obj;
    const template = templateOf(path);
    expect(template, `${path} is in the document`).toBeDefined();
    const op = ((doc.paths as Obj)[template!] as Obj)[method.toLowerCase()] as Obj | undefined;
    expect(op, `${method} ${template} is in the document`).toBeDefined();
    const responses = op!.responses as Obj;
    expect(Object.keys(responses), `${method} ${template} documents ${r.status}`).toContain(String(r.status));
    // 401 and 403 come from the gateway's one error mapping (a JSON-RPC error object).
    if (r.status !== 401 && r.status !== 403) {
      const validate = ajv.compile({
        $ref: pointer(
          'paths',
          template!,
          method.toLowerCase(),
          'responses',
          String(r.status),
          'content',
          'application/json',
          'schema',
        ),
      });
      expect(validate(json), `${method} ${path} ${r.status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
    checked.add(`${method} ${template} ${r.status}`);
    return { status: r.status, body: json };
  };

  beforeAll(async () => {
    const url = await freshDatabase('admin_api');
    const issuer = await testIssuer(ISS, AUD);
    const raw = {
      mcpServers: {
        ev: {
          command: process.execPath,
          args: [EVERYTHING, 'stdio'],
          approval: { ask: ['echo'], via: 'queue', timeoutSeconds: 1 },
        },
      },
      gateway: {
        auth: { ...issuer.auth },
        store: { postgres: '${MANIFOLD_PG_URL}' },
        cursorSecret: '${MANIFOLD_CURSOR_SECRET}',
      },
    };
    const env = {
      MANIFOLD_PG_URL: url,
      MANIFOLD_CURSOR_SECRET: 'one-secret-every-instance-shares-0123456789',
    };
    gateways.push(
      ...(await Promise.all([
        startTestGateway(raw, { env, trustPollMs: 200 }),
        startTestGateway(raw, { env, trustPollMs: 200 }),
      ])),
    );
    admin = await issuer.mint({ scope: 'manifold:admin tools:*' }, 'ops');
    tenant = await issuer.mint({ scope: 'tools:*' }, 'acme');
    const served = await fetch(`${new URL(gateways[0]!.url).origin}/admin/openapi.json`);
    expect(served.status).toBe(200);
    doc = (await served.json()) as Obj;
    ajv.addSchema(doc, 'openapi');
    clients.push(
      await connectLegacy(gateways[0]!.url, tenant),
      await connectModern(gateways[1]!.url, tenant),
    );
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    for (const g of gateways) await g.stop();
  });

  it('the document describes every route of the issue', () => {
    expect(doc.openapi).toBe('3.1.0');
    const paths = doc.paths as Record<string, Obj>;
    const routes = Object.entries(paths).flatMap(([p, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`),
    );
    expect(routes).toEqual(
      expect.arrayContaining([
        'GET /admin/servers',
        'POST /admin/servers',
        'GET /admin/servers/{name}',
        'PUT /admin/servers/{name}',
        'DELETE /admin/servers/{name}',
        'GET /admin/servers/{name}/drift',
        'POST /admin/servers/{name}/retrust',
        'GET /admin/approvals',
        'POST /admin/approvals/{id}',
        'GET /admin/audit',
        'GET /admin/tokens',
        'POST /admin/tokens/{id}/revoke',
      ]),
    );
  });

  it('I4: every route refuses no token (401) and a token without manifold:admin (403)', async () => {
    const gw = gateways[0]!;
    const paths = doc.paths as Record<string, Obj>;
    for (const [template, ops] of Object.entries(paths)) {
      if (template === '/admin/openapi.json') continue;
      const path = template.replace(/\{[^}]+\}/g, 'x');
      for (const method of Object.keys(ops)) {
        const body = method === 'get' || method === 'delete' ? undefined : {};
        expect((await api(gw, method.toUpperCase(), path, undefined, body)).status, `${method} ${path}`).toBe(
          401,
        );
        expect((await api(gw, method.toUpperCase(), path, tenant, body)).status, `${method} ${path}`).toBe(
          403,
        );
      }
    }
  });

  it('servers: list, read, dry run, add, change, remove, each answer as documented', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const list = await api(a, 'GET', '/admin/servers', admin);
    expect((list.body.servers as Obj[]).map((s) => s.name)).toEqual(['ev']);
    expect((await api(a, 'GET', '/admin/servers/ev', admin)).body).toMatchObject({ source: 'file' });
    expect((await api(a, 'GET', '/admin/servers/nope', admin)).status).toBe(404);
    const mem = { command: process.execPath, args: [MEMORY] };
    const dry = await api(a, 'POST', '/admin/servers?dryRun=1', admin, {
      name: 'mem',
      config: { ...mem, retry: 9 },
    });
    expect((dry.body.errors as Obj[])[0]).toMatchObject({ path: 'mcpServers.mem.retry' });
    expect(
      (await api(a, 'POST', '/admin/servers', admin, { name: 'mem', config: { ...mem, retry: 9 } })).status,
    ).toBe(400);
    expect((await api(a, 'POST', '/admin/servers', admin, { nope: true })).status).toBe(400);
    expect((await api(a, 'POST', '/admin/servers', admin, { name: 'mem', config: mem })).status).toBe(201);
    await eventually(
      async () => (await api(b, 'GET', '/admin/servers/mem', admin)).status === 200,
      'B has mem',
    );
    expect(
      (await api(b, 'PUT', '/admin/servers/mem?dryRun=1', admin, { config: { ...mem, retry: 2 } })).body,
    ).toMatchObject({
      diff: { change: 'retuned', fields: ['retry'] },
    });
    expect((await api(b, 'PUT', '/admin/servers/mem', admin, { config: { ...mem, retry: 2 } })).status).toBe(
      200,
    );
    expect((await api(b, 'PUT', '/admin/servers/ev', admin, { config: mem })).status).toBe(409);
    expect((await api(b, 'PUT', '/admin/servers/nope', admin, { config: mem })).status).toBe(404);
    expect((await api(a, 'POST', '/admin/servers', admin, { name: 'mem', config: mem })).status).toBe(409);
    expect((await api(a, 'DELETE', '/admin/servers/mem?dryRun=1', admin)).body).toMatchObject({
      applied: false,
    });
    expect((await api(a, 'DELETE', '/admin/servers/mem', admin)).status).toBe(200);
    expect((await api(a, 'DELETE', '/admin/servers/ev', admin)).status).toBe(409);
    expect((await api(a, 'DELETE', '/admin/servers/mem', admin)).status).toBe(404);
    const drift = await api(a, 'GET', '/admin/servers/ev/drift', admin);
    expect(drift.status).toBe(200);
    expect((await api(a, 'POST', '/admin/servers/ev/retrust', admin, { digest: 'stale' })).status).toBe(409);
    expect((await api(a, 'POST', '/admin/servers/ev/retrust', admin, { nope: 1 })).status).toBe(400);
    expect((await api(a, 'GET', '/admin/servers/nope/drift', admin)).status).toBe(404);
  });

  it('approvals and audit: a queued call listed and decided, the calls filtered by tenant, tool and verdict', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const legacy = clients[0]!;
    const queued = (await legacy.client.callTool({
      name: 'ev__echo',
      arguments: { message: 'contract' },
    })) as Obj;
    const id = String((queued._meta as Obj)['manifold/approvalId']);
    const listed = await api(b, 'GET', '/admin/approvals?status=pending&tenant=acme', admin);
    expect((listed.body.approvals as Obj[]).map((x) => x.id)).toContain(id);
    expect((await api(b, 'GET', `/admin/approvals/${id}`, admin)).body).toMatchObject({ subject: 'acme' });
    expect((await api(b, 'GET', '/admin/approvals?limit=0', admin)).status).toBe(400);
    expect(
      (await api(b, 'POST', `/admin/approvals/${id}`, admin, { decision: 'approve' })).body,
    ).toMatchObject({
      decidedBy: 'ops',
    });
    expect((await api(a, 'POST', `/admin/approvals/${id}`, admin, { decision: 'decline' })).status).toBe(409);
    expect((await api(a, 'GET', '/admin/approvals/nope', admin)).status).toBe(404);
    await legacy.client.callTool({ name: 'ev__get-sum', arguments: { a: 1, b: 2 } });
    await legacy.client.callTool({ name: 'ev__echo', arguments: { message: 'contract' } });
    const all = await api(a, 'GET', '/admin/audit?tenant=acme', admin);
    expect((all.body.calls as Obj[]).length).toBeGreaterThanOrEqual(3);
    const sums = await api(a, 'GET', '/admin/audit?tool=ev__get-sum&verdict=allowed', admin);
    expect((sums.body.calls as Obj[]).every((c) => c.tool === 'ev__get-sum' && c.verdict === 'allowed')).toBe(
      true,
    );
    expect(sums.body.calls).toHaveLength(1);
    const denied = await api(a, 'GET', '/admin/audit?verdict=denied&limit=1', admin);
    expect(denied.body.calls).toEqual([
      expect.objectContaining({ tool: 'ev__echo', verdict: 'denied', tenant: 'acme' }),
    ]);
    expect((await api(a, 'GET', '/admin/audit?tenant=other', admin)).body.calls).toEqual([]);
    expect((await api(a, 'GET', '/admin/audit?limit=99999', admin)).status).toBe(400);
  });

  it('I4: tokens listed by id, and a revoked one refused on every instance within seconds', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const listed = await api(a, 'GET', '/admin/tokens', admin);
    const mine = (listed.body.tokens as Obj[]).find((t) => t.subject === 'acme');
    expect(mine).toMatchObject({ tenant: 'acme', revoked: false });
    expect(JSON.stringify(listed.body)).not.toContain(tenant);
    const id = String(mine!.id);
    expect(
      (await api(b, 'POST', `/admin/tokens/${encodeURIComponent(id)}/revoke`, admin)).body,
    ).toMatchObject({
      revoked: true,
      revokedBy: 'ops',
    });
    expect((await api(b, 'POST', `/admin/tokens/${encodeURIComponent(id)}/revoke`, admin)).status).toBe(409);
    expect((await api(b, 'POST', '/admin/tokens/nope/revoke', admin)).status).toBe(404);
    expect((await api(a, 'GET', '/admin/tokens?limit=0', admin)).status).toBe(400);
    for (const gw of [a, b]) {
      await eventually(
        async () => {
          const r = await fetch(gw.url, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${tenant}`,
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'mcp-protocol-version': '2026-07-28',
            },
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: {} }),
          });
          return r.status === 401;
        },
        'the revoked token is refused',
        10_000,
      );
    }
    const audit = gateways.flatMap((g) =>
      g.logs.filter((l) => l.event === 'audit.admin' && l.action === 'token.revoke'),
    );
    expect(audit).toEqual([expect.objectContaining({ by: 'ops', token: id })]);
  });

  it('every documented answer the tests above produced was checked against the document', () => {
    expect(checked.size).toBeGreaterThan(30);
  });
});
