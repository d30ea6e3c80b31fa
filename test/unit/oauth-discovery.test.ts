import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { egressPolicy } from '../../src/guards/egress/policy.js';
import {
  discoverAuthorizationServer,
  discoverResource,
  isAllowedEndpoint,
  resourceMatches,
} from '../../src/upstream/oauth/discovery.js';
import { OAuthError } from '../../src/upstream/oauth/types.js';
import { guardedFetch } from '../../src/upstream/wire/egress-fetch.js';
import { type AuthServer, startAuthServer } from '../fixtures/oauth-as.mjs';
import { rule } from '../helpers/oauth-rule.js';

// A tiny server of fixed JSON documents that records the paths asked for, in order.
interface JsonServer {
  origin: string;
  seen: string[];
  routes: Map<string, { status?: number; body: unknown }>;
  server: Server;
}

async function jsonServer(): Promise<JsonServer> {
  const s: JsonServer = { origin: '', seen: [], routes: new Map(), server: createServer() };
  s.server.on('request', (req, res) => {
    const path = req.url ?? '';
    s.seen.push(path);
    const route = s.routes.get(path);
    if (!route) {
      res.statusCode = 404;
      res.end('{"error":"not_found"}');
      return;
    }
    res.statusCode = route.status ?? 200;
    res.setHeader('content-type', 'application/json');
    res.end(typeof route.body === 'string' ? route.body : JSON.stringify(route.body));
  });
  await new Promise<void>((r) => s.server.listen(0, '127.0.0.1', r));
  s.origin = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`;
  return s;
}

let js: JsonServer;
beforeAll(async () => {
  js = await jsonServer();
});
afterEach(() => {
  js.seen.length = 0;
  js.routes.clear();
});
afterAll(async () => {
  js.server.closeAllConnections();
  await new Promise((r) => js.server.close(r));
});

function asDoc(issuer: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    code_challenge_methods_supported: ['S256'],
    ...extra,
  };
}

describe('isAllowedEndpoint (2026-07-28 security-considerations, Communication Security)', () => {
  it('allows https anywhere and http only to loopback', () => {
    for (const ok of [
      'https://as.example.com/token',
      'http://localhost:8080/token',
      'http://127.0.0.1/x',
      'http://127.9.8.7:1/x',
      'http://[::1]:3000/x',
      'http://auth.localhost/x',
    ]) {
      expect(isAllowedEndpoint(ok), ok).toBe(true);
    }
    for (const bad of [
      'http://as.example.com/token',
      'http://10.0.0.1/x',
      'http://128.0.0.1/x',
      'ftp://localhost/x',
      'javascript:alert(1)',
      'not a url',
      '',
      'https://user:pw@as.example.com/token',
    ]) {
      expect(isAllowedEndpoint(bad), bad).toBe(false);
    }
  });
});

describe('resourceMatches (RFC 9728 §3.3)', () => {
  it('needs the same origin and a path prefix at a segment boundary', () => {
    const server = 'https://mcp.example.com/mcp';
    expect(resourceMatches(server, 'https://mcp.example.com/mcp')).toBe(true);
    expect(resourceMatches(server, 'https://mcp.example.com/mcp/')).toBe(true);
    expect(resourceMatches(server, 'https://mcp.example.com')).toBe(true);
    expect(resourceMatches(server, 'https://mcp.example.com/')).toBe(true);
    expect(resourceMatches(server, 'https://MCP.example.com:443/mcp')).toBe(true);
    expect(resourceMatches('https://mcp.example.com/mcp/tools', 'https://mcp.example.com/mcp')).toBe(true);
    expect(resourceMatches(server, 'https://mcp.example.com/mc')).toBe(false);
    expect(resourceMatches('https://mcp.example.com/mcpx', 'https://mcp.example.com/mcp')).toBe(false);
    expect(resourceMatches(server, 'https://mcp.example.com/mcp/deeper')).toBe(false);
    expect(resourceMatches(server, 'https://evil.example.com/mcp')).toBe(false);
    expect(resourceMatches(server, 'http://mcp.example.com/mcp')).toBe(false);
    expect(resourceMatches(server, 'https://mcp.example.com:8443/mcp')).toBe(false);
    expect(resourceMatches(server, 'https://mcp.example.com/mcp#frag')).toBe(false);
    expect(resourceMatches(server, 'mcp.example.com/mcp')).toBe(false);
    expect(resourceMatches(server, '')).toBe(false);
  });
});

describe('discoverResource', () => {
  it('uses resource_metadata from the challenge and never falls back to the root', async () => {
    js.routes.set('/custom/prm', {
      body: {
        resource: `${js.origin}/mcp`,
        authorization_servers: ['https://as.example.com'],
        scopes_supported: ['a', 'b'],
      },
    });
    const prm = await discoverResource(fetch, `${js.origin}/mcp`, {
      scheme: 'bearer',
      params: {},
      resourceMetadata: `${js.origin}/custom/prm`,
    });
    expect(prm).toEqual({
      url: `${js.origin}/custom/prm`,
      resource: `${js.origin}/mcp`,
      authorizationServers: ['https://as.example.com'],
      scopesSupported: ['a', 'b'],
    });
    js.seen.length = 0;
    js.routes.set('/.well-known/oauth-protected-resource', {
      body: { resource: js.origin, authorization_servers: ['x'] },
    });
    const missing = discoverResource(fetch, `${js.origin}/mcp`, {
      scheme: 'bearer',
      params: {},
      resourceMetadata: `${js.origin}/gone`,
    });
    expect(await rule(missing)).toBe('no-resource-metadata');
    expect(js.seen).toEqual(['/gone']);
  });

  it('without a challenge URL tries the path-aware well-known URL, then the root', async () => {
    js.routes.set('/.well-known/oauth-protected-resource', {
      body: { resource: js.origin, authorization_servers: ['https://as.example.com/tenant1'] },
    });
    const prm = await discoverResource(fetch, `${js.origin}/mcp`);
    expect(js.seen).toEqual([
      '/.well-known/oauth-protected-resource/mcp',
      '/.well-known/oauth-protected-resource',
    ]);
    // Sent later as the RFC 8707 resource exactly as published: no "/" added.
    expect(prm.resource).toBe(js.origin);
    expect(prm.scopesSupported).toBeUndefined();
    js.seen.length = 0;
    js.routes.set('/.well-known/oauth-protected-resource/mcp', {
      body: { resource: `${js.origin}/mcp`, authorization_servers: ['https://as.example.com'] },
    });
    expect((await discoverResource(fetch, `${js.origin}/mcp/`)).resource).toBe(`${js.origin}/mcp`);
    expect(js.seen).toEqual(['/.well-known/oauth-protected-resource/mcp']);
  });

  it('refuses an invalid server URL as an OAuthError', async () => {
    expect(await rule(discoverResource(fetch, 'not a url'))).toBe('no-resource-metadata');
  });

  it('asks only the root for a server at the root', async () => {
    expect(await rule(discoverResource(fetch, `${js.origin}/`))).toBe('no-resource-metadata');
    expect(js.seen).toEqual(['/.well-known/oauth-protected-resource']);
  });

  it('refuses metadata naming another resource (auth/resource-mismatch)', async () => {
    js.routes.set('/.well-known/oauth-protected-resource/mcp', {
      body: { resource: 'https://evil.example.com/mcp', authorization_servers: ['https://as.example.com'] },
    });
    const err = await discoverResource(fetch, `${js.origin}/mcp`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OAuthError);
    expect((err as OAuthError).rule).toBe('resource-mismatch');
  });

  it('refuses invalid documents and documents without an authorization server', async () => {
    for (const body of [
      'not json',
      '[]',
      { resource: `${js.origin}/mcp` },
      { resource: `${js.origin}/mcp`, authorization_servers: [] },
      { resource: 7, authorization_servers: ['https://as.example.com'] },
    ]) {
      js.routes.set('/.well-known/oauth-protected-resource/mcp', { body });
      expect(await rule(discoverResource(fetch, `${js.origin}/mcp`))).toBe('no-resource-metadata');
    }
  });

  it('reads a metadata URL on another origin only over https or loopback, and keeps queries out of messages', async () => {
    const c = { scheme: 'bearer', params: {}, resourceMetadata: 'http://prm.example.com/x?secret=hunter2' };
    const err = (await discoverResource(fetch, `${js.origin}/mcp`, c).catch((e: unknown) => e)) as OAuthError;
    expect(err.rule).toBe('insecure-endpoint');
    expect(err.message).not.toContain('hunter2');
    const down = { scheme: 'bearer', params: {}, resourceMetadata: 'http://127.0.0.1:1/prm?secret=hunter2' };
    const e2 = (await discoverResource(fetch, `${js.origin}/mcp`, down).catch(
      (e: unknown) => e,
    )) as OAuthError;
    expect(e2.rule).toBe('no-resource-metadata');
    expect(e2.message).not.toContain('hunter2');
  });
});

describe('through the gateway egress guard', () => {
  it('says when the egress policy refused a host, and sends nothing there', async () => {
    const guarded = guardedFetch(fetch, {
      policy: egressPolicy({ allowedHosts: [js.origin.replace('http://', '')] }),
      maxBodyBytes: 1 << 20,
    });
    js.routes.set('/.well-known/oauth-authorization-server', { body: asDoc(js.origin) });
    expect((await discoverAuthorizationServer(guarded, js.origin)).issuer).toBe(js.origin);
    const err = (await discoverAuthorizationServer(guarded, 'https://as.example.com').catch(
      (e: unknown) => e,
    )) as OAuthError;
    expect(err.rule).toBe('no-as-metadata');
    expect(err.message).toMatch(/egress policy/);
  });
});

describe('discoverAuthorizationServer', () => {
  it('with an issuer path: RFC 8414 insert, OIDC insert, OIDC append, in that order', async () => {
    const issuer = `${js.origin}/tenant1`;
    expect(await rule(discoverAuthorizationServer(fetch, issuer))).toBe('no-as-metadata');
    expect(js.seen).toEqual([
      '/.well-known/oauth-authorization-server/tenant1',
      '/.well-known/openid-configuration/tenant1',
      '/tenant1/.well-known/openid-configuration',
    ]);
    js.seen.length = 0;
    js.routes.set('/tenant1/.well-known/openid-configuration', { body: asDoc(issuer) });
    const as = await discoverAuthorizationServer(fetch, issuer);
    expect(as.authorizationEndpoint).toBe(`${issuer}/authorize`);
    expect(js.seen).toHaveLength(3);
    js.seen.length = 0;
    js.routes.set('/.well-known/oauth-authorization-server/tenant1', { body: asDoc(issuer) });
    await discoverAuthorizationServer(fetch, `${issuer}`);
    expect(js.seen).toEqual(['/.well-known/oauth-authorization-server/tenant1']);
  });

  it('without a path: RFC 8414, then OIDC', async () => {
    expect(await rule(discoverAuthorizationServer(fetch, js.origin))).toBe('no-as-metadata');
    expect(js.seen).toEqual(['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']);
    js.seen.length = 0;
    js.routes.set('/.well-known/openid-configuration', {
      body: asDoc(js.origin, {
        registration_endpoint: `${js.origin}/reg`,
        revocation_endpoint: `${js.origin}/revoke`,
        scopes_supported: ['openid', 'offline_access'],
        grant_types_supported: ['authorization_code'],
        token_endpoint_auth_methods_supported: ['none'],
        authorization_response_iss_parameter_supported: true,
        client_id_metadata_document_supported: true,
      }),
    });
    expect(await discoverAuthorizationServer(fetch, js.origin)).toEqual({
      issuer: js.origin,
      authorizationEndpoint: `${js.origin}/authorize`,
      tokenEndpoint: `${js.origin}/token`,
      registrationEndpoint: `${js.origin}/reg`,
      revocationEndpoint: `${js.origin}/revoke`,
      scopesSupported: ['openid', 'offline_access'],
      grantTypesSupported: ['authorization_code'],
      tokenAuthMethods: ['none'],
      issParameterSupported: true,
      cimdSupported: true,
    });
  });

  it('refuses metadata whose issuer is not the one looked up, normalised or not (auth/metadata-issuer-mismatch)', async () => {
    for (const other of ['https://attacker.example.com', `${js.origin}/`, js.origin.toUpperCase()]) {
      js.routes.set('/.well-known/oauth-authorization-server', { body: asDoc(other) });
      js.seen.length = 0;
      expect(await rule(discoverAuthorizationServer(fetch, js.origin))).toBe('issuer-mismatch');
      // The document that answered is final: no other URL is tried, none of its endpoints used.
      expect(js.seen).toEqual(['/.well-known/oauth-authorization-server']);
    }
  });

  it('refuses an AS without S256 PKCE, including when code_challenge_methods_supported is absent', async () => {
    for (const methods of [undefined, [], ['plain'], 'S256']) {
      const doc = asDoc(js.origin);
      if (methods === undefined) delete doc.code_challenge_methods_supported;
      else doc.code_challenge_methods_supported = methods;
      js.routes.set('/.well-known/oauth-authorization-server', { body: doc });
      expect(await rule(discoverAuthorizationServer(fetch, js.origin))).toBe('no-pkce');
    }
  });

  it('skips only the PKCE check for a client_credentials client (no code to protect)', async () => {
    const doc = asDoc(js.origin);
    delete doc.code_challenge_methods_supported;
    js.routes.set('/.well-known/oauth-authorization-server', { body: doc });
    const as = await discoverAuthorizationServer(fetch, js.origin, { grant: 'client_credentials' });
    expect(as.tokenEndpoint).toBe(`${js.origin}/token`);
    expect(await rule(discoverAuthorizationServer(fetch, js.origin, { grant: 'authorization_code' }))).toBe(
      'no-pkce',
    );
    js.routes.set('/.well-known/oauth-authorization-server', { body: asDoc('https://attacker.example.com') });
    expect(await rule(discoverAuthorizationServer(fetch, js.origin, { grant: 'client_credentials' }))).toBe(
      'issuer-mismatch',
    );
  });

  it('refuses endpoints that are not https or loopback, and an issuer that is not', async () => {
    for (const key of [
      'authorization_endpoint',
      'token_endpoint',
      'registration_endpoint',
      'revocation_endpoint',
    ]) {
      js.routes.set('/.well-known/oauth-authorization-server', {
        body: asDoc(js.origin, { [key]: 'http://as.example.com/x' }),
      });
      expect(await rule(discoverAuthorizationServer(fetch, js.origin))).toBe('insecure-endpoint');
    }
    js.seen.length = 0;
    expect(await rule(discoverAuthorizationServer(fetch, 'http://as.example.com'))).toBe('insecure-endpoint');
    expect(js.seen).toEqual([]);
  });

  it('refuses metadata without the authorization or token endpoint, and junk', async () => {
    const doc = asDoc(js.origin);
    delete doc.token_endpoint;
    for (const body of [doc, 'junk', '"string"']) {
      js.routes.set('/.well-known/oauth-authorization-server', { body });
      expect(await rule(discoverAuthorizationServer(fetch, js.origin))).toBe('no-as-metadata');
    }
  });
});

describe('discovery against oidc-provider', () => {
  let plain: AuthServer;
  let tenant: AuthServer;
  beforeAll(async () => {
    plain = await startAuthServer({ resource: 'http://127.0.0.1:1/mcp', cimd: true });
    tenant = await startAuthServer({
      resource: 'http://127.0.0.1:1/mcp',
      pathPrefix: '/tenant1',
      offlineAccess: false,
      registration: false,
    });
  });
  afterAll(async () => {
    await plain.close();
    await tenant.close();
  });

  it('reads a root issuer', async () => {
    const as = await discoverAuthorizationServer(fetch, plain.issuer);
    expect(as.issuer).toBe(plain.issuer);
    expect(as.tokenEndpoint).toBe(`${plain.issuer}/token`);
    expect(as.registrationEndpoint).toBe(`${plain.issuer}/reg`);
    expect(as.revocationEndpoint).toBe(`${plain.issuer}/token/revocation`);
    expect(as.issParameterSupported).toBe(true);
    expect(as.cimdSupported).toBe(true);
    expect(as.scopesSupported).toContain('offline_access');
  });

  it('reads a path issuer at the RFC 8414 inserted URL', async () => {
    const as = await discoverAuthorizationServer(fetch, tenant.issuer);
    expect(as.issuer).toBe(`${tenant.url}/tenant1`);
    expect(as.authorizationEndpoint).toBe(`${tenant.url}/tenant1/auth`);
    expect(as.cimdSupported).toBe(false);
    expect(as.scopesSupported).not.toContain('offline_access');
    expect(as.registrationEndpoint).toBeUndefined();
  });
});
