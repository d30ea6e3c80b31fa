import { afterEach, describe, expect, it } from 'vitest';
import { type AuthServer, type AuthServerOptions, startAuthServer } from '../fixtures/oauth-as.mjs';
import { type ProtectedServer, startProtectedServer } from '../fixtures/protected-server.mjs';
import { type AnyHandle, connectEra, resultText } from '../helpers/clients.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { browse } from '../helpers/oauth-browser.js';

/**
 * #19 end to end, what test/e2e/upstream-oauth-gateway.test.ts does not cover: scope step-up and
 * its budget, a change of authorization server (SEP-2352), a client ID metadata document fetched
 * by a real authorization server, and client credentials. Real parts only: oidc-provider
 * (test/fixtures/oauth-as.mjs), a protected MCP server of both eras
 * (test/fixtures/protected-server.mjs), the gateway in process, and SDK clients of both eras.
 * Secrets at rest, the static re-read and logout are in upstream-oauth-secrets.test.ts.
 */

type Obj = Record<string, unknown>;
const SECRET = 'an-oauth-secret-of-at-least-32-characters!!';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

async function protectedServer(): Promise<ProtectedServer> {
  const ps = await startProtectedServer({ port: 0 });
  cleanups.push(() => ps.close());
  return ps;
}

async function authServer(options: AuthServerOptions): Promise<AuthServer> {
  // Access tokens outlive the refresh skew (60 s by default), so a call does not refresh first.
  const as = await startAuthServer({ port: 0, accessTokenTtl: 600, ...options });
  cleanups.push(() => as.close());
  return as;
}

async function gateway(
  servers: Record<string, unknown>,
  oauth: Obj = {},
  env: Record<string, string> = {},
): Promise<TestGateway> {
  const gw = await startTestGateway(
    {
      mcpServers: servers,
      gateway: { allowedHosts: ['127.0.0.1'], oauth: { secret: SECRET, ...oauth } },
    },
    { waitReady: false, env },
  );
  cleanups.push(() => gw.stop());
  return gw;
}

async function upstreamOf(gw: TestGateway, server: string): Promise<Obj> {
  const res = await fetch(new URL('/healthz', gw.url));
  const body = (await res.json()) as { upstreams: Obj[] };
  return body.upstreams.find((u) => u.name === server) ?? {};
}
const authOf = async (gw: TestGateway, server: string) => ((await upstreamOf(gw, server)).auth ?? {}) as Obj;

/**
 * Waits until the server was tried and needs a login: its 401 (and the challenge's scope) seen, as
 * an operator reading /healthz would. Before any attempt the state is already needs-login (no
 * token), but a login then knows no challenge.
 */
async function needsLogin(gw: TestGateway, server: string): Promise<void> {
  await eventually(async () => {
    const u = await upstreamOf(gw, server);
    return (
      (u.auth as Obj | undefined)?.state === 'needs-login' && (u.state === 'backoff' || u.state === 'failed')
    );
  }, `${server} tried and needing a login`);
}

async function ready(gw: TestGateway, server: string): Promise<void> {
  await eventually(() => gw.gateway.pool.get(server)?.state === 'ready', `${server} ready`);
}

async function adminLogin(gw: TestGateway, server: string): Promise<{ status: number; body: Obj }> {
  const res = await fetch(new URL(`/admin/servers/${server}/login`, gw.url), { method: 'POST' });
  return { status: res.status, body: (await res.json()) as Obj };
}

/** The operator's login: the admin route, then the browser through the AS to the gateway's callback. */
async function login(gw: TestGateway, server: string, user = 'alice') {
  const begun = await adminLogin(gw, server);
  expect(begun.status).toBe(200);
  const done = await browse(begun.body.authorizationUrl as string, {
    callback: `${new URL(gw.url).origin}/oauth/callback`,
    user,
  });
  expect(done.status).toBe(200);
  return done;
}

type AnyClient = AnyHandle['client'];

/** A v1 (2025-11-25) or v2 (2026-07-28) SDK client of the gateway, closed after the test. */
async function client(gw: TestGateway, era: 'v1' | 'v2'): Promise<AnyClient> {
  const h = await connectEra(gw.url, era);
  cleanups.push(() => h.close());
  return h.client;
}

const textOf = resultText;

/** A tool call's outcome: the parsed JSON text of a result, or the JSON-RPC error. */
async function call(
  c: AnyClient,
  name: string,
): Promise<{ ok?: Obj; isError?: string; error?: { code?: number; data?: Obj; message?: string } }> {
  try {
    const r = await c.callTool({ name, arguments: {} });
    if (r.isError) return { isError: textOf(r) };
    return { ok: JSON.parse(textOf(r)) as Obj };
  } catch (e) {
    return { error: e as { code?: number; data?: Obj; message?: string } };
  }
}

describe('scope step-up (403 insufficient_scope)', () => {
  it('a write tool refused for its scope asks for a new login with the union of scopes; after it, the call succeeds (v1 and v2)', async () => {
    const ps = await protectedServer();
    const as = await authServer({ resource: ps.resource });
    ps.setIssuer(as.issuer);
    const gw = await gateway({ gh: { url: ps.url, auth: 'gateway' } });
    await needsLogin(gw, 'gh');
    const first = await login(gw, 'gh');
    // The first authorization asks for the 401 challenge's scope only.
    expect(first.request.get('scope')?.split(' ')).toContain('repo:read');
    expect(first.request.get('scope')?.split(' ')).not.toContain('repo:write');
    await ready(gw, 'gh');

    const v1 = await client(gw, 'v1');
    expect((await call(v1, 'gh__list_repos')).ok).toMatchObject({ owner: 'alice' });
    const refused = await call(v1, 'gh__create_issue');
    expect(refused.ok).toBeUndefined();
    expect(ps.log.events.some((e) => e.kind === '403' && e.needed === 'repo:write')).toBe(true);
    await eventually(
      async () => (await authOf(gw, 'gh')).state === 'needs-login',
      'a step-up login is needed',
    );

    const second = await login(gw, 'gh');
    const scopes = second.request.get('scope')?.split(' ') ?? [];
    expect(scopes).toEqual(expect.arrayContaining(['repo:read', 'repo:write']));
    expect(as.events.authorizations.at(-1)?.scope?.split(' ')).toEqual(
      expect.arrayContaining(['repo:read', 'repo:write']),
    );
    await ready(gw, 'gh');
    const v2 = await client(gw, 'v2');
    expect((await call(v2, 'gh__create_issue')).ok).toMatchObject({ created: true, by: 'alice' });
    expect((await call(v1, 'gh__create_issue')).ok).toMatchObject({ created: true, by: 'alice' });
    expect((await authOf(gw, 'gh')).scopes).toEqual(expect.arrayContaining(['repo:read', 'repo:write']));
  });

  it('a server that is never satisfied stops at maxStepUps + 1 authorizations: refused, step-up-exhausted, and the login route says 409', async () => {
    const ps = await protectedServer();
    const as = await authServer({ resource: ps.resource });
    ps.setIssuer(as.issuer);
    ps.alwaysInsufficient('repo:write');
    const gw = await gateway({ gh: { url: ps.url, auth: { mode: 'gateway', maxStepUps: 1 } } });
    await needsLogin(gw, 'gh');
    await login(gw, 'gh');
    await ready(gw, 'gh');
    const v2 = await client(gw, 'v2');
    expect((await call(v2, 'gh__whoami')).ok).toBeUndefined();
    await eventually(
      async () => (await authOf(gw, 'gh')).state === 'needs-login',
      'a step-up login is needed',
    );
    await login(gw, 'gh');
    await ready(gw, 'gh');
    expect((await call(v2, 'gh__whoami')).ok).toBeUndefined();
    await eventually(async () => (await authOf(gw, 'gh')).state === 'refused', 'refused after the budget');
    expect(await authOf(gw, 'gh')).toMatchObject({ state: 'refused', rule: 'step-up-exhausted' });
    expect(as.events.counts.authorization).toBe(2);
    const again = await adminLogin(gw, 'gh');
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ rule: 'step-up-exhausted' });
    expect(as.events.counts.authorization).toBe(2);
  });
});

describe('a change of authorization server (SEP-2352)', () => {
  it('a 401 after the resource names another AS leads to a registration there, never with the old client id, then success (v1 and v2)', async () => {
    const ps = await protectedServer();
    const as1 = await authServer({ resource: ps.resource });
    const as2 = await authServer({ resource: ps.resource });
    ps.setIssuer(as1.issuer);
    const gw = await gateway({ gh: { url: ps.url, auth: 'gateway' } });
    await needsLogin(gw, 'gh');
    await login(gw, 'gh', 'alice');
    await ready(gw, 'gh');
    const v1 = await client(gw, 'v1');
    expect((await call(v1, 'gh__whoami')).ok).toMatchObject({ sub: 'alice' });
    const oldClient = as1.events.authorizations.at(-1)?.clientId;
    expect(oldClient).toBeTruthy();
    expect(as1.events.counts.registration).toBe(1);

    // The resource moves to AS2: tokens of AS1 are refused from now on.
    ps.setIssuer(as2.issuer);
    const refused = await call(v1, 'gh__whoami');
    expect(refused.ok).toBeUndefined();
    await eventually(
      async () => (await authOf(gw, 'gh')).state === 'needs-login',
      'a login at the new AS is needed',
    );
    const done = await login(gw, 'gh', 'bob');
    expect(new URL(done.request.get('redirect_uri') ?? '').pathname).toBe('/oauth/callback');
    expect(as2.events.counts.registration).toBe(1);
    expect(as2.events.authorizations.map((a) => a.clientId)).not.toContain(oldClient);
    expect(as2.events.grants.map((g) => g.clientId)).not.toContain(oldClient);
    await ready(gw, 'gh');
    const v2 = await client(gw, 'v2');
    expect((await call(v2, 'gh__whoami')).ok).toMatchObject({ sub: 'bob' });
    expect(await authOf(gw, 'gh')).toMatchObject({ state: 'ready', issuer: as2.issuer });
  });
});

describe('client ID metadata document', () => {
  it('an AS that supports CIMD fetches the gateway document and registers nothing; the login works (v2)', async () => {
    const ps = await protectedServer();
    const CIMD = 'https://manifold.test/oauth/client-metadata.json';
    let gatewayOrigin = '';
    const as = await authServer({
      resource: ps.resource,
      cimd: true,
      cimdRewrite: (u: string) => u.replace('https://manifold.test', gatewayOrigin),
    });
    ps.setIssuer(as.issuer);
    const gw = await gateway({ gh: { url: ps.url, auth: 'gateway' } }, { clientMetadataUrl: CIMD });
    gatewayOrigin = new URL(gw.url).origin;

    const doc = (await (await fetch(`${gatewayOrigin}/oauth/client-metadata.json`)).json()) as Obj;
    expect(doc).toMatchObject({
      client_id: CIMD,
      client_name: 'Manifold',
      redirect_uris: [`${gatewayOrigin}/oauth/callback`],
      token_endpoint_auth_method: 'none',
    });
    expect(doc.grant_types).toEqual(expect.arrayContaining(['authorization_code', 'refresh_token']));

    await needsLogin(gw, 'gh');
    const done = await login(gw, 'gh');
    expect(done.request.get('client_id')).toBe(CIMD);
    expect(as.events.counts.registration).toBe(0);
    await ready(gw, 'gh');
    const v2 = await client(gw, 'v2');
    expect((await call(v2, 'gh__whoami')).ok).toMatchObject({ sub: 'alice', clientId: CIMD });
  });
});

describe('client credentials', () => {
  it('a pre-registered client is ready with no browser, is re-issued once on a 401, and its secret is never logged (v1 and v2)', async () => {
    const ps = await protectedServer();
    const CLIENT_SECRET = 'cc-secret-0123456789-abcdefghij';
    const as = await authServer({
      resource: ps.resource,
      registration: false,
      client: { clientId: 'manifold-cc', clientSecret: CLIENT_SECRET, grantTypes: ['client_credentials'] },
    });
    ps.setIssuer(as.issuer);
    const gw = await gateway(
      {
        gh: {
          url: ps.url,
          auth: {
            mode: 'gateway',
            grant: 'client_credentials',
            clientId: 'manifold-cc',
            clientSecret: '${CC_SECRET}',
          },
        },
      },
      {},
      { CC_SECRET: CLIENT_SECRET },
    );
    await ready(gw, 'gh');
    expect(as.events.counts.authorization).toBe(0);
    const v1 = await client(gw, 'v1');
    expect((await call(v1, 'gh__whoami')).ok).toMatchObject({ sub: 'manifold-cc', clientId: 'manifold-cc' });
    const issued = as.events.counts.client_credentials ?? 0;
    expect(issued).toBeGreaterThan(0);

    // A refused token is re-issued once per refused request (never in a loop), and the call fails
    // cleanly with the gateway's auth error.
    ps.rejectAll(true);
    const v2 = await client(gw, 'v2');
    const refusedBefore = ps.log.events.filter((e) => e.kind === '401').length;
    const refused = await call(v2, 'gh__whoami');
    expect(refused.ok).toBeUndefined();
    const refusals = ps.log.events.filter((e) => e.kind === '401').length - refusedBefore;
    const reissued = as.events.counts.client_credentials - issued;
    expect(reissued).toBeGreaterThanOrEqual(1);
    expect(reissued).toBeLessThanOrEqual(refusals);
    ps.rejectAll(false);
    expect((await call(v2, 'gh__whoami')).ok).toMatchObject({ sub: 'manifold-cc' });
    expect(as.events.counts.authorization).toBe(0);
    expect(JSON.stringify(gw.logs)).not.toContain(CLIENT_SECRET);
    for (const t of ps.log.tokens) expect(JSON.stringify(gw.logs)).not.toContain(t);
  });
});
