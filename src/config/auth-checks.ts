/**
 * Checks on the values of `gateway.auth`: URLs, the PEM public key, the shared secret, the
 * algorithm list and the resource indicator. Each reports its own errors; none shows a secret.
 */
import { isLoopbackHost } from './bind.js';
import {
  JWS_ALGORITHMS,
  type KeySource,
  MIN_SECRET_BYTES,
  OPT_IN_ALGORITHMS,
  SYMMETRIC_ALGORITHMS,
} from './defaults.js';
import { error, type Findings, isTainted } from './findings.js';
import { showValue } from './issues.js';
import { formatPath, type PathSegment } from './paths.js';

const ASYMMETRIC_SOURCES: readonly KeySource[] = ['jwksUrl', 'jwksFile', 'publicKey'];

/** An https URL; http is accepted only for a loopback host when `loopbackHttp` is set. */
export function checkHttpsUrl(
  f: Findings,
  value: string,
  path: PathSegment[],
  loopbackHttp: boolean,
): boolean {
  const example = loopbackHttp
    ? 'write an https URL such as "https://auth.example.com/.well-known/jwks.json" (http only for 127.0.0.1 or localhost)'
    : 'write an https URL such as "https://auth.example.com/"';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    error(f, path, 'is not a valid absolute URL', example);
    return false;
  }
  const loopback = isLoopbackHost(url.hostname);
  if (url.protocol !== 'https:' && !(loopbackHttp && loopback && url.protocol === 'http:')) {
    const scheme = isTainted(f, path) ? 'another scheme' : url.protocol;
    const rule = loopbackHttp ? 'https: (http: only for a loopback host)' : 'https:';
    error(f, path, `must use ${rule}, got ${scheme}`, example);
    return false;
  }
  if (url.username !== '' || url.password !== '') {
    error(f, path, 'must not contain a username or password', example);
    return false;
  }
  return true;
}

export function checkPublicKey(f: Findings, pem: string, path: PathSegment[]): void {
  if (pem.includes('PRIVATE KEY-----')) {
    error(
      f,
      path,
      'contains a private key; the gateway needs only the public key',
      'derive the public key with `openssl pkey -in key.pem -pubout`, and keep the private key out of the config',
    );
  } else if (!pem.includes('-----BEGIN PUBLIC KEY-----') || !pem.includes('-----END PUBLIC KEY-----')) {
    error(
      f,
      path,
      'is not a PEM public key: expected -----BEGIN PUBLIC KEY----- ... -----END PUBLIC KEY----- (SPKI)',
      'export the key as SPKI PEM, e.g. `openssl pkey -pubin -in key.pem -pubout`, writing line breaks as \\n; or use jwksFile',
    );
  }
}

export function checkSecret(
  f: Findings,
  secret: string,
  path: PathSegment[],
  algorithms: string[] | undefined,
): void {
  const fix =
    // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
    'generate one with `openssl rand -base64 48`, put it in an environment variable and write "secret": "${JWT_SECRET}"';
  // HS256 unless configured otherwise; the longest hash sets the bar (RFC 7518 §3.2).
  const hmac = (algorithms ?? ['HS256']).filter((a): a is keyof typeof MIN_SECRET_BYTES =>
    Object.hasOwn(MIN_SECRET_BYTES, a),
  );
  const strictest = hmac.reduce((a, b) => (MIN_SECRET_BYTES[b] > MIN_SECRET_BYTES[a] ? b : a), 'HS256');
  const min = MIN_SECRET_BYTES[strictest];
  // Bytes, not characters: HMAC keys are byte strings (and the jose verifier uses the UTF-8 bytes of
  // the string, so `openssl rand -base64 48` gives 64 bytes, enough for HS512). The length is not shown.
  if (new TextEncoder().encode(secret).length < min) {
    const why = strictest === 'HS256' ? 'which is too weak for an HMAC key' : `which ${strictest} needs`;
    error(f, path, `is shorter than ${min} bytes, ${why}`, fix);
  } else if (!isTainted(f, path)) {
    f.warnings.push({
      path: formatPath(path),
      message: 'is written in the config file itself; anyone who can read the file can mint tokens',
      fix,
    });
  }
}

/** `algorithms`, deduplicated; `none`, unknown names and algorithms of the wrong key type are errors. */
export function checkAlgorithms(
  f: Findings,
  algorithms: string[],
  source: KeySource | undefined,
  base: PathSegment[],
): string[] {
  const known: readonly string[] = [...JWS_ALGORITHMS, ...OPT_IN_ALGORITHMS];
  const symmetric = SYMMETRIC_ALGORITHMS as readonly string[];
  const out: string[] = [];
  algorithms.forEach((alg, i) => {
    const path = [...base, i];
    const tainted = isTainted(f, path);
    if (alg.trim().toLowerCase() === 'none') {
      error(
        f,
        path,
        '"none" is never allowed: it would accept unsigned tokens',
        'remove "none"; list signing algorithms such as "ES256"',
      );
      return;
    }
    if (!known.includes(alg)) {
      const near = tainted ? undefined : known.find((k) => k.toLowerCase() === alg.toLowerCase());
      error(
        f,
        path,
        `expected a JWS algorithm (RS256/384/512, PS256/384/512, ES256/384/512, EdDSA, Ed25519 or HS256/384/512), got ${showValue(alg, tainted)}`,
        near
          ? `write ${JSON.stringify(near)}; algorithm names are case-sensitive`
          : 'write an algorithm name such as "ES256"',
      );
      return;
    }
    const hmac = symmetric.includes(alg);
    if (hmac && source !== undefined && ASYMMETRIC_SOURCES.includes(source)) {
      // A public key used as an HMAC secret would let anyone forge tokens (SECURITY A5).
      error(
        f,
        path,
        `${JSON.stringify(alg)} is a shared-secret algorithm and cannot be used with ${JSON.stringify(source)}`,
        `remove ${JSON.stringify(alg)}, or verify with "secret" instead of ${JSON.stringify(source)}`,
      );
      return;
    }
    if (!hmac && source === 'secret') {
      error(
        f,
        path,
        `${JSON.stringify(alg)} needs a public key, but the key source is "secret"`,
        'use HS256, HS384 or HS512 with a secret, or replace secret with jwksUrl, jwksFile or publicKey',
      );
      return;
    }
    if (!out.includes(alg)) out.push(alg);
  });
  return out;
}

export function checkResource(f: Findings, value: string, path: PathSegment[]): void {
  const example = 'write the public URL of the MCP endpoint, e.g. "https://mcp.example.com/mcp"';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    error(f, path, 'is not a valid absolute URL', example);
    return;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    const scheme = isTainted(f, path) ? 'another scheme' : url.protocol;
    error(f, path, `must use the http: or https: scheme, got ${scheme}`, example);
  } else if (url.username !== '' || url.password !== '') {
    error(f, path, 'must not contain a username or password', example);
  } else if (url.hash !== '' || value.includes('#')) {
    // RFC 8707 §2: a resource indicator must not include a fragment.
    error(f, path, 'must not contain a fragment ("#...")', example);
  }
}
