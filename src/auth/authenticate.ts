import type { JWTPayload } from 'jose';
import { LRUCache } from 'lru-cache';
import type { AuthConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import { extractBearer, principalFromClaims } from './grants.js';
import { createVerifier } from './jwt.js';
import type { Authenticator, HeaderBag, Principal } from './principal.js';

/** A verified token is re-checked at most this often; a key removed from the JWKS stops working within it. */
const VERIFIED_TTL_MS = 60_000;

/**
 * Every request is authenticated again (SECURITY A4): the bearer token from the Authorization
 * header only (A3), verified by jose, turned into a Principal. A session id grants nothing.
 *
 * @example const authenticate = createAuthenticator(config.gateway.auth, platform.fetch)
 */
export function createAuthenticator(
  auth: AuthConfig,
  fetch: typeof globalThis.fetch,
  /** The verifier; tests pass one that counts. Default: createVerifier over `auth`. */
  verify: (token: string) => Promise<JWTPayload> = createVerifier({ auth, fetch }),
): Authenticator {
  // Signature checks dominate a relayed call's cost, and a client sends the same token on every
  // request: remember verified tokens (never refused ones) until they expire, at most a minute.
  const verified = new LRUCache<string, { principal: Principal; until: number }>({ max: 10_000 });
  return async function authenticate(request: { readonly headers: HeaderBag }): Promise<Principal> {
    const { token: given, presented } = extractBearer(request);
    // A compact JWS has no base64 padding; `abc==` is the same token as `abc` to the decoder, so
    // it is cached (and rate-keyed) under one string (#13.16).
    const token = given?.replace(/=+$/, '');
    if (!token) {
      throw new ManifoldError('ERR_UNAUTHORIZED', presented ? 'invalid token' : 'authentication required', {
        data: { presented },
      });
    }
    const now = Date.now();
    const hit = verified.get(token);
    if (hit && hit.until > now) return hit.principal;
    const payload = await verify(token);
    const exp = typeof payload.exp === 'number' ? payload.exp * 1000 : now;
    // #52: the id the admin API lists and revokes: the jti, or a digest of the token itself.
    const tokenId =
      typeof payload.jti === 'string' && payload.jti !== '' ? payload.jti : await tokenDigest(token);
    const principal = { ...principalFromClaims(payload, auth), tokenId, tokenExpiresAt: exp };
    const until = Math.min(exp, now + VERIFIED_TTL_MS);
    if (until > now) verified.set(token, { principal, until });
    return principal;
  };
}

/** A token without a `jti`, named by the start of its SHA-256: enough to tell tokens apart, never the token. */
async function tokenDigest(token: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(token)));
  return `sha256:${[...digest.slice(0, 16)].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}
