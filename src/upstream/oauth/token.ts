/**
 * Token endpoint requests other than the code exchange: refresh (RFC 6749 §6, rotation kept),
 * client_credentials (RFC 6749 §4.4) and revocation (RFC 7009). Re-exported by flow.ts.
 */
import { discard, errorCode, hostOf, readJsonObject, request } from './http.js';
import { addClientAuth } from './registration.js';
import {
  type AsMetadata,
  type Fetch,
  type OAuthClient,
  OAuthError,
  type OAuthRule,
  type TokenSet,
} from './types.js';

/**
 * A refusal by the token or revocation endpoint. `status` is undefined when the endpoint could not
 * be reached (try again later); `error` is the OAuth error code, e.g. `invalid_grant` (the grant
 * is gone: sign in again).
 */
export class TokenEndpointError extends OAuthError {
  constructor(
    rule: OAuthRule,
    message: string,
    readonly status?: number,
    readonly error?: string,
  ) {
    super(rule, message);
    this.name = 'TokenEndpointError';
  }
}

const FORM = 'application/x-www-form-urlencoded';

async function post(
  f: Fetch,
  url: string,
  client: OAuthClient,
  params: Record<string, string>,
  rule: OAuthRule,
  what: string,
): Promise<Response> {
  const body = new URLSearchParams(params);
  const headers = new Headers({ 'content-type': FORM, accept: 'application/json' });
  addClientAuth(client, body, headers);
  try {
    // No redirects: the body carries a code, a refresh token or a client secret.
    return await request(
      f,
      url,
      { method: 'POST', headers, body: body.toString(), redirect: 'manual' },
      rule,
      what,
    );
  } catch (e) {
    throw e instanceof OAuthError ? new TokenEndpointError(rule, e.message) : e;
  }
}

/** A token endpoint request; the answer as a TokenSet (`fallback` fills what RFC 6749 §5.1 lets it omit). */
export async function tokenRequest(
  f: Fetch,
  as: AsMetadata,
  client: OAuthClient,
  params: Record<string, string>,
  rule: OAuthRule,
  now: number,
  fallback: { resource: string; scope: readonly string[]; refreshToken?: string },
): Promise<TokenSet> {
  const host = hostOf(as.tokenEndpoint);
  const res = await post(f, as.tokenEndpoint, client, params, rule, 'the token endpoint');
  const doc = await readJsonObject(res);
  if (!res.ok) {
    const code = errorCode(doc?.error);
    const why = `${res.status}${code ? ` ${code}` : ''}`;
    throw new TokenEndpointError(
      rule,
      `${host} refused the ${params.grant_type} grant (${why})`,
      res.status,
      code,
    );
  }
  if (!doc || typeof doc.access_token !== 'string' || !doc.access_token) {
    throw new TokenEndpointError(rule, `${host} answered without an access token`, res.status);
  }
  // RFC 6749 §7.1: only Bearer is understood here (a DPoP-bound token needs proofs we do not send).
  const type = typeof doc.token_type === 'string' ? doc.token_type : 'Bearer';
  if (type.toLowerCase() !== 'bearer') {
    throw new TokenEndpointError(rule, `${host} issued a token of an unsupported type`, res.status);
  }
  const t: TokenSet = {
    issuer: as.issuer,
    resource: fallback.resource,
    accessToken: doc.access_token,
    tokenType: 'Bearer',
    scope: typeof doc.scope === 'string' ? doc.scope.split(' ').filter(Boolean) : [...fallback.scope],
    clientId: client.clientId,
  };
  const refreshToken =
    typeof doc.refresh_token === 'string' && doc.refresh_token ? doc.refresh_token : undefined;
  // Refresh-token rotation (OAuth 2.1 §4.3.1): a new one replaces the old; none keeps the old.
  if (refreshToken ?? fallback.refreshToken) t.refreshToken = refreshToken ?? fallback.refreshToken;
  const expiresIn = typeof doc.expires_in === 'number' ? doc.expires_in : Number(doc.expires_in);
  if (Number.isFinite(expiresIn) && expiresIn >= 0) t.expiresAt = now + Math.floor(expiresIn * 1000);
  return t;
}

/** A new access token from the refresh token, for the same resource (RFC 8707 §2.2). */
export async function refresh(
  f: Fetch,
  as: AsMetadata,
  client: OAuthClient,
  t: TokenSet,
  now: number,
): Promise<TokenSet> {
  if (t.issuer !== as.issuer) {
    throw new OAuthError('issuer-mismatch', 'the token belongs to another authorization server');
  }
  if (!t.refreshToken) throw new TokenEndpointError('refresh-failed', 'there is no refresh token');
  const params = { grant_type: 'refresh_token', refresh_token: t.refreshToken, resource: t.resource };
  return tokenRequest(f, as, client, params, 'refresh-failed', now, {
    resource: t.resource,
    scope: t.scope,
    refreshToken: t.refreshToken,
  });
}

/** A token for the client itself; no browser, no refresh token (RFC 6749 §4.4.3). */
export async function clientCredentials(
  f: Fetch,
  as: AsMetadata,
  client: OAuthClient,
  resource: string,
  scopes: string[] | undefined,
  now: number,
): Promise<TokenSet> {
  // offline_access asks for a refresh token, which this grant does not get.
  const asked = (scopes ?? []).filter((s) => s !== 'offline_access');
  const params: Record<string, string> = { grant_type: 'client_credentials', resource };
  if (asked.length > 0) params.scope = asked.join(' ');
  const t = await tokenRequest(f, as, client, params, 'token-failed', now, { resource, scope: asked });
  delete t.refreshToken;
  return t;
}

/**
 * RFC 7009: revokes the refresh token (which takes the grant with it at most servers), then the
 * access token. Without a revocation endpoint there is nothing to do. Both are tried; the first
 * failure is thrown after.
 */
export async function revoke(f: Fetch, as: AsMetadata, client: OAuthClient, t: TokenSet): Promise<void> {
  const url = as.revocationEndpoint;
  if (!url) return;
  const host = hostOf(url);
  const pairs: [string, string][] = [];
  if (t.refreshToken) pairs.push([t.refreshToken, 'refresh_token']);
  pairs.push([t.accessToken, 'access_token']);
  let first: TokenEndpointError | undefined;
  for (const [token, hint] of pairs) {
    try {
      const res = await post(f, url, client, { token, token_type_hint: hint }, 'token-failed', 'revocation');
      if (res.ok) {
        await discard(res);
      } else {
        const code = errorCode((await readJsonObject(res))?.error);
        // RFC 7009 §2.2.1: a server that cannot revoke self-contained (JWT) access tokens says so;
        // they lapse at expiry, and the refresh token above was the one that mattered.
        if (hint === 'access_token' && code === 'unsupported_token_type') continue;
        first ??= new TokenEndpointError(
          'token-failed',
          `${host} refused to revoke a ${hint} (${res.status}${code ? ` ${code}` : ''})`,
          res.status,
          code,
        );
      }
    } catch (e) {
      if (!(e instanceof TokenEndpointError)) throw e;
      first ??= e;
    }
  }
  if (first) throw first;
}
