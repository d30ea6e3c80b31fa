/**
 * Key-source construction for the JWT verifier: picks the one configured source (`secret`,
 * `publicKey`, `jwks` or `jwksUrl`), validates it, and fixes the algorithm allowlist for it.
 * Misconfiguration throws a TypeError naming the option, once, when the verifier is built.
 */
import {
  createLocalJWKSet,
  errors,
  importSPKI,
  type JSONWebKeySet,
  type JWSHeaderParameters,
  type JWTVerifyGetKey,
} from 'jose';
import { ASYMMETRIC_ALGORITHMS as ASYMMETRIC_JWS, SYMMETRIC_ALGORITHMS } from '../config/defaults.js';
import type { AuthConfig } from '../config/types.js';
import { describeError } from '../errors.js';
import { KeySourceError } from './jwt-errors.js';
import { isJwkSetShape, remoteSource } from './jwt-jwks.js';
import { type SpkiKind, spkiKind } from './jwt-spki.js';

const HMAC_ALGORITHMS = SYMMETRIC_ALGORITHMS;
/** RFC 7518 §3.2: an HMAC key must be at least as long as the hash output. */
const HMAC_MIN_KEY_BYTES: Record<string, number> = { HS256: 32, HS384: 48, HS512: 64 };
/** The default allowlist for a JWK Set: every asymmetric JWS algorithm of RFC 7518 §3.1 and RFC 8037. */
const JWKS_DEFAULT_ALGORITHMS = ASYMMETRIC_JWS;
/**
 * What `auth.algorithms` may name for a public key source: the defaults, plus RFC 9864's fully
 * specified `Ed25519` (same key, same signature scheme as `EdDSA`), accepted only when configured.
 */
const ASYMMETRIC_ALGORITHMS: readonly string[] = [...JWKS_DEFAULT_ALGORITHMS, 'Ed25519'];

/** Algorithms a PEM key of each kind may verify (`allowed`) and those used when none are configured. */
const SPKI_ALGORITHMS: Record<SpkiKind, { allowed: readonly string[]; defaults: readonly string[] }> = {
  RSA: { allowed: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'], defaults: ['RS256', 'PS256'] },
  'P-256': { allowed: ['ES256'], defaults: ['ES256'] },
  'P-384': { allowed: ['ES384'], defaults: ['ES384'] },
  'P-521': { allowed: ['ES512'], defaults: ['ES512'] },
  // RFC 9864's `Ed25519` names the same key and scheme as the polymorphic `EdDSA`; opt-in only.
  Ed25519: { allowed: ['EdDSA', 'Ed25519'], defaults: ['EdDSA'] },
};

export interface KeySource {
  /** The allowlist handed to jwtVerify; jose checks `alg` against it before resolving a key. */
  algorithms: string[];
  resolve: JWTVerifyGetKey | Uint8Array;
}

/** Picks the one configured key source and its algorithm allowlist; throws TypeError on misconfiguration. */
export function keySource(auth: AuthConfig, fetchImpl: typeof fetch): KeySource {
  if (auth.jwksFile !== undefined && auth.jwks === undefined) {
    throw new TypeError('"auth.jwksFile" must be read by the host and passed as "auth.jwks"');
  }
  const given = (
    [
      ['jwksUrl', auth.jwksUrl],
      ['jwks', auth.jwks],
      ['publicKey', auth.publicKey],
      ['secret', auth.secret],
    ] as const
  ).filter(([, v]) => v !== undefined);
  if (given.length !== 1) {
    throw new TypeError(
      given.length === 0
        ? 'auth needs exactly one key source: "jwksUrl", "jwksFile"/"jwks", "publicKey" or "secret"'
        : `auth needs exactly one key source, got ${given.map(([k]) => `"${k}"`).join(', ')}`,
    );
  }
  const configured = checkAlgorithmList(auth.algorithms);

  if (auth.secret !== undefined) {
    if (typeof auth.secret !== 'string' || auth.secret === '') {
      throw new TypeError('"auth.secret" must be a non-empty string');
    }
    const algorithms = configured ?? ['HS256'];
    for (const alg of algorithms) {
      if (!(HMAC_ALGORITHMS as readonly string[]).includes(alg)) {
        throw new TypeError(
          `"auth.algorithms": "${alg}" cannot be verified with "auth.secret" (HS256, HS384, HS512)`,
        );
      }
    }
    const key = new TextEncoder().encode(auth.secret);
    const minBytes = Math.max(...algorithms.map((a) => HMAC_MIN_KEY_BYTES[a] ?? 0));
    if (key.byteLength < minBytes) {
      throw new TypeError(
        `"auth.secret" must be at least ${minBytes} bytes for ${algorithms.join(', ')} (RFC 7518 §3.2)`,
      );
    }
    return { algorithms, resolve: key };
  }

  // Every other source is asymmetric. RFC 8725 §2.1 / §3.1: an HS* algorithm here would let a
  // forger use the *public* key as an HMAC secret (A5), so it is refused outright, not filtered.
  for (const alg of configured ?? []) {
    if (alg.startsWith('HS')) {
      throw new TypeError(
        `"auth.algorithms": "${alg}" needs a shared secret and is never allowed with a public key source`,
      );
    }
  }

  if (auth.publicKey !== undefined) return pemSource(auth.publicKey, configured);

  for (const alg of configured ?? []) {
    if (!ASYMMETRIC_ALGORITHMS.includes(alg)) {
      throw new TypeError(`"auth.algorithms": "${alg}" is not a supported JWS algorithm`);
    }
  }
  const algorithms = configured ?? [...JWKS_DEFAULT_ALGORITHMS];

  if (auth.jwks !== undefined) {
    checkInlineJwks(auth.jwks);
    // createLocalJWKSet snapshots the set and refuses `oct` keys for any alg (jose: "Unsupported alg
    // value for a JSON Web Key Set"), a second line against symmetric/asymmetric confusion.
    let local: JWTVerifyGetKey;
    try {
      local = createLocalJWKSet(auth.jwks as JSONWebKeySet);
    } catch {
      throw new TypeError('"auth.jwks" must be a JSON Web Key Set: { "keys": [ ...JWK objects ] }');
    }
    return { algorithms, resolve: local };
  }

  return { algorithms, resolve: remoteSource(auth, fetchImpl) };
}

function checkAlgorithmList(algorithms: unknown): string[] | undefined {
  if (algorithms === undefined) return undefined;
  if (
    !Array.isArray(algorithms) ||
    algorithms.length === 0 ||
    !algorithms.every((a) => typeof a === 'string')
  ) {
    throw new TypeError('"auth.algorithms" must be a non-empty array of strings');
  }
  for (const alg of algorithms) {
    // RFC 8725 §3.1: `none` is never acceptable for a token that grants access.
    if (alg.toLowerCase() === 'none') throw new TypeError('"auth.algorithms" must not contain "none"');
  }
  return [...new Set(algorithms as string[])];
}

function checkInlineJwks(jwks: unknown): void {
  if (!isJwkSetShape(jwks)) {
    throw new TypeError('"auth.jwks" must be a JSON Web Key Set: { "keys": [ ...JWK objects ] }');
  }
  if (jwks.keys.length === 0) throw new TypeError('"auth.jwks" must contain at least one key');
  for (const k of jwks.keys) {
    // A private or symmetric key in config is a leaked secret, not a verification key.
    if (k.kty === 'oct' || 'd' in k || 'k' in k) {
      throw new TypeError('"auth.jwks" must contain public keys only (no "oct" keys, no private members)');
    }
  }
}

/**
 * A PEM SPKI key. Its type is read from the DER (synchronously, so a wrong key fails at
 * construction), and each allowed alg gets its own CryptoKey: Web Crypto binds a key to one
 * algorithm, e.g. an RSA key imported for RS256 cannot verify PS256.
 */
function pemSource(pem: unknown, configured: string[] | undefined): KeySource {
  if (typeof pem !== 'string' || pem.trim() === '') {
    throw new TypeError('"auth.publicKey" must be a PEM-encoded SPKI public key');
  }
  const text = pem.trim();
  const kind = spkiKind(text);
  const { allowed, defaults } = SPKI_ALGORITHMS[kind];
  for (const alg of configured ?? []) {
    if (!allowed.includes(alg)) {
      throw new TypeError(`"auth.algorithms": "${alg}" cannot be verified with a ${kind} "auth.publicKey"`);
    }
  }
  const algorithms = configured ?? [...defaults];
  // Imported lazily (Workers forbid crypto work in global scope) and once per alg.
  const imported = new Map<string, Promise<CryptoKey>>();
  const resolve = async function resolvePublicKey(header: JWSHeaderParameters): Promise<CryptoKey> {
    const alg = header.alg;
    // jose has already checked `alg` against the allowlist; this is belt and braces.
    if (typeof alg !== 'string' || !algorithms.includes(alg)) {
      throw new errors.JOSEAlgNotAllowed('"alg" (Algorithm) Header Parameter value not allowed');
    }
    let key = imported.get(alg);
    if (!key) {
      key = importSPKI(text, alg).then(
        (k) => {
          // RFC 7518 §3.3: RSA keys of 2048 bits or more. jose checks this too, but only inside
          // verify, as a TypeError that would read as a bad token rather than a bad config.
          const bits = (k.algorithm as { modulusLength?: number }).modulusLength;
          if (bits !== undefined && bits < 2048) {
            throw new KeySourceError(
              `the configured RSA public key has ${bits} bits; 2048 or more are required`,
            );
          }
          return k;
        },
        (e: unknown) => {
          throw new KeySourceError(
            `the configured public key cannot be imported for ${alg}: ${describeError(e)}`,
          );
        },
      );
      imported.set(alg, key);
    }
    return key;
  };
  return { algorithms, resolve };
}
