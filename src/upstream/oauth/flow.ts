/**
 * The authorization-code flow with PKCE and the token endpoint (OAuth 2.1; MCP 2026-07-28
 * basic/authorization). State is stateless: the pending flow (PKCE verifier, expected issuer,
 * resource, scopes) is sealed into `state` with the SecretBox, so the callback can land on any
 * instance. `openCallback` only decodes and checks; claiming a state once is the caller's job.
 */
import { base64url } from 'jose';
import type { SecretBox } from './box.js';
import { errorCode } from './http.js';
import { tokenRequest } from './token.js';
import {
  type AsMetadata,
  type Challenge,
  type Fetch,
  type OAuthClient,
  OAuthError,
  type PendingFlow,
  type ResourceMetadata,
  type TokenSet,
} from './types.js';

/** The AAD of a sealed `state`: a sealed credential never opens as a state, nor the reverse. */
export const STATE_AAD = 'manifold/oauth-state/v1';
const OFFLINE = 'offline_access';

/**
 * The scopes of an authorization request (2026-07-28 "Scope Selection Strategy"): the challenge's
 * scope, else all of PRM `scopes_supported`, else none; united with the scopes requested before
 * (step-up, SEP-2350) and the configured extras. `offline_access` is added when the AS lists it,
 * and never sent when it does not (SEP-2207). undefined: omit the `scope` parameter.
 */
export function selectScopes(
  c: Challenge | undefined,
  prm: ResourceMetadata,
  as: AsMetadata,
  previous: readonly string[],
  extra: readonly string[],
): string[] | undefined {
  const base = c?.scope && c.scope.length > 0 ? c.scope : (prm.scopesSupported ?? []);
  const offline = as.scopesSupported?.includes(OFFLINE) === true;
  const out = new Set<string>();
  for (const s of [...previous, ...base, ...extra]) if (s && (s !== OFFLINE || offline)) out.add(s);
  if (offline) out.add(OFFLINE);
  return out.size > 0 ? [...out] : undefined;
}

export type AuthorizationParams = Omit<
  PendingFlow,
  'v' | 'verifier' | 'exp' | 'issAdvertised' | 'clientId' | 'redirectUri'
>;

async function s256(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier) as BufferSource);
  return base64url.encode(new Uint8Array(digest));
}

/**
 * The authorization URL. The issuer recorded with the verifier is the one of the validated
 * metadata (2026-07-28 "Authorization Response Validation"); `resource` goes as PRM gave it.
 */
export async function startAuthorization(
  as: AsMetadata,
  client: OAuthClient,
  p: AuthorizationParams,
  box: SecretBox,
  ttlMs: number,
  now: number,
): Promise<{ url: string; state: string; exp: number }> {
  if (p.issuer !== as.issuer) {
    throw new OAuthError('issuer-mismatch', 'the flow is for another authorization server than its metadata');
  }
  // RFC 7636 §4.1: 32 random octets, base64url: 43 characters.
  const verifier = base64url.encode(crypto.getRandomValues(new Uint8Array(32)));
  const exp = now + ttlMs;
  const pending: PendingFlow = {
    v: 1,
    server: p.server,
    subject: p.subject,
    issuer: as.issuer,
    verifier,
    redirectUri: client.redirectUri,
    resource: p.resource,
    scopes: [...p.scopes],
    clientId: client.clientId,
    issAdvertised: as.issParameterSupported,
    exp,
  };
  const state = await box.seal(pending, STATE_AAD);
  const url = new URL(as.authorizationEndpoint);
  const q = url.searchParams;
  q.set('response_type', 'code');
  q.set('client_id', client.clientId);
  q.set('redirect_uri', client.redirectUri);
  q.set('state', state);
  q.set('code_challenge', await s256(verifier));
  q.set('code_challenge_method', 'S256');
  q.set('resource', p.resource);
  if (p.scopes.length > 0) q.set('scope', p.scopes.join(' '));
  return { url: url.toString(), state, exp };
}

function isPending(v: unknown): v is PendingFlow {
  if (v === null || typeof v !== 'object') return false;
  const p = v as Record<string, unknown>;
  const strings = ['server', 'subject', 'issuer', 'verifier', 'redirectUri', 'resource', 'clientId'];
  return (
    p.v === 1 &&
    strings.every((k) => typeof p[k] === 'string') &&
    Array.isArray(p.scopes) &&
    p.scopes.every((s) => typeof s === 'string') &&
    typeof p.issAdvertised === 'boolean' &&
    typeof p.exp === 'number'
  );
}

/**
 * Reads an authorization response: the sealed state, then `iss` by the RFC 9207 table (plain
 * string comparison, before anything else is acted on), then `error`, then `code`.
 */
export async function openCallback(
  query: URLSearchParams,
  box: SecretBox,
  now: number,
): Promise<{ pending: PendingFlow; code: string }> {
  const state = query.get('state');
  if (!state) throw new OAuthError('state-invalid', 'the authorization response has no state');
  const pending = await box.open(state, STATE_AAD);
  if (!isPending(pending))
    throw new OAuthError('state-invalid', 'the authorization response state is not valid');
  if (pending.exp <= now) throw new OAuthError('state-invalid', 'the sign-in link has expired');
  const iss = query.get('iss');
  if (iss !== null) {
    // 2026-07-28 "Authorization Response Validation": compared whether advertised or not, never
    // normalised; on a mismatch nothing else of the response (error included) is shown.
    if (iss !== pending.issuer) {
      throw new OAuthError('iss-mismatch', 'the authorization response names another issuer');
    }
  } else if (pending.issAdvertised) {
    throw new OAuthError('iss-missing', 'the authorization response lacks the issuer its server advertises');
  }
  const error = query.get('error');
  if (error !== null) {
    const code = errorCode(error);
    throw new OAuthError('authorization-denied', `the authorization server answered ${code ?? 'an error'}`);
  }
  const code = query.get('code');
  if (!code) throw new OAuthError('authorization-denied', 'the authorization response has no code');
  return { pending, code };
}

/** Exchanges the code (RFC 6749 §4.1.3, RFC 7636 §4.5, RFC 8707 §2.2 resource). */
export async function redeemCode(
  f: Fetch,
  as: AsMetadata,
  client: OAuthClient,
  pending: PendingFlow,
  code: string,
  now: number,
): Promise<TokenSet> {
  // The code goes only to the token endpoint of the issuer that was recorded (mix-up defence).
  if (pending.issuer !== as.issuer) {
    throw new OAuthError('issuer-mismatch', 'the code belongs to another authorization server');
  }
  if (pending.clientId !== client.clientId) {
    throw new OAuthError('state-invalid', 'the authorization response is for another client registration');
  }
  const params = {
    grant_type: 'authorization_code',
    code,
    redirect_uri: pending.redirectUri,
    code_verifier: pending.verifier,
    resource: pending.resource,
  };
  return tokenRequest(f, as, client, params, 'token-failed', now, {
    resource: pending.resource,
    scope: pending.scopes,
  });
}
