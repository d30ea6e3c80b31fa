import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
import { connectLegacy, connectModern, resultText } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { eventually } from '../helpers/harness.js';
import { browse } from '../helpers/oauth-browser.js';
import { type RunningWorker, startWorker } from '../helpers/workerd.js';

/**
 * #19 on Workers, mode `gateway`, in real workerd (Miniflare) against a real authorization server
 * (oidc-provider, test/fixtures/oauth-as.mjs) and a real protected MCP server of both eras
 * (test/fixtures/protected-server.mjs), both on loopback and named in `allowedHosts`. The operator
 * signs in through `POST /admin/servers/gh/login` on the Worker and the callback on the Worker;
 * the token is kept in gh's upstream object. A v2 client's call is made from the isolate (which
 * asks the object for the token), a v1 client's from its tenant object; both reach the server as
 * the signed-in user. Expiry: refreshed in the object. Logout: the calls stop carrying a token.
 */

type Obj = Record<string, unknown>;
const SECRET = 'an-oauth-secret-of-at-least-32-characters!!';

const textOf = resultText;

const subOf = (r: unknown) => {
  try {
    return (JSON.parse(textOf(r)) as { sub?: string }).sub;
  } catch {
    return undefined;
  }
};

/**
 * `route`: the default layout (isolates and owner-sharded objects), or `MANIFOLD_ROUTE=object`
 * (the whole gateway in one object, which owns every server's credentials itself).
 */
function gatewayMode(route: 'isolate' | 'object') {
  describe(`workers (${route}): upstream OAuth, mode gateway (#19)`, () => {
    let ps: Awaited<ReturnType<typeof startProtectedServer>>;
    let as: Awaited<ReturnType<typeof startAuthServer>>;
    let worker: RunningWorker;
    let dir: string;
    let base: string;

    const healthAuth = async () => {
      const h = (await (await fetch(`${base}/healthz`)).json()) as { upstreams: Obj[] };
      return (h.upstreams.find((u) => u.name === 'gh')?.auth ?? {}) as Obj;
    };
    const admin = async (action: 'login' | 'logout', server = 'gh') => {
      const res = await fetch(`${base}/admin/servers/${server}/${action}`, { method: 'POST' });
      return { status: res.status, body: (await res.json()) as Obj };
    };
    const signIn = async () => {
      const begun = await admin('login');
      expect(begun.status).toBe(200);
      expect(begun.body.expiresAt).toBeGreaterThan(Date.now());
      const done = await browse(begun.body.authorizationUrl as string, {
        callback: `${base}/oauth/callback`,
        user: 'alice',
      });
      expect(done.status).toBe(200);
      expect(done.body).toContain('Signed in to gh');
      expect(done.body).not.toMatch(/eyJ/);
      return done;
    };
    /** A v2 client's whoami (the isolate's direct path), once the isolate's snapshot lists the tool. */
    const modernWhoami = async () => {
      const c = await connectModern(worker.url, undefined, { name: 'oauth-v2' });
      try {
        return await c.client.callTool({ name: 'gh__whoami', arguments: {} });
      } finally {
        await c.close();
      }
    };
    const legacyWhoami = async () => {
      const c = await connectLegacy(worker.url, undefined, 'oauth-v1');
      try {
        return await c.client.callTool({ name: 'gh__whoami', arguments: {} });
      } finally {
        await c.close();
      }
    };

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'manifold-do-oauth-'));
      ps = await startProtectedServer({ port: 0 });
      as = await startAuthServer({ port: 0, resource: ps.resource, accessTokenTtl: 4 });
      ps.setIssuer(as.issuer);
      worker = await startWorker({
        config: {
          mcpServers: { gh: { url: ps.url, auth: 'gateway' } },
          gateway: {
            auth: false,
            logLevel: 'error',
            allowedHosts: [new URL(ps.url).host, new URL(as.issuer).host],
            oauth: { secret: SECRET, refreshSkewSeconds: 0 },
          },
        },
        vars: {
          MANIFOLD_SNAPSHOT_TTL_MS: '1000',
          ...(route === 'object' ? { MANIFOLD_ROUTE: 'object' } : {}),
        },
        persist: dir,
      });
      base = new URL(worker.url).origin;
    });

    afterAll(async () => {
      await worker?.stop();
      await ps?.close();
      await as?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('boots (mode gateway is no longer refused) and needs a login first', async () => {
      await eventually(async () => (await healthAuth()).state === 'needs-login', 'needs-login on /healthz');
      expect((await admin('login', 'nope')).status).toBe(404);
    });

    it('a forged or missing state at the callback is 400 state-invalid, nothing echoed', async () => {
      const forged = await fetch(`${base}/oauth/callback?code=abc&state=v1.forged.state`);
      expect(forged.status).toBe(400);
      expect(await forged.text()).toBe('state-invalid\n');
      const none = await fetch(`${base}/oauth/callback?code=abc`);
      expect(none.status).toBe(400);
    });

    it('the operator signs in on the Worker; a v2 call (isolate) and a v1 call (objects) run as alice', async () => {
      const done = await signIn();
      expect(done.request.get('resource')).toBe(ps.resource);
      expect(done.request.get('code_challenge_method')).toBe('S256');
      expect(done.request.get('redirect_uri')).toBe(`${base}/oauth/callback`);

      // The same callback again is a replay: the object claimed its state once.
      const replay = await fetch(done.callbackUrl.href);
      expect(replay.status).toBe(400);
      expect(await replay.text()).toContain('state-invalid');

      let modern: unknown;
      await eventually(async () => {
        modern = await modernWhoami().catch(() => undefined);
        return subOf(modern) === 'alice';
      }, 'a v2 call as alice');
      expect(subOf(await legacyWhoami())).toBe('alice');
      // gh is a modern upstream in its object's snapshot, so a v2 client's call is the isolate's own
      // (route.ts): the token it carried came from the object's credential RPC.
      if (route === 'isolate')
        await eventually(async () => {
          const snap = await worker.objectFetch('UPSTREAMS', 'gh', '/__manifold/snapshot', {
            'x-manifold-server': 'gh',
          });
          return ((await snap.json()) as Obj).era === 'modern';
        }, 'gh is modern in its snapshot');
      expect(ps.log.events.filter((e) => e.kind === 'ok' && e.sub === 'alice').length).toBeGreaterThan(0);
      const auth = await healthAuth();
      expect(auth).toMatchObject({ state: 'ready', issuer: as.issuer });
      expect(JSON.stringify(auth)).not.toMatch(/eyJ/);
    });

    it('an expired access token is refreshed (in the object) before the next call of either era', async () => {
      const before = as.events.counts.refresh_token;
      const exp = Number((await healthAuth()).expiresAt);
      expect(exp).toBeGreaterThan(0);
      await eventually(() => Date.now() > exp + 50, 'the access token expired');
      expect(subOf(await modernWhoami())).toBe('alice');
      expect(subOf(await legacyWhoami())).toBe('alice');
      // One refresh token rotation served both places (single-flight in the object).
      expect(as.events.counts.refresh_token - before).toBe(1);
      await eventually(
        async () => Number((await healthAuth()).expiresAt) > exp,
        'the isolate sees the new expiry',
      );
    });

    it('a refused token that cannot be renewed: ERR_UPSTREAM_AUTH login-required for both eras, never a 500', async () => {
      await as.revokeAll();
      ps.rejectAll(true);
      try {
        const modern = await modernWhoami().then(
          () => undefined,
          (e: unknown) => e as { code?: number; data?: Obj },
        );
        expect(modern?.data).toMatchObject({
          manifold: 'ERR_UPSTREAM_AUTH',
          rule: 'login-required',
          server: 'gh',
        });
        const legacy = await legacyWhoami().then(
          () => undefined,
          (e: unknown) => e as { code?: number; data?: Obj },
        );
        expect(legacy?.code).toBe(-32015);
        expect(legacy?.data).toMatchObject({ manifold: 'ERR_UPSTREAM_AUTH', rule: 'login-required' });
        expect(await healthAuth()).toMatchObject({ state: 'needs-login' });
      } finally {
        ps.rejectAll(false);
      }
      // A new login brings the calls back (the logout test below starts from it).
      await signIn();
      await eventually(
        async () => subOf(await modernWhoami().catch(() => undefined)) === 'alice',
        'alice again',
      );
    });

    it('the client metadata route is the object’s (404 without clientMetadataUrl)', async () => {
      const res = await fetch(`${base}/oauth/client-metadata.json`);
      expect(res.status).toBe(404);
    });

    it('logout forgets the token: calls no longer run as alice, and /healthz says needs-login', async () => {
      const out = await admin('logout');
      expect(out.status).toBe(200);
      expect(out.body).toMatchObject({ loggedOut: 'gh' });
      await eventually(async () => (await healthAuth()).state === 'needs-login', 'needs-login again');
      await eventually(
        async () => subOf(await modernWhoami().catch(() => undefined)) !== 'alice',
        'a v2 call without the token',
      );
      expect(subOf(await legacyWhoami().catch(() => undefined))).not.toBe('alice');
    });
  });
}

gatewayMode('isolate');
gatewayMode('object');

/**
 * Mode `user` on Workers: each caller's token is kept in the server's object under their principal
 * key; the catalog is listed with the deployment's identity (the operator signs in once). A call
 * of a `user` server goes to the caller's tenant object (its own instance there), which asks the
 * server's object whether the caller has a token and, if not, for the caller's own login link.
 */
describe('workers: upstream OAuth, mode user (#19)', () => {
  let ps: Awaited<ReturnType<typeof startProtectedServer>>;
  let as: Awaited<ReturnType<typeof startAuthServer>>;
  let worker: RunningWorker;
  let dir: string;
  let base: string;
  const tokens: Record<string, string> = {};
  let config: Record<string, unknown>;
  const ISS = 'https://idp.test';
  const AUD = 'manifold-test';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-do-oauth-user-'));
    ps = await startProtectedServer({ port: 0 });
    as = await startAuthServer({ port: 0, resource: ps.resource, accessTokenTtl: 60 });
    ps.setIssuer(as.issuer);
    const issuer = await testIssuer(ISS, AUD);
    tokens.ops = await issuer.mint({ scope: 'manifold:admin tools:*' }, 'ops');
    tokens.alice = await issuer.mint({ scope: 'tools:*' }, 'alice');
    tokens.carol = await issuer.mint({ scope: 'tools:*' }, 'carol');
    tokens.bob = await issuer.mint({ scope: 'tools:*' }, 'bob');
    tokens.dave = await issuer.mint({ scope: 'tools:*' }, 'dave');
    config = {
      mcpServers: { gh: { url: ps.url, auth: 'user' } },
      gateway: {
        auth: { ...issuer.auth },
        logLevel: 'error',
        allowedHosts: [new URL(ps.url).host, new URL(as.issuer).host],
        oauth: { secret: SECRET },
      },
    };
    worker = await startWorker({ config, vars: { MANIFOLD_SNAPSHOT_TTL_MS: '1000' }, persist: dir });
    base = new URL(worker.url).origin;
    const begun = await fetch(`${base}/admin/servers/gh/login`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.ops}` },
    });
    expect(begun.status).toBe(200);
    const { authorizationUrl } = (await begun.json()) as { authorizationUrl: string };
    const done = await browse(authorizationUrl, { callback: `${base}/oauth/callback`, user: 'ops' });
    expect(done.status).toBe(200);
  });

  afterAll(async () => {
    await worker?.stop();
    await ps?.close();
    await as?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const modernCall = async (token: string) => {
    const c = await connectModern(worker.url, token, { name: 'user-v2' });
    try {
      return await c.client.callTool({ name: 'gh__whoami', arguments: {} });
    } finally {
      await c.close();
    }
  };

  it('a v2 caller without a token gets their own link (isError text); after signing in, calls are theirs', async () => {
    let first: unknown;
    await eventually(async () => {
      first = await modernCall(tokens.alice!).catch(() => undefined);
      return /needs you to sign in/.test(textOf(first));
    }, 'the login text for alice');
    expect((first as { isError?: boolean }).isError).toBe(true);
    const url = /sign in: (\S+) \(open it/.exec(textOf(first))?.[1];
    expect(url).toBeDefined();
    const done = await browse(url!, { callback: `${base}/oauth/callback`, user: 'alice' });
    expect(done.status).toBe(200);
    expect(subOf(await modernCall(tokens.alice!))).toBe('alice');
  });

  it('a v2 caller with URL elicitation gets an MRTR input_required; the SDK retries once bob signed in', async () => {
    const asked: Obj[] = [];
    const client = new ModernClient(
      { name: 'v2-bob', version: '1.0.0' },
      {
        capabilities: { elicitation: { url: {} } } as never,
        versionNegotiation: { mode: { pin: '2026-07-28' } },
      },
    );
    client.setRequestHandler('elicitation/create', async (r) => {
      const params = r.params as Obj;
      asked.push(params);
      const done = await browse(params.url as string, { callback: `${base}/oauth/callback`, user: 'bob' });
      expect(done.status).toBe(200);
      return { action: 'accept' } as never;
    });
    await client.connect(
      new ModernTransport(new URL(worker.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.bob}` } },
      }),
    );
    try {
      const r = await client.callTool({ name: 'gh__whoami', arguments: {} });
      expect(asked).toHaveLength(1);
      expect(asked[0]).toMatchObject({ mode: 'url' });
      expect(subOf(r)).toBe('bob');
    } finally {
      await client.close();
    }
  });

  it('a v1 caller with URL elicitation gets -32042 with its own link, never alice’s token', async () => {
    const client = new LegacyClient(
      { name: 'v1-carol', version: '1.0.0' },
      {
        capabilities: { elicitation: { url: {} } } as never,
      },
    );
    await client.connect(
      new LegacyTransport(new URL(worker.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.carol}` } },
      }),
    );
    try {
      const err = await client.callTool({ name: 'gh__whoami', arguments: {} }).then(
        () => undefined,
        (e: unknown) => e as { code?: number; data?: { elicitations?: Obj[] } },
      );
      expect(err?.code).toBe(-32042);
      const url = err?.data?.elicitations?.[0]?.url as string;
      const done = await browse(url, { callback: `${base}/oauth/callback`, user: 'carol' });
      expect(done.status).toBe(200);
      const r = await client.callTool({ name: 'gh__whoami', arguments: {} });
      expect(subOf(r)).toBe('carol');
    } finally {
      await client.close();
    }
    // Alice's calls are still alice's.
    expect(subOf(await modernCall(tokens.alice!))).toBe('alice');
  });

  it('the admin listing (served by the server’s object) names who is signed in and carries no token; logout ?subject= signs one caller out', async () => {
    const get = async () => {
      const res = await fetch(`${base}/admin/servers/gh/auth`, {
        headers: { authorization: `Bearer ${tokens.ops}` },
      });
      expect(res.status).toBe(200);
      return (await res.json()) as { mode?: string; subjects: { subject: string }[] };
    };
    const listed = await get();
    expect(listed.mode).toBe('user');
    const keys = listed.subjects.map((x) => x.subject);
    expect(keys.length).toBeGreaterThanOrEqual(4); // ops (''), alice, bob, carol
    expect(JSON.stringify(listed)).not.toMatch(/eyJ/);
    const carol = keys.find((k) => k.includes('carol'));
    expect(carol).toBeDefined();
    const out = await fetch(`${base}/admin/servers/gh/logout?subject=${encodeURIComponent(carol!)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.ops}` },
    });
    expect(out.status).toBe(200);
    expect((await get()).subjects.map((x) => x.subject)).not.toContain(carol);
    // Her tenant object keeps her token no longer than a snapshot: her next calls ask her to sign in.
    await eventually(
      async () => /needs you to sign in/.test(textOf(await modernCall(tokens.carol!).catch(() => undefined))),
      'carol signed out everywhere',
    );
    // A non-admin caller is refused.
    const refused = await fetch(`${base}/admin/servers/gh/auth`, {
      headers: { authorization: `Bearer ${tokens.alice}` },
    });
    expect(refused.status).toBe(403);
  });

  it('after a restart (new objects, same storage) the tokens are still there, and a new caller’s link names the public origin', async () => {
    await worker.stop();
    worker = await startWorker({ config, vars: { MANIFOLD_SNAPSHOT_TTL_MS: '1000' }, persist: dir });
    base = new URL(worker.url).origin;
    await eventually(
      async () => subOf(await modernCall(tokens.alice!).catch(() => undefined)) === 'alice',
      'alice’s stored token after the restart',
    );
    // dave's login is begun from his tenant object: the server's object saw no public request yet.
    const first = await modernCall(tokens.dave!);
    const url = /sign in: (\S+) \(open it/.exec(textOf(first))?.[1];
    expect(new URL(url!).searchParams.get('redirect_uri')).toBe(`${base}/oauth/callback`);
    const done = await browse(url!, { callback: `${base}/oauth/callback`, user: 'dave' });
    expect(done.status).toBe(200);
    expect(subOf(await modernCall(tokens.dave!))).toBe('dave');
  });
});

describe('workers: static re-read (#19)', () => {
  const made: string[] = [];
  afterAll(() => {
    for (const d of made) rmSync(d, { recursive: true, force: true });
  });

  it('static: a 401 reads the binding again (same value: the refusal stands, cleanly); a new deployment with the rotated secret calls again', async () => {
    const keyDir = mkdtempSync(join(tmpdir(), 'static-key-'));
    made.push(keyDir);
    const keyFile = join(keyDir, 'key');
    writeFileSync(keyFile, 'key-one\n');
    const ps = await startProtectedServer({ port: 0, staticKeyFile: keyFile });
    const config = {
      mcpServers: { st: { url: ps.url, headers: { 'x-api-key': '${API_KEY}' } } },
      gateway: { auth: false, logLevel: 'error', allowedHosts: [new URL(ps.url).host] },
    };
    const persist = mkdtempSync(join(tmpdir(), 'manifold-do-static-'));
    made.push(persist);
    const call = async (url: string) => {
      const c = await connectModern(url, undefined, { name: 'static-v2' });
      try {
        return await c.client.callTool({ name: 'st__whoami', arguments: {} });
      } finally {
        await c.close();
      }
    };
    let worker = await startWorker({ config, vars: { API_KEY: 'key-one' }, persist });
    try {
      let first: unknown;
      await eventually(async () => {
        first = await call(worker.url).catch(() => undefined);
        return subOf(first) === 'static-key';
      }, 'a call with the static key');
      // The key is rotated at the server; the binding still holds the old one.
      writeFileSync(keyFile, 'key-two\n');
      const refused = await call(worker.url).then(
        (r) => ({ r, e: undefined }),
        (e: unknown) => ({ r: undefined, e: e as { code?: number; message?: string } }),
      );
      expect(subOf(refused.r)).toBeUndefined();
      if (refused.e) expect(refused.e.code).not.toBe(-32603);
      else expect((refused.r as { isError?: boolean }).isError).toBe(true);
      expect(JSON.stringify(refused)).not.toContain('key-one');
      await worker.stop();
      // `wrangler secret put API_KEY` is a new deployment: same objects' storage, the new binding.
      worker = await startWorker({ config, vars: { API_KEY: 'key-two' }, persist });
      await eventually(
        async () => subOf(await call(worker.url).catch(() => undefined)) === 'static-key',
        'a call with the rotated key',
      );
    } finally {
      await worker.stop();
      await ps.close();
    }
  });
});
