/**
 * Which client the gateway is at an authorization server, in the MCP priority order
 * (2026-07-28 basic/authorization/client-registration): pre-registered (config), then a Client ID
 * Metadata Document when the AS supports it, then a dynamic registration (RFC 7591) kept from
 * before, then a new one. And how that client authenticates at the token endpoint.
 */

import type { TokenAuthMethod } from '../../config/types.js';
import { errorCode, hostOf, isLoopbackHost, readJsonObject, request } from './http.js';
import { type AsMetadata, type Fetch, type OAuthClient, OAuthError } from './types.js';

export interface ObtainClientOptions {
  configured?: OAuthClient;
  cimdUrl?: string;
  stored?: OAuthClient;
  redirectUri: string;
  clientName: string;
  grantTypes: string[];
}

const METHODS: readonly TokenAuthMethod[] = ['client_secret_basic', 'client_secret_post', 'none'];

/** The client to use at this AS; `registered` when a new dynamic registration was made (persist it). */
export async function obtainClient(
  f: Fetch,
  as: AsMetadata,
  o: ObtainClientOptions,
): Promise<{ client: OAuthClient; registered: boolean }> {
  if (o.configured) {
    // client-registration "Authorization Server Binding": pre-registered credentials belong to one AS.
    if (o.configured.issuer !== undefined && o.configured.issuer !== as.issuer) {
      throw new OAuthError(
        'issuer-not-configured',
        `the configured client is for another authorization server than ${hostOf(as.issuer)}`,
      );
    }
    return { client: o.configured, registered: false };
  }
  if (o.cimdUrl && as.cimdSupported) {
    // A CIMD client id is portable across authorization servers: no issuer pin.
    return {
      client: { clientId: o.cimdUrl, authMethod: 'none', source: 'cimd', redirectUri: o.redirectUri },
      registered: false,
    };
  }
  const stored = o.stored;
  if (stored && stored.issuer === as.issuer && stored.redirectUri === o.redirectUri) {
    return { client: stored, registered: false };
  }
  if (as.registrationEndpoint) return { client: await register(f, as, o), registered: true };
  throw new OAuthError(
    'no-registration',
    `${hostOf(as.issuer)} offers no client registration: configure a clientId for this server`,
  );
}

/**
 * The token endpoint auth method for a client with (or without) a secret, as the AS lists them
 * (RFC 8414 §2: absent means client_secret_basic). For a configured client without an explicit
 * `tokenEndpointAuthMethod`, and for the method asked for in a registration.
 */
export function chooseAuthMethod(as: AsMetadata, hasSecret = true): TokenAuthMethod {
  if (!hasSecret) return 'none';
  const supported = as.tokenAuthMethods ?? ['client_secret_basic'];
  return METHODS.find((m) => supported.includes(m)) ?? 'client_secret_basic';
}

/** "native" for a loopback redirect, "web" otherwise (client-registration, "Application Type"). */
export function applicationType(redirectUris: readonly string[]): 'native' | 'web' {
  const loopback = (uri: string): boolean => {
    try {
      return isLoopbackHost(new URL(uri).hostname);
    } catch {
      return false;
    }
  };
  return redirectUris.length > 0 && redirectUris.every(loopback) ? 'native' : 'web';
}

async function register(f: Fetch, as: AsMetadata, o: ObtainClientOptions): Promise<OAuthClient> {
  const url = as.registrationEndpoint as string;
  const host = hostOf(url);
  const requested = chooseAuthMethod(as);
  const body: Record<string, unknown> = {
    client_name: o.clientName,
    redirect_uris: [o.redirectUri],
    grant_types: o.grantTypes,
    token_endpoint_auth_method: requested,
    application_type: applicationType([o.redirectUri]),
  };
  if (o.grantTypes.includes('authorization_code')) body.response_types = ['code'];
  const res = await request(
    f,
    url,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      redirect: 'manual',
    },
    'registration-failed',
    'client registration',
  );
  const doc = await readJsonObject(res);
  if (!res.ok) {
    const code = errorCode(doc?.error);
    throw new OAuthError(
      'registration-failed',
      `${host} refused the client registration (${res.status}${code ? ` ${code}` : ''})`,
    );
  }
  if (!doc || typeof doc.client_id !== 'string' || !doc.client_id) {
    throw new OAuthError('registration-failed', `${host} answered the registration without a client_id`);
  }
  const secret = typeof doc.client_secret === 'string' && doc.client_secret ? doc.client_secret : undefined;
  // RFC 7591 §3.2.1: the response holds the registered metadata; the AS may have changed the method.
  const answered = doc.token_endpoint_auth_method;
  let method: TokenAuthMethod = requested;
  if (answered !== undefined) {
    if (!METHODS.includes(answered as TokenAuthMethod)) {
      throw new OAuthError(
        'registration-failed',
        `${host} registered an unsupported token endpoint auth method`,
      );
    }
    method = answered as TokenAuthMethod;
  }
  if (method !== 'none' && !secret) method = 'none';
  const client: OAuthClient = {
    issuer: as.issuer,
    clientId: doc.client_id,
    authMethod: method,
    source: 'dcr',
    redirectUri: o.redirectUri,
  };
  if (secret) client.clientSecret = secret;
  return client;
}

/**
 * The Client ID Metadata Document served at `url` (draft-ietf-oauth-client-id-metadata-document;
 * client-registration "Client ID Metadata Documents"). A public client: PKCE, no secret.
 */
export function clientMetadataDocument(o: {
  url: string;
  clientName: string;
  redirectUris: string[];
}): Record<string, unknown> {
  return {
    client_id: o.url,
    client_name: o.clientName,
    redirect_uris: o.redirectUris,
    // SEP-2207: refresh_token in grant_types when the client wants refresh tokens.
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    application_type: applicationType(o.redirectUris),
  };
}

/** RFC 6749 §2.3.1: id and secret are form-urlencoded before Basic encoding. */
function formEncode(s: string): string {
  return encodeURIComponent(s).replace(/%20/g, '+');
}

/** Adds the client's authentication to a token, revocation or introspection request. */
export function addClientAuth(client: OAuthClient, body: URLSearchParams, headers: Headers): void {
  if (client.authMethod === 'client_secret_basic' && client.clientSecret !== undefined) {
    const pair = `${formEncode(client.clientId)}:${formEncode(client.clientSecret)}`;
    headers.set('authorization', `Basic ${btoa(pair)}`);
    return;
  }
  body.set('client_id', client.clientId);
  if (client.authMethod === 'client_secret_post' && client.clientSecret !== undefined) {
    body.set('client_secret', client.clientSecret);
  }
}
