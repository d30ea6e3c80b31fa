import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthServer } from '../fixtures/oauth-as.mjs';
import { startProtectedServer } from '../fixtures/protected-server.mjs';
import { resultText } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { browse } from '../helpers/oauth-browser.js';

/**
 * #19, the gateway side: Manifold as an OAuth client of a protected MCP server, end to end with a
 * real authorization server (oidc-provider, test/fixtures/oauth-as.mjs), a real protected server
 * of both eras (test/fixtures/protected-server.mjs) and SDK clients of both eras downstream.
 * Mode gateway: the operator signs in through the admin route and the callback; refresh on
 * expiry; a refused token with no way to renew answers ERR_UPSTREAM_AUTH login-required, never a
 * 500. Mode user: each caller signs in through a URL elicitation (-32042 for a legacy client, an
 * MRTR input_required for a modern one) and their tokens never cross.
 */

type Obj = Record<string, unknown>;
const SECRET = 'an-oauth-secret-of-at-least-32-characters!!';

interface Upstream {
  as: {
    issuer: string;
    events: { counts: Record<string, number> };
    revokeAll(): Promise<void>;
    close(): Promise<void>;
  };
  ps: {
    url: string;
    resource: string;
    setIssuer(i: string): void;
    rejectAll(on?: boolean): void;
    alwaysInsufficient(scope: string | null): void;
    close(): Promise<void>;
  };
}

async function protectedUpstream(o: { ttl?: number } = {}): Promise<Upstream> {
  const ps = await startProtectedServer({ port: 0 });
  const as = await startAuthServer({ port: 0, resource: ps.resource, accessTokenTtl: o.ttl ?? 60 });
  ps.setIssuer(as.issuer);
  return { as, ps };
}

const textOf = resultText;

async function healthOf(gw: TestGateway, token?: string): Promise<Obj> {
  const res = await fetch(
    new URL('/healthz', gw.url),
    token ? { headers: { authorization: `Bearer ${token}` } } : {},
  );
  return (await res.json()) as Obj;
}

const authOf = (h: Obj, server: string) =>
  ((h.upstreams as Obj[]).find((u) => u.name === server)?.auth ?? {}) as Obj;

async function adminLogin(gw: TestGateway, server: string, token?: string) {
  const res = await fetch(new URL(`/admin/servers/${server}/login`, gw.url), {
    method: 'POST',
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  return { status: res.status, body: (await res.json()) as Obj };
}

const callbackOf = (gw: TestGateway) => `${new URL(gw.url).origin}/oauth/callback`;

describe('upstream OAuth, mode gateway (#19)', () => {
  let up: Upstream;
  let gw: TestGateway;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'oauth-gw-'));
    up = await protectedUpstream({ ttl: 4 });
    gw = await startTestGateway(
      {
        mcpServers: { gh: { url: up.ps.url, auth: 'gateway' } },
        gateway: {
          allowedHosts: ['127.0.0.1'],
          store: { path: join(dir, 'state.db') },
          oauth: { secret: SECRET, refreshSkewSeconds: 0 },
        },
      },
      { waitReady: true },
    );
  });

  afterAll(async () => {
    await gw?.stop();
    await up?.ps.close();
    await up?.as.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts needing a login, and says so on /healthz without a token', async () => {
    const auth = authOf(await healthOf(gw), 'gh');
    expect(auth).toMatchObject({ state: 'needs-login', rule: 'login-required' });
    expect(JSON.stringify(await healthOf(gw))).not.toMatch(/eyJ/);
  });

  it('an unknown server has no login (404)', async () => {
    expect((await adminLogin(gw, 'nope')).status).toBe(404);
  });

  it('the operator signs in through the admin route and the callback; both eras call with the token', async () => {
    const begun = await adminLogin(gw, 'gh');
    expect(begun.status).toBe(200);
    expect(typeof begun.body.authorizationUrl).toBe('string');
    expect(begun.body.expiresAt).toBeGreaterThan(Date.now());
    const done = await browse(begun.body.authorizationUrl as string, {
      callback: callbackOf(gw),
      user: 'alice',
    });
    expect(done.status).toBe(200);
    expect(done.body).toContain('Signed in to gh');
    // The authorization request carried the resource (RFC 8707) and PKCE S256.
    expect(done.request.get('resource')).toBe(up.ps.resource);
    expect(done.request.get('code_challenge_method')).toBe('S256');
    await eventually(() => gw.gateway.pool.get('gh')?.state === 'ready', 'gh ready after the login');
    expect(authOf(await healthOf(gw), 'gh')).toMatchObject({ state: 'ready', issuer: up.as.issuer });

    // The same callback again is a replay: refused, and nothing is echoed.
    const replay = await fetch(
      done.callbackUrl.href.replace(done.callbackUrl.origin, new URL(gw.url).origin),
    );
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('state-invalid');

    const legacy = new LegacyClient({ name: 'v1', version: '1.0.0' });
    await legacy.connect(new LegacyTransport(new URL(gw.url)));
    const modern = new ModernClient(
      { name: 'v2', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await modern.connect(new ModernTransport(new URL(gw.url)));
    try {
      const a = JSON.parse(textOf(await legacy.callTool({ name: 'gh__whoami', arguments: {} })));
      const b = JSON.parse(textOf(await modern.callTool({ name: 'gh__whoami', arguments: {} })));
      expect(a.sub).toBe('alice');
      expect(b.sub).toBe('alice');
    } finally {
      await legacy.close();
      await modern.close();
    }
  });

  it('an expired access token is refreshed before the call', async () => {
    const before = up.as.events.counts.refresh_token ?? 0;
    const exp = Number(authOf(await healthOf(gw), 'gh').expiresAt);
    expect(exp).toBeGreaterThan(0);
    await eventually(() => Date.now() > exp + 50, 'the access token expired', 15_000);
    const client = new LegacyClient({ name: 'v1', version: '1.0.0' });
    await client.connect(new LegacyTransport(new URL(gw.url)));
    try {
      const r = await client.callTool({ name: 'gh__whoami', arguments: {} });
      expect(r.isError).not.toBe(true);
      expect(JSON.parse(textOf(r)).sub).toBe('alice');
    } finally {
      await client.close();
    }
    expect(up.as.events.counts.refresh_token ?? 0).toBeGreaterThan(before);
    expect(Number(authOf(await healthOf(gw), 'gh').expiresAt)).toBeGreaterThan(exp);
  });

  it('a refused token that cannot be renewed answers ERR_UPSTREAM_AUTH login-required, never a 500', async () => {
    const client = new LegacyClient({ name: 'v1', version: '1.0.0' });
    await client.connect(new LegacyTransport(new URL(gw.url)));
    await up.as.revokeAll();
    up.ps.rejectAll(true);
    try {
      const err = await client.callTool({ name: 'gh__whoami', arguments: {} }).then(
        () => undefined,
        (e: unknown) => e as { code?: number; data?: Obj; message?: string },
      );
      expect(err).toBeDefined();
      expect(err?.code).toBe(-32015);
      expect(err?.data).toMatchObject({
        manifold: 'ERR_UPSTREAM_AUTH',
        rule: 'login-required',
        server: 'gh',
      });
      expect(authOf(await healthOf(gw), 'gh')).toMatchObject({ state: 'needs-login' });
    } finally {
      up.ps.rejectAll(false);
      await client.close();
    }
    // No log line carries a token.
    expect(JSON.stringify(gw.logs)).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./);
  });

  it('logout forgets the token (and a new login brings it back)', async () => {
    const begun = await adminLogin(gw, 'gh');
    const done = await browse(begun.body.authorizationUrl as string, { callback: callbackOf(gw) });
    expect(done.status).toBe(200);
    await eventually(
      () => authOf(gw.gateway.health() as unknown as Obj, 'gh').state === 'ready',
      'ready again',
    );
    const out = await fetch(new URL('/admin/servers/gh/logout', gw.url), { method: 'POST' });
    expect(out.status).toBe(200);
    expect(authOf(await healthOf(gw), 'gh')).toMatchObject({ state: 'needs-login' });
  });
  it('step-up: a 403 insufficient_scope needs a new login with the union of scopes, then the call runs', async () => {
    const login = async () => {
      const begun = await adminLogin(gw, 'gh');
      expect(begun.status).toBe(200);
      const done = await browse(begun.body.authorizationUrl as string, { callback: callbackOf(gw) });
      expect(done.status).toBe(200);
      await eventually(() => gw.gateway.pool.get('gh')?.state === 'ready', 'ready');
      return done.request;
    };
    await login();
    const client = new LegacyClient({ name: 'v1', version: '1.0.0' });
    await client.connect(new LegacyTransport(new URL(gw.url)));
    const call = (name: string) =>
      client.callTool({ name, arguments: {} }).then(
        (r) => ({ r, e: undefined }),
        (e: unknown) => ({ r: undefined, e: e as { code?: number; data?: Obj } }),
      );
    try {
      const refused = await call('gh__create_issue');
      expect(refused.e?.data).toMatchObject({ manifold: 'ERR_UPSTREAM_AUTH', rule: 'login-required' });
      const asked = (await login()).get('scope')?.split(' ') ?? [];
      expect(asked).toEqual(expect.arrayContaining(['repo:read', 'repo:write']));
      const ok = await call('gh__create_issue');
      expect(ok.e).toBeUndefined();
      expect(ok.r?.isError).not.toBe(true);

      // A server that always wants more: at most maxStepUps (2) re-authorizations, then refused.
      up.ps.alwaysInsufficient('repo:admin');
      const before = up.as.events.counts.authorization ?? 0;
      let last: Awaited<ReturnType<typeof call>> | undefined;
      for (let i = 0; i < 4; i++) {
        last = await call('gh__whoami');
        if (last.e?.data?.rule === 'step-up-exhausted') break;
        await login();
      }
      expect(last?.e?.data).toMatchObject({ rule: 'step-up-exhausted' });
      expect((up.as.events.counts.authorization ?? 0) - before).toBe(2);
      const again = await adminLogin(gw, 'gh');
      expect(again.status).toBe(409);
      expect(again.body.rule).toBe('step-up-exhausted');
    } finally {
      up.ps.alwaysInsufficient(null);
      await client.close();
    }
  });
});

describe('upstream OAuth, mode user (#19)', () => {
  let up: Upstream;
  let gw: TestGateway;
  let issuer: Awaited<ReturnType<typeof testIssuer>>;
  const tokens: Record<string, string> = {};
  const ISS = 'https://idp.test';
  const AUD = 'manifold-test';

  beforeAll(async () => {
    up = await protectedUpstream();
    issuer = await testIssuer(ISS, AUD);
    tokens.admin = await issuer.mint({ scope: 'manifold:admin tools:*' }, 'ops');
    tokens.alice = await issuer.mint({ scope: 'tools:*' }, 'alice');
    tokens.bob = await issuer.mint({ scope: 'tools:*' }, 'bob');
    tokens.carol = await issuer.mint({ scope: 'tools:*' }, 'carol');
    gw = await startTestGateway(
      {
        mcpServers: { gh: { url: up.ps.url, auth: 'user' } },
        gateway: {
          allowedHosts: ['127.0.0.1'],
          auth: { ...issuer.auth },
          oauth: { secret: SECRET },
        },
      },
      { waitReady: true },
    );
    // The catalog is listed with the deployment's identity (the lead's decision 3): the operator signs in once.
    const begun = await adminLogin(gw, 'gh', tokens.admin);
    expect(begun.status).toBe(200);
    const done = await browse(begun.body.authorizationUrl as string, {
      callback: callbackOf(gw),
      user: 'ops',
    });
    expect(done.status).toBe(200);
    await eventually(() => gw.gateway.pool.get('gh')?.state === 'ready', 'catalog listed');
    await eventually(() => gw.gateway.catalog.entries.some((e) => e.name === 'gh__whoami'), 'whoami listed');
  });

  afterAll(async () => {
    await gw?.stop();
    await up?.ps.close();
    await up?.as.close();
  });

  const URL_CAPS = { elicitation: { url: {} } };

  it('a legacy client gets -32042 with its own login link; after signing in, its calls are its own', async () => {
    const client = new LegacyClient(
      { name: 'v1-alice', version: '1.0.0' },
      { capabilities: URL_CAPS as never },
    );
    await client.connect(
      new LegacyTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.alice}` } },
      }),
    );
    try {
      const err = await client.callTool({ name: 'gh__whoami', arguments: {} }).then(
        () => undefined,
        (e: unknown) => e as { code?: number; data?: { elicitations?: Obj[] } },
      );
      expect(err?.code).toBe(-32042);
      const elicitation = err?.data?.elicitations?.[0] as Obj;
      expect(elicitation).toMatchObject({ mode: 'url' });
      expect(typeof elicitation.elicitationId).toBe('string');
      const done = await browse(elicitation.url as string, { callback: callbackOf(gw), user: 'alice' });
      expect(done.status).toBe(200);
      const r = await client.callTool({ name: 'gh__whoami', arguments: {} });
      expect(JSON.parse(textOf(r)).sub).toBe('alice');
    } finally {
      await client.close();
    }
  });

  it('a modern client gets input_required with a URL elicitation; the SDK retries once the user signed in', async () => {
    const asked: Obj[] = [];
    const client = new ModernClient(
      { name: 'v2-bob', version: '1.0.0' },
      { capabilities: URL_CAPS as never, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    client.setRequestHandler('elicitation/create', async (r) => {
      const params = r.params as Obj;
      asked.push(params);
      const done = await browse(params.url as string, { callback: callbackOf(gw), user: 'bob' });
      expect(done.status).toBe(200);
      return { action: 'accept' } as never;
    });
    await client.connect(
      new ModernTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.bob}` } },
      }),
    );
    try {
      const r = await client.callTool({ name: 'gh__whoami', arguments: {} });
      expect(asked).toHaveLength(1);
      expect(asked[0]).toMatchObject({ mode: 'url' });
      expect(JSON.parse(textOf(r)).sub).toBe('bob');
    } finally {
      await client.close();
    }
  });

  it("the two subjects' tokens never cross, on either era", async () => {
    const legacyBob = new LegacyClient({ name: 'v1-bob', version: '1.0.0' });
    await legacyBob.connect(
      new LegacyTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.bob}` } },
      }),
    );
    const modernAlice = new ModernClient(
      { name: 'v2-alice', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await modernAlice.connect(
      new ModernTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.alice}` } },
      }),
    );
    try {
      for (let i = 0; i < 2; i++) {
        expect(JSON.parse(textOf(await legacyBob.callTool({ name: 'gh__whoami', arguments: {} }))).sub).toBe(
          'bob',
        );
        expect(
          JSON.parse(textOf(await modernAlice.callTool({ name: 'gh__whoami', arguments: {} }))).sub,
        ).toBe('alice');
      }
    } finally {
      await legacyBob.close();
      await modernAlice.close();
    }
  });

  it("an admin signs bob out (by his key); alice's calls go on with her own token", async () => {
    const admin = { authorization: `Bearer ${tokens.admin}` };
    const listed = (await (
      await fetch(new URL('/admin/servers/gh/auth', gw.url), { headers: admin })
    ).json()) as {
      subjects: { subject: string }[];
    };
    expect(JSON.stringify(listed)).not.toMatch(/eyJ/);
    const bob = listed.subjects.find((s) => s.subject.includes('bob'))?.subject;
    expect(bob).toBeDefined();
    const out = await fetch(
      new URL(`/admin/servers/gh/logout?subject=${encodeURIComponent(bob ?? '')}`, gw.url),
      {
        method: 'POST',
        headers: admin,
      },
    );
    expect(out.status).toBe(200);
    const alice = new ModernClient(
      { name: 'v2-alice', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await alice.connect(
      new ModernTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.alice}` } },
      }),
    );
    const bobClient = new LegacyClient({ name: 'v1-bob', version: '1.0.0' });
    await bobClient.connect(
      new LegacyTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.bob}` } },
      }),
    );
    try {
      expect(JSON.parse(textOf(await alice.callTool({ name: 'gh__whoami', arguments: {} }))).sub).toBe(
        'alice',
      );
      const r = await bobClient.callTool({ name: 'gh__whoami', arguments: {} });
      expect(r.isError).toBe(true);
      expect(textOf(r)).toMatch(/needs you to sign in/);
    } finally {
      await alice.close();
      await bobClient.close();
    }
  });

  it('a client without URL elicitation gets an isError result naming the link', async () => {
    const client = new LegacyClient({ name: 'v1-carol', version: '1.0.0' });
    await client.connect(
      new LegacyTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.carol}` } },
      }),
    );
    try {
      const r = await client.callTool({ name: 'gh__whoami', arguments: {} });
      expect(r.isError).toBe(true);
      expect(textOf(r)).toMatch(/server gh needs you to sign in: http:\/\/127\.0\.0\.1:\d+\//i);
    } finally {
      await client.close();
    }
  });
});
