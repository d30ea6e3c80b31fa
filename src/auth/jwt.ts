/**
 * JWT access-token verification (MCP authorization; RFC 7519, RFC 8725 JWT BCP, RFC 9068).
 *
 * One verifier per gateway, built once from `gateway.auth`, holding exactly one key source:
 *
 * - `jwksUrl`: a remote JWK Set (RFC 7517 §5), fetched through the platform's egress-guarded fetch,
 *   cached by jose, refetched at most once per cooldown, never through a redirect;
 * - `jwks`: an inline JWK Set (what `jwksFile` or the Workers `MANIFOLD_JWKS` variable resolve to);
 * - `publicKey`: one PEM SPKI public key;
 * - `secret`: an HS256 shared secret (development).
 *
 * Everything here is Web Crypto via jose: no node:* imports, so it runs on Node and on Workers.
 *
 * This module is the verifier factory; key sources and algorithm allowlists live in jwt-keys.ts,
 * the remote JWKS fetch in jwt-jwks.ts, PEM key inspection in jwt-spki.ts and error
 * classification in jwt-errors.ts.
 */
import { type JWTPayload, jwtVerify } from 'jose';
import type { AuthConfig } from '../config/types.js';
import { classify, unauthorized } from './jwt-errors.js';
import { keySource } from './jwt-keys.js';

export interface VerifierOptions {
  auth: AuthConfig;
  /** The platform's egress-guarded fetch; used only for `auth.jwksUrl`. */
  fetch: typeof fetch;
}

/** RFC 8725 §3.5: the clock skew we accept is small and bounded. */
const MAX_CLOCK_TOLERANCE_SECONDS = 60;
const DEFAULT_CLOCK_TOLERANCE_SECONDS = 30;
/**
 * Tokens longer than this are refused before any parsing. Real access tokens are a few KiB; HTTP
 * runtimes cap header size well below this anyway (Node 16 KiB, Workers 32 KiB).
 */
const MAX_TOKEN_LENGTH = 64 * 1024;

/**
 * Builds the token verifier for `gateway.auth`. Options are validated here, once, and bad ones throw
 * a TypeError naming the option; the returned function never throws anything but a ManifoldError:
 *
 * - `ERR_UNAUTHORIZED` ('invalid token', HTTP 401) for every token problem: bad structure, bad
 *   signature, disallowed `alg`, unknown key or `kid`, wrong `iss`/`aud`, expired, future `nbf`,
 *   missing `exp`. `data.reason` carries jose's error code for logs, never the token.
 * - `ERR_AUTH_UNAVAILABLE` (HTTP 503) when the key source cannot be consulted: the JWKS endpoint is
 *   down, hangs past `jwksTimeoutMs`, redirects, or answers something that is not a JWK Set. In
 *   particular, a token whose `kid` is not cached while the JWKS cannot be fetched is 503, not 401:
 *   the token may be valid, and a 401 would tell a well-behaved client to throw it away.
 *
 * @example
 * const verify = createVerifier({ auth: config.gateway.auth, fetch: platform.fetch });
 * const claims = await verify(bearerToken); // throws ManifoldError ERR_UNAUTHORIZED / ERR_AUTH_UNAVAILABLE
 */
export function createVerifier(options: VerifierOptions): (token: string) => Promise<JWTPayload> {
  if (!options || typeof options !== 'object') throw new TypeError('options must be an object');
  const { auth } = options;
  if (!auth || typeof auth !== 'object') throw new TypeError('"auth" option must be an object');
  if (typeof auth.issuer !== 'string' || auth.issuer === '') {
    throw new TypeError('"auth.issuer" must be a non-empty string');
  }
  if (typeof auth.audience !== 'string' || auth.audience === '') {
    throw new TypeError('"auth.audience" must be a non-empty string');
  }
  const clockTolerance = auth.clockToleranceSeconds ?? DEFAULT_CLOCK_TOLERANCE_SECONDS;
  if (
    typeof clockTolerance !== 'number' ||
    !Number.isFinite(clockTolerance) ||
    clockTolerance < 0 ||
    clockTolerance > MAX_CLOCK_TOLERANCE_SECONDS
  ) {
    throw new TypeError(
      `"auth.clockToleranceSeconds" must be a number from 0 to ${MAX_CLOCK_TOLERANCE_SECONDS}`,
    );
  }

  const getKey = keySource(auth, options.fetch);
  const types = new Set((auth.tokenTypes ?? ['JWT', 'at+jwt']).map((t) => t.toLowerCase()));
  const maxLifetime = auth.maxTokenLifetimeSeconds ?? 86_400;

  const verifyOptions = {
    issuer: auth.issuer,
    audience: auth.audience,
    algorithms: getKey.algorithms,
    clockTolerance,
    // RFC 8725 §3.10 and A8: a token that never expires is refused. jose adds `iss` and `aud` to
    // the required claims itself because issuer and audience are set (A7: a missing aud is 401).
    requiredClaims: ['exp'],
  };

  return async function verify(token: string): Promise<JWTPayload> {
    if (typeof token !== 'string' || token.length === 0) throw unauthorized('ERR_JWT_MISSING');
    if (token.length > MAX_TOKEN_LENGTH) throw unauthorized('ERR_JWT_TOO_LARGE');
    let verified: Awaited<ReturnType<typeof jwtVerify>>;
    try {
      verified = await jwtVerify(token, getKey.resolve, verifyOptions);
    } catch (e) {
      throw classify(e);
    }
    const { payload, protectedHeader } = verified;
    // RFC 8725 §3.11: a token of another type (an ID token, a logout token) is not an access token.
    const typ = protectedHeader.typ;
    if (typ !== undefined && !types.has(typ.toLowerCase())) throw unauthorized('ERR_JWT_TYP');
    // A token valid for longer than the operator issues is a leaked signing key or a misissued
    // token; either way it is refused (#13.16).
    const exp = payload.exp as number;
    const from = typeof payload.iat === 'number' ? payload.iat : Date.now() / 1000;
    if (exp - from > maxLifetime) throw unauthorized('ERR_JWT_LIFETIME');
    return payload;
  };
}
