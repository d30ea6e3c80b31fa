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
 */
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  errors,
  type FetchImplementation,
  importSPKI,
  type JSONWebKeySet,
  type JWSHeaderParameters,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from 'jose';
import { ASYMMETRIC_ALGORITHMS as ASYMMETRIC_JWS, SYMMETRIC_ALGORITHMS } from '../config/schema.js';
import type { AuthConfig } from '../config/types.js';
import { describeError, ManifoldError } from '../errors.js';
import { readTextCapped } from '../read-capped.js';

export type { JWTPayload } from 'jose';

export interface VerifierOptions {
  auth: AuthConfig;
  /** The platform's egress-guarded fetch; used only for `auth.jwksUrl`. */
  fetch: typeof fetch;
}

/** RFC 8725 §3.5: the clock skew we accept is small and bounded. */
const MAX_CLOCK_TOLERANCE_SECONDS = 60;
const DEFAULT_CLOCK_TOLERANCE_SECONDS = 30;
const DEFAULT_JWKS_COOLDOWN_SECONDS = 30;
const DEFAULT_JWKS_TIMEOUT_MS = 5000;
/** A11: "within a bounded time" means bounded by config too, not just by default. */
const MAX_JWKS_TIMEOUT_MS = 60_000;
/** A JWK Set is a few KiB; anything larger than this is not one (and is not held in memory). */
const MAX_JWKS_BYTES = 512 * 1024;
/**
 * Tokens longer than this are refused before any parsing. Real access tokens are a few KiB; HTTP
 * runtimes cap header size well below this anyway (Node 16 KiB, Workers 32 KiB).
 */
const MAX_TOKEN_LENGTH = 64 * 1024;

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

type SpkiKind = 'RSA' | 'P-256' | 'P-384' | 'P-521' | 'Ed25519';

/** Algorithms a PEM key of each kind may verify (`allowed`) and those used when none are configured. */
const SPKI_ALGORITHMS: Record<SpkiKind, { allowed: readonly string[]; defaults: readonly string[] }> = {
  RSA: { allowed: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'], defaults: ['RS256', 'PS256'] },
  'P-256': { allowed: ['ES256'], defaults: ['ES256'] },
  'P-384': { allowed: ['ES384'], defaults: ['ES384'] },
  'P-521': { allowed: ['ES512'], defaults: ['ES512'] },
  // RFC 9864's `Ed25519` names the same key and scheme as the polymorphic `EdDSA`; opt-in only.
  Ed25519: { allowed: ['EdDSA', 'Ed25519'], defaults: ['EdDSA'] },
};

/**
 * Why a key source could not be used right now (network, timeout, non-200, redirect, bad body,
 * egress refusal, or a recent such failure). Becomes ERR_AUTH_UNAVAILABLE (503), never 401: the
 * token may be perfectly good, we just cannot tell.
 */
class KeySourceError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'KeySourceError';
  }
}

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
    try {
      const { payload } = await jwtVerify(token, getKey.resolve, verifyOptions);
      return payload;
    } catch (e) {
      throw classify(e);
    }
  };
}

interface KeySource {
  /** The allowlist handed to jwtVerify; jose checks `alg` against it before resolving a key. */
  algorithms: string[];
  resolve: JWTVerifyGetKey | Uint8Array;
}

/** Picks the one configured key source and its algorithm allowlist; throws TypeError on misconfiguration. */
function keySource(auth: AuthConfig, fetchImpl: typeof fetch): KeySource {
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

/** RFC 7517 §5: an object whose `keys` is an array of JWK objects (what jose's isJwkSet accepts). */
function isJwkSetShape(v: unknown): v is { keys: Record<string, unknown>[] } {
  const isObject = (o: unknown) => typeof o === 'object' && o !== null && !Array.isArray(o);
  const keys = isObject(v) ? (v as { keys?: unknown }).keys : undefined;
  return Array.isArray(keys) && keys.every(isObject);
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

/**
 * The remote JWK Set. Built once per verifier, never per request: jose's cache, cooldown and
 * in-flight deduplication live inside this one object (A10).
 *
 * What jose gives us (jose/src/jwks/remote.ts):
 * - an unknown `kid` triggers a refetch only when the last successful fetch is older than the
 *   cooldown, so a new key verifies after at most one refetch and a flood of random `kid`s costs at
 *   most one fetch per cooldown;
 * - keys are refetched anyway after `cacheMaxAge` (10 min), so a key removed from the set stops
 *   verifying; if that refetch fails, tokens are 503 until it succeeds;
 * - on Node one in-flight refetch is shared by every request that waits for it. On Workers jose
 *   deliberately does not share it (it detects the runtime): Cloudflare forbids awaiting another
 *   request's I/O, so there concurrent cold requests each fetch until one lands. Only plain data (the
 *   parsed keys, timestamps) crosses requests, which Workers allow.
 *
 * What we add in the fetch we hand jose:
 * - `redirect: 'manual'` and any non-200 is a failure (A11: a JWKS is never followed through a
 *   redirect, so an open redirect on the IdP cannot point us at attacker keys);
 * - the body is read here, capped at MAX_JWKS_BYTES and bounded by jose's timeout signal, so a
 *   hanging or endless body fails within `jwksTimeoutMs` whatever the runtime's fetch does;
 * - a failure cooldown: jose's cooldown counts from the last *success*, so against a failing
 *   endpoint every unknown `kid` would refetch. After a failure we answer 503 without fetching
 *   until the cooldown has passed, keeping A10's one-fetch-per-cooldown true when the IdP is down
 *   (and not hammering it while it recovers).
 */
function remoteSource(auth: AuthConfig, fetchImpl: typeof fetch): JWTVerifyGetKey {
  if (typeof auth.jwksUrl !== 'string') throw new TypeError('"auth.jwksUrl" must be a URL string');
  if (typeof fetchImpl !== 'function') throw new TypeError('"fetch" option must be a function');
  let url: URL;
  try {
    url = new URL(auth.jwksUrl);
  } catch {
    throw new TypeError('"auth.jwksUrl" must be an absolute URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new TypeError('"auth.jwksUrl" must be an http(s) URL');
  }
  if (url.username || url.password) throw new TypeError('"auth.jwksUrl" must not contain credentials');
  const cooldownSeconds = auth.jwksCooldownSeconds ?? DEFAULT_JWKS_COOLDOWN_SECONDS;
  if (typeof cooldownSeconds !== 'number' || !Number.isFinite(cooldownSeconds) || cooldownSeconds < 0) {
    throw new TypeError('"auth.jwksCooldownSeconds" must be a non-negative number');
  }
  const timeoutMs = auth.jwksTimeoutMs ?? DEFAULT_JWKS_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_JWKS_TIMEOUT_MS) {
    throw new TypeError(`"auth.jwksTimeoutMs" must be an integer from 1 to ${MAX_JWKS_TIMEOUT_MS}`);
  }
  const cooldownMs = cooldownSeconds * 1000;
  // jose measures its cooldown with Date.now(); ours uses the same clock so the two agree.
  let failedAt: number | undefined;

  const jwksFetch: FetchImplementation = async function jwksFetch(href, init) {
    if (failedAt !== undefined && Date.now() - failedAt < cooldownMs) {
      throw new KeySourceError('JWKS fetch failed recently; waiting for the cooldown');
    }
    try {
      const text = await bounded(init.signal, async () => {
        const response = await fetchImpl(href, { ...init, redirect: 'manual' });
        if (response.status !== 200) {
          await response.body?.cancel().catch(() => {});
          // A 3xx lands here too: with redirect 'manual' it is a plain (or opaque, status 0) answer.
          throw new KeySourceError(`JWKS endpoint answered HTTP ${response.status}`);
        }
        return readCapped(response, MAX_JWKS_BYTES);
      });
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new KeySourceError('JWKS endpoint answered something that is not JSON');
      }
      if (!isJwkSetShape(json)) {
        throw new KeySourceError('JWKS endpoint answered something that is not a JWK Set');
      }
      failedAt = undefined;
      return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } });
    } catch (e) {
      failedAt = Date.now();
      if (e instanceof KeySourceError) throw e;
      // Never the URL or the runtime's cause chain (A15): the first line of the message only.
      throw new KeySourceError(`JWKS fetch failed: ${describeError(e)}`);
    }
  };

  return createRemoteJWKSet(url, {
    cooldownDuration: cooldownMs,
    timeoutDuration: timeoutMs,
    [customFetch]: jwksFetch,
  });
}

/** Runs `work`, but settles no later than `signal` aborts, even if the runtime's fetch ignores it. */
function bounded<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new KeySourceError(`JWKS fetch timed out`));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work().then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(signal.aborted ? new KeySourceError('JWKS fetch timed out') : e);
      },
    );
  });
}

/** Reads a body as UTF-8, refusing it once it passes `max` bytes (never holding more). */
async function readCapped(response: Response, max: number): Promise<string> {
  return readTextCapped(
    response.body,
    max,
    () => new KeySourceError(`JWKS response is larger than ${max} bytes`),
  );
}

/** Maps whatever jwtVerify threw onto the two public outcomes. */
function classify(e: unknown): ManifoldError {
  if (e instanceof KeySourceError) {
    return new ManifoldError('ERR_AUTH_UNAVAILABLE', 'authorization keys unavailable', {
      data: { reason: e.reason },
    });
  }
  if (e instanceof errors.JOSEError) {
    // Defensive: with our fetch these should not surface, but a broken remote set is still the key
    // source's fault, not the token's.
    if (e instanceof errors.JWKSTimeout || e instanceof errors.JWKSInvalid) {
      return new ManifoldError('ERR_AUTH_UNAVAILABLE', 'authorization keys unavailable', {
        data: { reason: e.code },
      });
    }
    const claim = e instanceof errors.JWTClaimValidationFailed ? e.claim : undefined;
    return unauthorized(e.code, claim);
  }
  // Anything else (a TypeError from a malformed key or header deep inside jose, say) is still the
  // token's problem as far as the caller is concerned: 401, never 500 (A9).
  return unauthorized(e instanceof Error ? e.name : 'ERR_JWT_INVALID');
}

function unauthorized(reason: string, claim?: string): ManifoldError {
  return new ManifoldError('ERR_UNAUTHORIZED', 'invalid token', {
    data: claim === undefined ? { reason } : { reason, claim },
  });
}

// --- PEM SPKI inspection (RFC 5280 §4.1.2.7, RFC 3279, RFC 5480, RFC 8410) ---

/** DER-encoded OID contents (without tag and length) of the key types we accept. */
const OID_RSA = '2a864886f70d010101'; // 1.2.840.113549.1.1.1 rsaEncryption
const OID_RSA_PSS = '2a864886f70d01010a'; // 1.2.840.113549.1.1.10 id-RSASSA-PSS
const OID_EC = '2a8648ce3d0201'; // 1.2.840.10045.2.1 id-ecPublicKey
const OID_ED25519 = '2b6570'; // 1.3.101.112 id-Ed25519
const EC_CURVES: Record<string, SpkiKind> = {
  '2a8648ce3d030107': 'P-256', // 1.2.840.10045.3.1.7 prime256v1
  '2b81040022': 'P-384', // 1.3.132.0.34 secp384r1
  '2b81040023': 'P-521', // 1.3.132.0.35 secp521r1
};

/**
 * Reads the AlgorithmIdentifier of a PEM SPKI:
 * SubjectPublicKeyInfo ::= SEQUENCE { algorithm SEQUENCE { OID, parameters ANY OPTIONAL }, BIT STRING }
 */
function spkiKind(pem: string): SpkiKind {
  const match = /^-----BEGIN PUBLIC KEY-----([A-Za-z0-9+/=\s]+)-----END PUBLIC KEY-----$/.exec(pem);
  if (!match?.[1]) {
    throw new TypeError(
      pem.startsWith('-----BEGIN CERTIFICATE-----')
        ? '"auth.publicKey" must be an SPKI public key ("BEGIN PUBLIC KEY"), not a certificate'
        : '"auth.publicKey" must be a PEM-encoded SPKI public key ("-----BEGIN PUBLIC KEY-----")',
    );
  }
  let der: Uint8Array;
  try {
    der = Uint8Array.from(atob(match[1].replace(/\s+/g, '')), (c) => c.charCodeAt(0));
  } catch {
    throw new TypeError('"auth.publicKey" is not valid base64 inside its PEM armour');
  }
  const invalid = () => new TypeError('"auth.publicKey" is not a valid SPKI structure');
  let pos = 0;
  /** Reads one DER tag and length; leaves `pos` at the start of the contents and returns their end. */
  const open = (tag: number): number => {
    if (der[pos++] !== tag) throw invalid();
    let len = der[pos++];
    if (len === undefined) throw invalid();
    if (len & 0x80) {
      const n = len & 0x7f;
      if (n === 0 || n > 3) throw invalid();
      len = 0;
      for (let i = 0; i < n; i++) {
        const b = der[pos++];
        if (b === undefined) throw invalid();
        len = len * 256 + b;
      }
    }
    if (pos + len > der.length) throw invalid();
    return pos + len;
  };
  /** Reads a whole OID and returns its contents as hex. */
  const oidHex = (): string => {
    const end = open(0x06);
    const value = der.subarray(pos, end);
    pos = end;
    return Array.from(value, (x) => x.toString(16).padStart(2, '0')).join('');
  };
  open(0x30); // SubjectPublicKeyInfo
  const algorithmEnd = open(0x30); // AlgorithmIdentifier
  const oid = oidHex();
  // EC keys name their curve in `parameters` (RFC 5480 §2.1.1); RSA has NULL, Ed25519 nothing.
  const params = pos < algorithmEnd && der[pos] === 0x06 ? oidHex() : undefined;
  if (oid === OID_RSA) return 'RSA';
  if (oid === OID_ED25519) return 'Ed25519';
  if (oid === OID_EC) {
    const curve = params === undefined ? undefined : EC_CURVES[params];
    if (curve) return curve;
    throw new TypeError('"auth.publicKey" is an EC key on an unsupported curve (use P-256, P-384 or P-521)');
  }
  if (oid === OID_RSA_PSS) {
    throw new TypeError(
      '"auth.publicKey" is an RSASSA-PSS-only key; export it as a plain RSA (rsaEncryption) key',
    );
  }
  throw new TypeError('"auth.publicKey" has an unsupported key type (use RSA, EC P-256/384/521 or Ed25519)');
}
