import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { type AuthServer, startAuthServer } from '../fixtures/oauth-as.mjs';
import { type ProtectedServer, startProtectedServer } from '../fixtures/protected-server.mjs';
import { type AnyHandle, connectEra, resultText } from '../helpers/clients.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { browse } from '../helpers/oauth-browser.js';

/**
 * #19 end to end, what is kept and what is never shown: a `static` server's secret rotated
 * through a NAME_FILE and picked up after a 401 with no restart and no key in the logs; tokens
 * and client secrets never in the SQLite file, /healthz or the status JSON; logout revokes at
 * the authorization server and forgets the row. Both downstream eras.
 */

type Obj = Record<string, unknown>;
const SECRET = 'an-oauth-secret-of-at-least-32-characters!!';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await Promise.resolve(c()).catch(() => {});
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mf-oauth-secrets-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

type AnyClient = AnyHandle['client'];

/** A v1 (2025-11-25) or v2 (2026-07-28) SDK client of the gateway, closed after the test. */
async function client(gw: TestGateway, era: 'v1' | 'v2'): Promise<AnyClient> {
  const h = await connectEra(gw.url, era);
  cleanups.push(() => h.close());
  return h.client;
}

const textOf = resultText;

/** The parsed result of a whoami call; an error or an isError result throws. */
async function whoami(c: AnyClient): Promise<Obj> {
  const r = await c.callTool({ name: 'gh__whoami', arguments: {} });
  if (r.isError) throw new Error(`isError: ${textOf(r)}`);
  return JSON.parse(textOf(r)) as Obj;
}

async function upstreamOf(gw: TestGateway, server: string): Promise<Obj> {
  const body = (await (await fetch(new URL('/healthz', gw.url))).json()) as { upstreams: Obj[] };
  return body.upstreams.find((u) => u.name === server) ?? {};
}

describe('static: the secret is read again after a 401', () => {
  it('a key rotated in its NAME_FILE is picked up with no restart, and neither key is ever logged (v1, v2)', async () => {
    const dir = tempDir();
    const serverKey = join(dir, 'accepted-key');
    const gatewayKey = join(dir, 'gh-key');
    const KEY1 = 'static-key-one-4f1d2c7b9a';
    const KEY2 = 'static-key-two-8e3a5d0c6b';
    writeFileSync(serverKey, `${KEY1}\n`);
    writeFileSync(gatewayKey, `${KEY1}\n`);
    const ps = await startProtectedServer({ port: 0, staticKeyFile: serverKey });
    cleanups.push(() => ps.close());
    // The runtime re-read goes through Platform.readSecret, which reads this process's environment.
    const saved = process.env.GH_KEY_FILE;
    process.env.GH_KEY_FILE = gatewayKey;
    cleanups.push(() => {
      if (saved === undefined) delete process.env.GH_KEY_FILE;
      else process.env.GH_KEY_FILE = saved;
    });
    const gw = await startTestGateway(
      {
        mcpServers: { gh: { url: ps.url, headers: { 'x-api-key': '${GH_KEY}' } } },
        gateway: { allowedHosts: ['127.0.0.1'] },
      },
      // What the Node loader resolves from GH_KEY_FILE at start (deploy/node/secrets.ts).
      { env: { GH_KEY: KEY1 } },
    );
    cleanups.push(() => gw.stop());
    const v1 = await client(gw, 'v1');
    expect(await whoami(v1)).toMatchObject({ sub: 'static-key' });

    // Rotation: the server now accepts only the new key, and the secret file holds it.
    writeFileSync(serverKey, `${KEY2}\n`);
    writeFileSync(gatewayKey, `${KEY2}\n`);
    const v2 = await client(gw, 'v2');
    expect(await whoami(v2)).toMatchObject({ sub: 'static-key' });
    expect(await whoami(v1)).toMatchObject({ sub: 'static-key' });
    // The old key was refused once, then the new one accepted.
    expect(ps.log.events.filter((e) => e.kind === '401').length).toBeGreaterThanOrEqual(1);

    const logs = JSON.stringify(gw.logs);
    expect(logs).not.toContain(KEY1);
    expect(logs).not.toContain(KEY2);
    expect(gw.logs.some((l) => l.event === 'oauth.static_reread')).toBe(true);
  });
});

describe('credentials at rest and on show', () => {
  let as: AuthServer;
  let ps: ProtectedServer;

  it('no access token, refresh token or client secret is in the SQLite file, /healthz or status.json; logout revokes and forgets (v1, v2)', async () => {
    const dir = tempDir();
    ps = await startProtectedServer({ port: 0 });
    cleanups.push(() => ps.close());
    as = await startAuthServer({ port: 0, resource: ps.resource, accessTokenTtl: 600 });
    cleanups.push(() => as.close());
    ps.setIssuer(as.issuer);
    // Refresh tokens are opaque and only the AS sees them: collect them as it saves them.
    const refreshTokens: string[] = [];
    (as.provider as { on(e: string, f: (t: { jti: string }) => void): void }).on(
      'refresh_token.saved',
      (t) => {
        refreshTokens.push(t.jti);
      },
    );
    const dbPath = join(dir, 'state.db');
    const gw = await startTestGateway(
      {
        mcpServers: { gh: { url: ps.url, auth: 'gateway' } },
        gateway: {
          allowedHosts: ['127.0.0.1'],
          store: { path: dbPath },
          oauth: { secret: SECRET },
        },
      },
      { waitReady: false },
    );
    cleanups.push(() => gw.stop());
    await eventually(async () => {
      const u = await upstreamOf(gw, 'gh');
      return (u.auth as Obj | undefined)?.state === 'needs-login' && u.state === 'backoff';
    }, 'gh tried and needing a login');
    const begun = await fetch(new URL('/admin/servers/gh/login', gw.url), { method: 'POST' });
    expect(begun.status).toBe(200);
    const { authorizationUrl } = (await begun.json()) as { authorizationUrl: string };
    const done = await browse(authorizationUrl, { callback: `${new URL(gw.url).origin}/oauth/callback` });
    expect(done.status).toBe(200);
    expect(done.body).not.toContain(done.callbackUrl.searchParams.get('code') ?? 'no code');
    await eventually(() => gw.gateway.pool.get('gh')?.state === 'ready', 'gh ready');
    expect(await whoami(await client(gw, 'v1'))).toMatchObject({ sub: 'alice' });
    expect(await whoami(await client(gw, 'v2'))).toMatchObject({ sub: 'alice' });

    const secrets = [
      ...ps.log.tokens,
      ...refreshTokens,
      ...as.events.registrations
        .map((r) => r.client_secret)
        .filter((s): s is string => typeof s === 'string'),
      SECRET,
    ];
    expect(ps.log.tokens.length).toBeGreaterThan(0);
    expect(refreshTokens.length).toBeGreaterThan(0);

    // The rows exist (sealed), and the file's bytes hold none of the secrets.
    const db = new Database(dbPath, { readonly: true });
    cleanups.push(() => db.close());
    expect((db.prepare('SELECT COUNT(*) AS n FROM oauth_tokens').get() as { n: number }).n).toBe(1);
    const files = [dbPath, `${dbPath}-wal`, `${dbPath}-shm`].filter((f) => existsSync(f));
    for (const f of files) {
      const bytes = readFileSync(f).toString('latin1');
      for (const s of secrets) expect(bytes.includes(s), `${f} holds a secret`).toBe(false);
    }

    const shown = [
      await (await fetch(new URL('/healthz', gw.url))).text(),
      await (await fetch(new URL('/status.json', gw.url))).text(),
      JSON.stringify(gw.logs),
    ];
    for (const text of shown) for (const s of secrets) expect(text.includes(s)).toBe(false);
    expect(shown[1]).toContain('gh');

    // Logout: revoked at the AS (RFC 7009), forgotten here, and the server needs a login again.
    const revokedBefore = as.events.counts.revocation;
    const out = await fetch(new URL('/admin/servers/gh/logout', gw.url), { method: 'POST' });
    expect(out.status).toBe(200);
    expect(as.events.counts.revocation).toBeGreaterThan(revokedBefore);
    expect((db.prepare('SELECT COUNT(*) AS n FROM oauth_tokens').get() as { n: number }).n).toBe(0);
    expect(((await upstreamOf(gw, 'gh')).auth as Obj).state).toBe('needs-login');
    const after = await client(gw, 'v2');
    await expect(whoami(after)).rejects.toThrow();
  });
});
