import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/upstream/oauth/box.js';
import { discoverAuthorizationServer } from '../../src/upstream/oauth/discovery.js';
import {
  openCallback,
  redeemCode,
  STATE_AAD,
  selectScopes,
  startAuthorization,
} from '../../src/upstream/oauth/flow.js';
import {
  chooseAuthMethod,
  clientMetadataDocument,
  obtainClient,
} from '../../src/upstream/oauth/registration.js';
import { clientCredentials, refresh, revoke, TokenEndpointError } from '../../src/upstream/oauth/token.js';
import {
  type AsMetadata,
  type OAuthClient,
  OAuthError,
  type PendingFlow,
  type ResourceMetadata,
} from '../../src/upstream/oauth/types.js';
import { type AuthServer, startAuthServer } from '../fixtures/oauth-as.mjs';
import { rule } from '../helpers/oauth-rule.js';

const RESOURCE = 'http://127.0.0.1:7/mcp';
const REDIRECT = 'http://127.0.0.1:9/oauth/callback';
const CIMD_URL = 'https://manifold.test/oauth/client-metadata.json';
const NOW = () => Date.now();

/** The user's browser: follows redirects with a cookie jar until the client's redirect URI. */
async function browse(start: string, user: string | null = 'alice'): Promise<URLSearchParams> {
  const jar = new Map<string, string>();
  let url = start;
  for (let i = 0; i < 12; i++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const headers: Record<string, string> = { cookie };
    if (user) headers['x-test-user'] = user;
    const res = await fetch(url, { redirect: 'manual', headers });
    for (const c of res.headers.getSetCookie()) {
      const [kv = ''] = c.split(';');
      const at = kv.indexOf('=');
      jar.set(kv.slice(0, at).trim(), kv.slice(at + 1));
    }
    const location = res.headers.get('location');
    await res.body?.cancel();
    if (!location) throw new Error(`the browser stopped at ${res.status}`);
    const next = new URL(location, url).toString();
    if (next.startsWith(REDIRECT)) return new URL(next).searchParams;
    url = next;
  }
  throw new Error('too many redirects');
}

function prmOf(scopesSupported?: string[]): ResourceMetadata {
  return {
    url: 'x',
    resource: RESOURCE,
    authorizationServers: ['x'],
    ...(scopesSupported ? { scopesSupported } : {}),
  };
}

function asOf(extra: Partial<AsMetadata> = {}): AsMetadata {
  return {
    issuer: 'https://as.example.com',
    authorizationEndpoint: 'https://as.example.com/authorize?tenant=t1',
    tokenEndpoint: 'https://as.example.com/token',
    issParameterSupported: false,
    cimdSupported: false,
    ...extra,
  };
}

let box: SecretBox;
beforeAll(async () => {
  box = await SecretBox.create(new TextEncoder().encode('x'.repeat(40)), 'manifold/upstream-credentials/v1');
});

describe('selectScopes (2026-07-28 Scope Selection Strategy, step-up, SEP-2207)', () => {
  const bearer = (scope?: string[]) => ({ scheme: 'bearer', params: {}, ...(scope ? { scope } : {}) });
  it('takes the challenge scope, else all of scopes_supported, else omits scope', () => {
    expect(selectScopes(bearer(['mcp:basic']), prmOf(['a', 'b']), asOf(), [], [])).toEqual(['mcp:basic']);
    expect(selectScopes(bearer(), prmOf(['a', 'b']), asOf(), [], [])).toEqual(['a', 'b']);
    expect(selectScopes(undefined, prmOf(['a', 'b']), asOf(), [], [])).toEqual(['a', 'b']);
    expect(selectScopes(bearer([]), prmOf(), asOf(), [], [])).toBeUndefined();
    expect(selectScopes(undefined, prmOf([]), asOf(), [], [])).toBeUndefined();
  });

  it('unites the previous request and the configured extras (step-up keeps what was granted)', () => {
    expect(
      selectScopes(bearer(['mcp:write']), prmOf(['mcp:basic']), asOf(), ['mcp:basic'], ['repo']),
    ).toEqual(['mcp:basic', 'mcp:write', 'repo']);
    expect(selectScopes(undefined, prmOf(), asOf(), [], ['repo'])).toEqual(['repo']);
  });

  it('adds offline_access only when the AS lists it, and never sends it otherwise', () => {
    const withOffline = asOf({ scopesSupported: ['mcp:basic', 'offline_access'] });
    expect(selectScopes(bearer(['mcp:basic']), prmOf(), withOffline, [], [])).toEqual([
      'mcp:basic',
      'offline_access',
    ]);
    expect(selectScopes(undefined, prmOf(), withOffline, [], [])).toEqual(['offline_access']);
    const without = asOf({ scopesSupported: ['mcp:basic'] });
    expect(
      selectScopes(
        bearer(['mcp:basic', 'offline_access']),
        prmOf(),
        without,
        ['offline_access'],
        ['offline_access'],
      ),
    ).toEqual(['mcp:basic']);
    expect(selectScopes(undefined, prmOf(), asOf(), [], [])).toBeUndefined();
  });
});

describe('startAuthorization and openCallback', () => {
  const client: OAuthClient = { clientId: 'cid', authMethod: 'none', source: 'dcr', redirectUri: REDIRECT };
  const params = {
    server: 'gh',
    subject: 'alice',
    issuer: 'https://as.example.com',
    resource: 'http://127.0.0.1:7',
    scopes: ['a', 'b'],
  };

  it('builds the authorization URL with PKCE S256, state, and resource exactly as PRM gave it', async () => {
    const now = 1_000_000;
    const { url, state, exp } = await startAuthorization(asOf(), client, params, box, 600_000, now);
    expect(exp).toBe(now + 600_000);
    const u = new URL(url);
    expect(u.origin + u.pathname).toBe('https://as.example.com/authorize');
    const q = Object.fromEntries(u.searchParams);
    expect(q).toMatchObject({
      tenant: 't1',
      response_type: 'code',
      client_id: 'cid',
      redirect_uri: REDIRECT,
      state,
      code_challenge_method: 'S256',
      resource: 'http://127.0.0.1:7',
      scope: 'a b',
    });
    expect(q.code_challenge).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const pending = (await box.open(state, STATE_AAD)) as PendingFlow;
    expect(pending).toMatchObject({
      v: 1,
      server: 'gh',
      subject: 'alice',
      issuer: 'https://as.example.com',
      clientId: 'cid',
    });
    expect(pending.verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(url).not.toContain(pending.verifier);
    const noScope = await startAuthorization(asOf(), client, { ...params, scopes: [] }, box, 1000, now);
    expect(new URL(noScope.url).searchParams.has('scope')).toBe(false);
  });

  it('refuses a flow whose issuer is not the validated metadata issuer', async () => {
    expect(
      await rule(startAuthorization(asOf(), client, { ...params, issuer: 'https://other' }, box, 1000, 0)),
    ).toBe('issuer-mismatch');
  });

  it('rejects a missing, forged, tampered, foreign or expired state', async () => {
    const now = 5_000;
    const { state } = await startAuthorization(asOf(), client, params, box, 1000, now);
    const q = (s: Record<string, string>) => new URLSearchParams(s);
    expect(await rule(openCallback(q({ code: 'c' }), box, now))).toBe('state-invalid');
    expect(await rule(openCallback(q({ code: 'c', state: 'v1.abc.def' }), box, now))).toBe('state-invalid');
    // The second-to-last character always carries 6 bits of the sealed bytes: replaced by another.
    const flipped = `${state.slice(0, -2)}${state.at(-2) === 'A' ? 'B' : 'A'}${state.slice(-1)}`;
    expect(flipped).not.toBe(state);
    expect(await rule(openCallback(q({ code: 'c', state: flipped }), box, now))).toBe('state-invalid');
    const other = await SecretBox.create(
      new TextEncoder().encode('y'.repeat(40)),
      'manifold/upstream-credentials/v1',
    );
    expect(await rule(openCallback(q({ code: 'c', state }), other, now))).toBe('state-invalid');
    // A sealed credential (another AAD) never opens as a state.
    const credential = await box.seal({ ...params, v: 1 }, 'gh\0alice\0https://as.example.com');
    expect(await rule(openCallback(q({ code: 'c', state: credential }), box, now))).toBe('state-invalid');
    expect(await rule(openCallback(q({ code: 'c', state }), box, now + 1000))).toBe('state-invalid');
    const ok = await openCallback(q({ code: 'c', state }), box, now + 999);
    expect(ok.code).toBe('c');
    expect(await rule(openCallback(q({ state }), box, now))).toBe('authorization-denied');
  });

  it('applies the RFC 9207 table by plain string comparison (2026-07-28 Authorization Response Validation)', async () => {
    const issuer = 'https://as.example.com';
    const run = async (advertised: boolean, iss: string | undefined, extra: Record<string, string> = {}) => {
      const { state } = await startAuthorization(
        asOf({ issParameterSupported: advertised }),
        client,
        params,
        box,
        1000,
        0,
      );
      const q = new URLSearchParams({ code: 'c', state, ...extra });
      if (iss !== undefined) q.set('iss', iss);
      try {
        await openCallback(q, box, 1);
        return 'proceed';
      } catch (e) {
        return e instanceof OAuthError ? e.rule : 'threw';
      }
    };
    expect(await run(true, issuer)).toBe('proceed');
    expect(await run(true, undefined)).toBe('iss-missing');
    expect(await run(true, 'https://evil.example.com')).toBe('iss-mismatch');
    expect(await run(false, issuer)).toBe('proceed');
    expect(await run(false, 'https://evil.example.com')).toBe('iss-mismatch');
    expect(await run(false, undefined)).toBe('proceed');
    for (const normalised of [`${issuer}/`, 'HTTPS://as.example.com', 'https://as.example.com:443', '']) {
      expect(await run(true, normalised)).toBe('iss-mismatch');
      expect(await run(false, normalised)).toBe('iss-mismatch');
    }
    // On a mismatch the error of the response is not acted on; on a match it is, by code only.
    expect(await run(true, 'https://evil.example.com', { error: 'access_denied' })).toBe('iss-mismatch');
    expect(await run(true, issuer, { error: 'access_denied' })).toBe('authorization-denied');
    const { state } = await startAuthorization(asOf(), client, params, box, 1000, 0);
    const denied = (await openCallback(
      new URLSearchParams({ state, error: 'access_denied', error_description: 'click <here> http://phish' }),
      box,
      1,
    ).catch((e: unknown) => e)) as OAuthError;
    expect(denied.message).toContain('access_denied');
    expect(denied.message).not.toContain('phish');
  });
});

describe('against oidc-provider', () => {
  let as: AuthServer;
  let meta: AsMetadata;
  let cimdServer: Server;
  let cimdOrigin: string;

  beforeAll(async () => {
    cimdServer = createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify(
          clientMetadataDocument({ url: CIMD_URL, clientName: 'Manifold', redirectUris: [REDIRECT] }),
        ),
      );
    });
    await new Promise<void>((r) => cimdServer.listen(0, '127.0.0.1', r));
    cimdOrigin = `http://127.0.0.1:${(cimdServer.address() as AddressInfo).port}`;
    as = await startAuthServer({
      resource: RESOURCE,
      cimd: true,
      cimdRewrite: (u) => u.replace('https://manifold.test', cimdOrigin),
    });
    meta = await discoverAuthorizationServer(fetch, as.issuer);
    for (const authMethod of ['client_secret_basic', 'client_secret_post', 'none'] as const) {
      await as.registerClient({
        clientId: `pre-${authMethod}`,
        ...(authMethod === 'none' ? {} : { clientSecret: `secret-of-${authMethod}-0123456789` }),
        authMethod,
        redirectUris: [REDIRECT],
      });
    }
  });
  afterAll(async () => {
    await as.close();
    cimdServer.closeAllConnections();
    await new Promise((r) => cimdServer.close(r));
  });

  function preClient(authMethod: OAuthClient['authMethod']): OAuthClient {
    return {
      clientId: `pre-${authMethod}`,
      ...(authMethod === 'none' ? {} : { clientSecret: `secret-of-${authMethod}-0123456789` }),
      authMethod,
      source: 'config',
      redirectUri: REDIRECT,
      issuer: as.issuer,
    };
  }

  async function login(client: OAuthClient, scopes: string[], user = 'alice') {
    const started = await startAuthorization(
      meta,
      client,
      { server: 'gh', subject: user, issuer: meta.issuer, resource: RESOURCE, scopes },
      box,
      60_000,
      NOW(),
    );
    const { pending, code } = await openCallback(await browse(started.url, user), box, NOW());
    return redeemCode(fetch, meta, client, pending, code, NOW());
  }

  it('registers with DCR (application_type, grant types, a confidential method) and signs in', async () => {
    const before = as.events.counts.registration;
    const { client, registered } = await obtainClient(fetch, meta, {
      redirectUri: REDIRECT,
      clientName: 'Manifold',
      grantTypes: ['authorization_code', 'refresh_token'],
    });
    expect(registered).toBe(true);
    expect(client).toMatchObject({
      issuer: as.issuer,
      source: 'dcr',
      authMethod: 'client_secret_basic',
      redirectUri: REDIRECT,
    });
    expect(client.clientSecret).toBeTruthy();
    expect(as.events.counts.registration).toBe(before + 1);
    expect(as.events.registrations.at(-1)).toMatchObject({
      application_type: 'native',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: 'client_secret_basic',
      client_name: 'Manifold',
    });
    const scopes = selectScopes(
      { scheme: 'bearer', params: {}, scope: ['repo:read'] },
      prmOf(['repo:read']),
      meta,
      [],
      [],
    ) as string[];
    expect(scopes).toEqual(['repo:read', 'offline_access']);
    const t = await login(client, scopes, 'bob');
    expect(as.events.lastAuthorization).toMatchObject({
      clientId: client.clientId,
      resource: RESOURCE,
      scope: 'repo:read offline_access',
    });
    expect(t).toMatchObject({ issuer: as.issuer, resource: RESOURCE, tokenType: 'Bearer' });
    expect(t.refreshToken).toBeTruthy();
    expect(t.expiresAt).toBeGreaterThan(NOW());
    const claims = decodeJwt(t.accessToken);
    expect(claims).toMatchObject({ iss: as.issuer, aud: RESOURCE, sub: 'bob', client_id: client.clientId });
    expect(String(claims.scope).split(' ')).toContain('repo:read');
  });

  it('registers an https redirect as a web application', async () => {
    const { client } = await obtainClient(fetch, meta, {
      redirectUri: 'https://gw.example.com/oauth/callback',
      clientName: 'Manifold',
      grantTypes: ['authorization_code', 'refresh_token'],
    });
    expect(client.redirectUri).toBe('https://gw.example.com/oauth/callback');
    expect(as.events.registrations.at(-1)?.application_type).toBe('web');
  });

  it('authenticates at the token endpoint with basic, post and none, as registered', async () => {
    for (const method of ['client_secret_basic', 'client_secret_post', 'none'] as const) {
      const t = await login(preClient(method), ['repo:read']);
      expect(decodeJwt(t.accessToken).client_id).toBe(`pre-${method}`);
    }
  });

  it('fails a code exchange with a wrong secret as token-failed, without the secret in the message', async () => {
    const wrong: OAuthClient = { ...preClient('client_secret_post'), clientSecret: 'not-the-secret-at-all' };
    const err = (await login(wrong, ['repo:read']).catch((e: unknown) => e)) as TokenEndpointError;
    expect(err).toBeInstanceOf(TokenEndpointError);
    expect(err.rule).toBe('token-failed');
    expect(err.error).toBe('invalid_client');
    expect(err.message).not.toContain('not-the-secret');
  });

  it('refreshes with rotation: the old refresh token is then refused with invalid_grant', async () => {
    const client = preClient('none');
    const t = await login(client, ['repo:read', 'repo:write']);
    const before = as.events.counts.refresh_token;
    const t2 = await refresh(fetch, meta, client, t, NOW());
    expect(as.events.counts.refresh_token).toBe(before + 1);
    expect(t2.accessToken).not.toBe(t.accessToken);
    expect(t2.refreshToken).toBeTruthy();
    expect(t2.refreshToken).not.toBe(t.refreshToken);
    expect(t2.resource).toBe(RESOURCE);
    expect(decodeJwt(t2.accessToken).aud).toBe(RESOURCE);
    const stale = (await refresh(fetch, meta, client, t, NOW()).catch(
      (e: unknown) => e,
    )) as TokenEndpointError;
    expect(stale).toBeInstanceOf(TokenEndpointError);
    expect(stale.rule).toBe('refresh-failed');
    expect(stale.error).toBe('invalid_grant');
    expect(stale.status).toBe(400);
    expect(await rule(refresh(fetch, meta, client, { ...t2, issuer: 'https://other' }, NOW()))).toBe(
      'issuer-mismatch',
    );
    expect(await rule(refresh(fetch, meta, client, { ...t2, refreshToken: undefined }, NOW()))).toBe(
      'refresh-failed',
    );
  });

  it('revokes the refresh and the access token (RFC 7009); the grant is gone after', async () => {
    const client = preClient('client_secret_basic');
    const t = await login(client, ['repo:read']);
    const before = as.events.counts.revocation;
    await revoke(fetch, meta, client, t);
    // The refresh token; oidc-provider answers unsupported_token_type for its JWT access tokens.
    expect(as.events.counts.revocation).toBe(before + 1);
    const after = (await refresh(fetch, meta, client, t, NOW()).catch(
      (e: unknown) => e,
    )) as TokenEndpointError;
    expect(after.error).toBe('invalid_grant');
    await expect(
      revoke(fetch, { ...meta, revocationEndpoint: undefined }, client, t),
    ).resolves.toBeUndefined();
  });

  it('gets a client_credentials token for the resource, with no refresh token', async () => {
    const client = preClient('client_secret_basic');
    const t = await clientCredentials(fetch, meta, client, RESOURCE, ['repo:read', 'offline_access'], NOW());
    expect(t.refreshToken).toBeUndefined();
    expect(t.scope).toEqual(['repo:read']);
    expect(decodeJwt(t.accessToken)).toMatchObject({ aud: RESOURCE, client_id: client.clientId });
    expect(as.events.counts.client_credentials).toBeGreaterThan(0);
    expect(
      await rule(clientCredentials(fetch, meta, client, 'http://127.0.0.1:7/other', undefined, NOW())),
    ).toBe('token-failed');
  });

  it('refuses to send a code to another issuer or for another client', async () => {
    const client = preClient('none');
    const started = await startAuthorization(
      meta,
      client,
      { server: 'gh', subject: 'alice', issuer: meta.issuer, resource: RESOURCE, scopes: ['repo:read'] },
      box,
      60_000,
      NOW(),
    );
    const { pending, code } = await openCallback(await browse(started.url), box, NOW());
    const grants = as.events.counts.authorization_code;
    expect(
      await rule(redeemCode(fetch, { ...meta, issuer: 'https://other' }, client, pending, code, NOW())),
    ).toBe('issuer-mismatch');
    expect(await rule(redeemCode(fetch, meta, preClient('client_secret_post'), pending, code, NOW()))).toBe(
      'state-invalid',
    );
    expect(as.events.counts.authorization_code).toBe(grants);
  });

  it('signs in with no scope at all (the AS applies its default)', async () => {
    const t = await login(preClient('none'), []);
    expect(as.events.lastAuthorization?.scope).toBeUndefined();
    expect(decodeJwt(t.accessToken)).toMatchObject({ aud: RESOURCE, scope: 'repo:read' });
  });

  it('fixture: chooses the user by test_user in the query, else the default; revokeAll drops every grant', async () => {
    const client = preClient('none');
    const started = await startAuthorization(
      meta,
      client,
      { server: 'gh', subject: 'carol', issuer: meta.issuer, resource: RESOURCE, scopes: ['repo:read'] },
      box,
      60_000,
      NOW(),
    );
    const viaQuery = await openCallback(await browse(`${started.url}&test_user=carol`, null), box, NOW());
    const t = await redeemCode(fetch, meta, client, viaQuery.pending, viaQuery.code, NOW());
    expect(decodeJwt(t.accessToken).sub).toBe('carol');
    const byDefault = await startAuthorization(
      meta,
      client,
      { server: 'gh', subject: '', issuer: meta.issuer, resource: RESOURCE, scopes: ['repo:read'] },
      box,
      60_000,
      NOW(),
    );
    const cb = await openCallback(await browse(byDefault.url, null), box, NOW());
    const t2 = await redeemCode(fetch, meta, client, cb.pending, cb.code, NOW());
    expect(decodeJwt(t2.accessToken).sub).toBe('alice');
    await as.revokeAll();
    for (const old of [t, t2]) {
      const err = (await refresh(fetch, meta, client, old, NOW()).catch(
        (e: unknown) => e,
      )) as TokenEndpointError;
      expect(err.error).toBe('invalid_grant');
    }
  });

  it('uses a Client ID Metadata Document when the AS supports it, with no registration', async () => {
    const before = as.events.counts.registration;
    const { client, registered } = await obtainClient(fetch, meta, {
      cimdUrl: CIMD_URL,
      redirectUri: REDIRECT,
      clientName: 'Manifold',
      grantTypes: ['authorization_code', 'refresh_token'],
    });
    expect(registered).toBe(false);
    expect(client).toEqual({ clientId: CIMD_URL, authMethod: 'none', source: 'cimd', redirectUri: REDIRECT });
    const t = await login(client, ['repo:read']);
    expect(decodeJwt(t.accessToken).client_id).toBe(CIMD_URL);
    expect(as.events.counts.registration).toBe(before);
  });
});

describe('obtainClient priority (client-registration)', () => {
  const base = { redirectUri: REDIRECT, clientName: 'Manifold', grantTypes: ['authorization_code'] };
  const configured: OAuthClient = {
    clientId: 'cfg',
    clientSecret: 's',
    authMethod: 'client_secret_basic',
    source: 'config',
    redirectUri: REDIRECT,
  };
  const stored: OAuthClient = {
    issuer: 'https://as.example.com',
    clientId: 'old',
    authMethod: 'none',
    source: 'dcr',
    redirectUri: REDIRECT,
  };
  const everything = asOf({ cimdSupported: true, registrationEndpoint: 'https://as.example.com/reg' });
  const noNetwork = (() => Promise.reject(new Error('no request expected'))) as typeof fetch;

  it('pre-registered first, then CIMD, then a stored registration for this issuer', async () => {
    expect(
      (await obtainClient(noNetwork, everything, { ...base, configured, cimdUrl: CIMD_URL, stored })).client,
    ).toBe(configured);
    expect(
      (await obtainClient(noNetwork, everything, { ...base, cimdUrl: CIMD_URL, stored })).client.source,
    ).toBe('cimd');
    expect((await obtainClient(noNetwork, everything, { ...base, stored })).client).toBe(stored);
    // CIMD is used only when the AS says so.
    expect((await obtainClient(noNetwork, asOf(), { ...base, cimdUrl: CIMD_URL, stored })).client).toBe(
      stored,
    );
  });

  it('binds credentials to their issuer (SEP-2352)', async () => {
    expect(
      await rule(
        obtainClient(noNetwork, everything, {
          ...base,
          configured: { ...configured, issuer: 'https://other' },
        }),
      ),
    ).toBe('issuer-not-configured');
    expect(
      (
        await obtainClient(noNetwork, everything, {
          ...base,
          configured: { ...configured, issuer: everything.issuer },
        })
      ).registered,
    ).toBe(false);
    // A stored registration of another issuer, or for another redirect URI, is not reused.
    const calls: string[] = [];
    const refusing = (async (url: string | URL | Request) => {
      calls.push(String(url));
      return new Response(
        JSON.stringify({ error: 'invalid_redirect_uri', error_description: 'secret detail' }),
        { status: 400 },
      );
    }) as typeof fetch;
    const err = (await obtainClient(refusing, everything, {
      ...base,
      stored: { ...stored, issuer: 'https://other' },
    }).catch((e: unknown) => e)) as OAuthError;
    expect(err.rule).toBe('registration-failed');
    expect(err.message).toContain('invalid_redirect_uri');
    expect(err.message).not.toContain('secret detail');
    await obtainClient(refusing, everything, {
      ...base,
      stored: { ...stored, redirectUri: 'http://127.0.0.1:1/cb' },
    }).catch(() => {});
    expect(calls).toEqual(['https://as.example.com/reg', 'https://as.example.com/reg']);
  });

  it('asks for configuration when the AS offers no registration', async () => {
    const err = (await obtainClient(noNetwork, asOf(), base).catch((e: unknown) => e)) as OAuthError;
    expect(err.rule).toBe('no-registration');
    expect(err.message).toMatch(/clientId/);
  });

  it('takes the method the AS registered, and falls back to none without a secret', async () => {
    const answer = (body: Record<string, unknown>) =>
      (async () => new Response(JSON.stringify(body), { status: 201 })) as unknown as typeof fetch;
    const as = asOf({ registrationEndpoint: 'https://as.example.com/reg', tokenAuthMethods: ['none'] });
    const a = await obtainClient(answer({ client_id: 'c1', client_secret: 's1' }), as, base);
    expect(a.client).toMatchObject({ clientId: 'c1', authMethod: 'none', clientSecret: 's1' });
    const b = await obtainClient(
      answer({ client_id: 'c2', client_secret: 's2', token_endpoint_auth_method: 'client_secret_post' }),
      as,
      base,
    );
    expect(b.client.authMethod).toBe('client_secret_post');
    const c = await obtainClient(
      answer({ client_id: 'c3', token_endpoint_auth_method: 'client_secret_basic' }),
      as,
      base,
    );
    expect(c.client.authMethod).toBe('none');
    expect(
      await rule(
        obtainClient(answer({ client_id: 'c4', token_endpoint_auth_method: 'private_key_jwt' }), as, base),
      ),
    ).toBe('registration-failed');
    expect(await rule(obtainClient(answer({ nope: true }), as, base))).toBe('registration-failed');
  });

  it('chooses a token endpoint auth method from the AS list (RFC 8414 default: basic)', () => {
    expect(chooseAuthMethod(asOf())).toBe('client_secret_basic');
    expect(chooseAuthMethod(asOf({ tokenAuthMethods: ['private_key_jwt', 'client_secret_post'] }))).toBe(
      'client_secret_post',
    );
    expect(chooseAuthMethod(asOf({ tokenAuthMethods: ['none'] }))).toBe('none');
    expect(chooseAuthMethod(asOf({ tokenAuthMethods: ['client_secret_basic'] }), false)).toBe('none');
  });

  it('describes its CIMD document with the fields the draft requires', () => {
    expect(
      clientMetadataDocument({
        url: CIMD_URL,
        clientName: 'Manifold',
        redirectUris: ['https://gw.example.com/oauth/callback'],
      }),
    ).toEqual({
      client_id: CIMD_URL,
      client_name: 'Manifold',
      redirect_uris: ['https://gw.example.com/oauth/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'web',
    });
  });
});
