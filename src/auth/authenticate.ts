import { LRUCache } from 'lru-cache';
import type { AuthConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import { extractBearer, principalFromClaims } from './grants.js';
import { createVerifier, type JWTPayload } from './jwt.js';
import type { Authenticator, HeaderBag, Principal } from './principal.js';

/** A verified token is re-checked at most this often; a key removed from the JWKS stops working within it. */
const VERIFIED_TTL_MS = 60_000;

/**
 * Every request is authenticated again (SECURITY A4): the bearer token from the Authorization
 * header only (A3), verified by jose, turned into a Principal. A session id grants nothing.
 *
 * @example const authenticate = createAuthenticator(config.gateway.auth, platform.fetch)
 */
/** Distinct Authorization headers remembered as they were sent; the set is cleared when full. */
const HEADERS_REMEMBERED = 1024;

export function createAuthenticator(
  auth: AuthConfig,
  fetch: typeof globalThis.fetch,
  /** The verifier; tests pass one that counts. Default: createVerifier over `auth`. */
  verify: (token: string) => Promise<JWTPayload> = createVerifier({ auth, fetch }),
): Authenticator {
  // Signature checks dominate a relayed call's cost, and a client sends the same token on every
  // request: remember verified tokens (never refused ones) until they expire, at most a minute.
  const verified = new LRUCache<string, { principal: Principal; until: number }>({ max: 10_000 });
  // In front of it, the exact Authorization header a client repeats on every request: its hit
  // skips the header pattern, the padding strip and the LRU's bookkeeping (#18). Filled only from
  // a verified token, bounded, and checked against the same expiry.
  const byHeader = new Map<string, { principal: Principal; until: number }>();
  // And in front of the map, the last header found in it: a map lookup hashes the whole header (a
  // fresh string per request, ~700 characters for an ES256 token), where comparing it with the
  // last one is a memory compare (#18). Same entry, same expiry check.
  let lastHeader: string | undefined;
  let lastEntry: { principal: Principal; until: number } | undefined;
  const known = (request: { readonly headers: HeaderBag }): Principal | undefined => {
    const header = request.headers.get('authorization');
    if (header === null) return undefined;
    const seen = header === lastHeader ? lastEntry : byHeader.get(header);
    if (seen === undefined) return undefined;
    if (seen.until > Date.now()) {
      lastHeader = header;
      lastEntry = seen;
      return seen.principal;
    }
    byHeader.delete(header);
    lastHeader = lastEntry = undefined;
    return undefined;
  };
  return Object.assign(authenticate, { known });
  async function authenticate(request: { readonly headers: HeaderBag }): Promise<Principal> {
    const seen = known(request);
    if (seen !== undefined) return seen;
    const header = request.headers.get('authorization');
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
    if (hit && hit.until > now) {
      remember(header as string, hit);
      return hit.principal;
    }
    const payload = await verify(token);
    const principal = principalFromClaims(payload, auth);
    const exp = typeof payload.exp === 'number' ? payload.exp * 1000 : now;
    const until = Math.min(exp, now + VERIFIED_TTL_MS);
    if (until > now) {
      const entry = { principal, until };
      verified.set(token, entry);
      remember(header as string, entry);
    }
    return principal;
  }
  function remember(header: string, entry: { principal: Principal; until: number }): void {
    lastHeader = lastEntry = undefined;
    if (byHeader.size >= HEADERS_REMEMBERED) byHeader.clear();
    byHeader.set(header, entry);
  }
}
