/**
 * Finding the authorization server of a protected MCP server: RFC 9728 protected-resource
 * metadata (PRM), then RFC 8414 / OpenID Connect discovery, in the orders MCP fixes
 * (2026-07-28 basic/authorization/authorization-server-discovery), with the checks that keep a
 * client from being steered: the PRM `resource` must name this server, the AS metadata `issuer`
 * must be the issuer it was looked up for, PKCE S256 must be offered, endpoints must be https.
 */
import { discard, hostOf, isLoopbackHost, readJsonObject, request, stringArray } from './http.js';
import { type AsMetadata, type Challenge, type Fetch, OAuthError, type ResourceMetadata } from './types.js';

const JSON_ACCEPT = { accept: 'application/json' };

/**
 * https, or http to a loopback host (2026-07-28 security-considerations "Communication Security";
 * OAuth 2.1 §1.5 allows loopback).
 */
export function isAllowedEndpoint(url: string): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  if (u.username || u.password) return false;
  if (u.protocol === 'https:') return true;
  return u.protocol === 'http:' && isLoopbackHost(u.hostname);
}

/**
 * RFC 9728 §3.3: the PRM `resource` identifies this server. The rule: the same origin, and the
 * server URL's path starts with the resource's path at a segment boundary (`/mcp` covers `/mcp`
 * and `/mcp/x`, not `/mcpx`). An origin-only resource covers the whole origin.
 */
export function resourceMatches(serverUrl: string, resource: string): boolean {
  let server: URL;
  let res: URL;
  try {
    server = new URL(serverUrl);
    res = new URL(resource);
  } catch {
    return false;
  }
  // A canonical resource URI has no fragment (2026-07-28 basic/authorization "Canonical Server URI").
  if (res.hash || resource.includes('#')) return false;
  if (res.origin === 'null' || res.origin !== server.origin) return false;
  const prefix = res.pathname.replace(/\/+$/, '');
  if (prefix === '') return true;
  return server.pathname === prefix || server.pathname.startsWith(`${prefix}/`);
}

/**
 * RFC 9728 discovery. With `resource_metadata` in the challenge, that URL and nothing else (the
 * root is not a fallback then). Without it: the path-aware well-known URL, then the root one.
 */
export async function discoverResource(
  f: Fetch,
  serverUrl: string,
  c?: Challenge,
): Promise<ResourceMetadata> {
  let server: URL;
  try {
    server = new URL(serverUrl);
  } catch {
    throw new OAuthError('no-resource-metadata', 'the server URL is not valid');
  }
  const candidates: string[] = [];
  if (c?.resourceMetadata) {
    const url = c.resourceMetadata;
    // The document names the authorization server: read it only over a channel at least as
    // trustworthy as the server's own.
    if (!isAllowedEndpoint(url) && !sameOrigin(url, server)) {
      throw new OAuthError('insecure-endpoint', `the resource metadata of ${server.host} is not on https`);
    }
    candidates.push(url);
  } else {
    const path = server.pathname.replace(/\/+$/, '');
    if (path) candidates.push(`${server.origin}/.well-known/oauth-protected-resource${path}`);
    candidates.push(`${server.origin}/.well-known/oauth-protected-resource`);
  }
  for (const url of candidates) {
    const res = await request(f, url, { headers: JSON_ACCEPT }, 'no-resource-metadata', 'resource metadata');
    if (!res.ok) {
      await discard(res);
      continue;
    }
    const doc = await readJsonObject(res);
    const prm = doc && resourceMetadataOf(url, doc);
    if (!prm) {
      throw new OAuthError('no-resource-metadata', `the resource metadata at ${hostOf(url)} is not valid`);
    }
    if (!resourceMatches(serverUrl, prm.resource)) {
      throw new OAuthError(
        'resource-mismatch',
        `the resource metadata of ${server.host} names another resource (${hostOf(prm.resource)})`,
      );
    }
    return prm;
  }
  throw new OAuthError('no-resource-metadata', `${server.host} publishes no protected-resource metadata`);
}

function sameOrigin(url: string, server: URL): boolean {
  try {
    return new URL(url).origin === server.origin;
  } catch {
    return false;
  }
}

function resourceMetadataOf(url: string, doc: Record<string, unknown>): ResourceMetadata | undefined {
  if (typeof doc.resource !== 'string' || !doc.resource) return undefined;
  const servers = stringArray(doc.authorization_servers)?.filter(Boolean);
  // MCP servers MUST list at least one authorization server (authorization-server-discovery).
  if (!servers || servers.length === 0) return undefined;
  const prm: ResourceMetadata = { url, resource: doc.resource, authorizationServers: servers };
  const scopes = stringArray(doc.scopes_supported)?.filter(Boolean);
  if (scopes) prm.scopesSupported = scopes;
  return prm;
}

/** The metadata URLs of an issuer, in the MCP order (RFC 8414 §3.1 insertion, then OIDC). */
export function asMetadataUrls(issuer: string): string[] {
  const u = new URL(issuer);
  // RFC 8414 §3.1: a terminating "/" of the issuer's path is removed before insertion.
  const path = u.pathname.replace(/\/+$/, '');
  if (!path) {
    return [
      `${u.origin}/.well-known/oauth-authorization-server`,
      `${u.origin}/.well-known/openid-configuration`,
    ];
  }
  return [
    `${u.origin}/.well-known/oauth-authorization-server${path}`,
    `${u.origin}/.well-known/openid-configuration${path}`,
    `${u.origin}${path}/.well-known/openid-configuration`,
  ];
}

/**
 * RFC 8414 / OIDC discovery. A metadata document that answers is final: its `issuer` must be
 * `issuer` exactly (RFC 8414 §3.3; 2026-07-28), and it must offer S256 (security-considerations
 * "Authorization Code Protection": absent `code_challenge_methods_supported` means no PKCE).
 * `grant: 'client_credentials'` skips the PKCE check only: that grant has no code to protect.
 */
export async function discoverAuthorizationServer(
  f: Fetch,
  issuer: string,
  o: { grant?: 'authorization_code' | 'client_credentials' } = {},
): Promise<AsMetadata> {
  if (!isAllowedEndpoint(issuer)) {
    throw new OAuthError('insecure-endpoint', `the authorization server ${hostOf(issuer)} is not on https`);
  }
  const u = new URL(issuer);
  if (u.search || u.hash) {
    throw new OAuthError('no-as-metadata', `the issuer ${u.host} has a query or fragment`);
  }
  for (const url of asMetadataUrls(issuer)) {
    const res = await request(
      f,
      url,
      { headers: JSON_ACCEPT },
      'no-as-metadata',
      'authorization server metadata',
    );
    if (!res.ok) {
      await discard(res);
      continue;
    }
    const doc = await readJsonObject(res);
    if (!doc) throw new OAuthError('no-as-metadata', `the metadata at ${u.host} is not valid`);
    return asMetadataOf(issuer, doc, o.grant !== 'client_credentials');
  }
  throw new OAuthError('no-as-metadata', `${u.host} publishes no authorization server metadata`);
}

const ENDPOINTS = [
  'authorization_endpoint',
  'token_endpoint',
  'registration_endpoint',
  'revocation_endpoint',
];

function asMetadataOf(issuer: string, doc: Record<string, unknown>, pkce: boolean): AsMetadata {
  const host = hostOf(issuer);
  // Plain string comparison: no normalisation of case, port or a trailing slash.
  if (doc.issuer !== issuer) {
    throw new OAuthError('issuer-mismatch', `the metadata of ${host} names another issuer`);
  }
  if (typeof doc.authorization_endpoint !== 'string' || typeof doc.token_endpoint !== 'string') {
    throw new OAuthError(
      'no-as-metadata',
      `the metadata of ${host} lacks the authorization or token endpoint`,
    );
  }
  for (const name of ENDPOINTS) {
    const v = doc[name];
    if (v === undefined) continue;
    if (typeof v !== 'string' || !isAllowedEndpoint(v)) {
      throw new OAuthError('insecure-endpoint', `the ${name} of ${host} is not on https`);
    }
  }
  const methods = stringArray(doc.code_challenge_methods_supported);
  // PKCE protects the authorization code; a client_credentials-only client has none.
  if (pkce && !methods?.includes('S256')) {
    throw new OAuthError('no-pkce', `${host} does not advertise PKCE with S256`);
  }
  const as: AsMetadata = {
    issuer,
    authorizationEndpoint: doc.authorization_endpoint,
    tokenEndpoint: doc.token_endpoint,
    issParameterSupported: doc.authorization_response_iss_parameter_supported === true,
    cimdSupported: doc.client_id_metadata_document_supported === true,
  };
  if (typeof doc.registration_endpoint === 'string') as.registrationEndpoint = doc.registration_endpoint;
  if (typeof doc.revocation_endpoint === 'string') as.revocationEndpoint = doc.revocation_endpoint;
  const scopes = stringArray(doc.scopes_supported);
  if (scopes) as.scopesSupported = scopes;
  const grants = stringArray(doc.grant_types_supported);
  if (grants) as.grantTypesSupported = grants;
  const auth = stringArray(doc.token_endpoint_auth_methods_supported);
  if (auth) as.tokenAuthMethods = auth;
  return as;
}
