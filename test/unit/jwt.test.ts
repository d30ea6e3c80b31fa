import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as fc from 'fast-check';
import {
  base64url,
  type CryptoKey,
  exportJWK,
  exportPKCS8,
  exportSPKI,
  generateKeyPair,
  importPKCS8,
  type JWK,
  type JWTPayload,
  SignJWT,
} from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createAuthenticator } from '../../src/auth/authenticate.js';
import { createVerifier } from '../../src/auth/jwt.js';
import type { AuthConfig } from '../../src/config/types.js';
import { ManifoldError } from '../../src/errors.js';

const ISSUER = 'https://issuer.example';
const AUDIENCE = 'https://gateway.example/mcp';

function authConfig(over: Partial<AuthConfig> = {}): AuthConfig {
  return {
    issuer: ISSUER,
    audience: AUDIENCE,
    clockToleranceSeconds: 30,
    maxTokenLifetimeSeconds: 86_400,
    tokenTypes: ['JWT', 'at+jwt'],
    tenantClaim: 'sub',
    tenants: {},
    authorizationServers: [],
    jwksCooldownSeconds: 30,
    jwksTimeoutMs: 5000,
    ...over,
  };
}

const now = () => Math.floor(Date.now() / 1000);

interface MintOptions {
  alg?: string;
  kid?: string;
  iss?: string | null;
  aud?: string | null;
  exp?: number | null;
  nbf?: number;
  claims?: JWTPayload;
}

/** A token signed by jose; `null` leaves a registered claim out. */
function mint(key: CryptoKey | Uint8Array, o: MintOptions = {}): Promise<string> {
  const jwt = new SignJWT({ scope: 'tools:*', ...o.claims })
    .setProtectedHeader({ alg: o.alg ?? 'ES256', ...(o.kid === undefined ? {} : { kid: o.kid }) })
    .setSubject('user-1')
    .setIssuedAt();
  if (o.iss !== null) jwt.setIssuer(o.iss ?? ISSUER);
  if (o.aud !== null) jwt.setAudience(o.aud ?? AUDIENCE);
  if (o.exp !== null) jwt.setExpirationTime(o.exp ?? now() + 300);
  if (o.nbf !== undefined) jwt.setNotBefore(o.nbf);
  return jwt.sign(key);
}

/** A compact JWS with any header and payload, unsigned or with the given signature segment. */
function craft(header: unknown, payload: unknown, signature = ''): string {
  const enc = (v: unknown) => base64url.encode(JSON.stringify(v));
  return `${enc(header)}.${enc(payload)}.${signature}`;
}

function claims(over: JWTPayload = {}): JWTPayload {
  return { sub: 'user-1', iss: ISSUER, aud: AUDIENCE, exp: now() + 300, iat: now(), ...over };
}

async function rejection(p: Promise<unknown>): Promise<ManifoldError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(ManifoldError);
  return e as ManifoldError;
}

async function unauthorized(p: Promise<unknown>, reason?: string): Promise<ManifoldError> {
  const e = await rejection(p);
  expect(e.code).toBe('ERR_UNAUTHORIZED');
  expect(e.publicMessage).toBe('invalid token');
  if (reason) expect(e.data?.reason).toBe(reason);
  return e;
}

interface Keys {
  es: { publicKey: CryptoKey; privateKey: CryptoKey; pem: string; jwk: JWK };
  rs: { publicKey: CryptoKey; privateKey: CryptoKey; pem: string; jwk: JWK };
  other: { publicKey: CryptoKey; privateKey: CryptoKey; jwk: JWK };
}

let keys: Keys;

async function pair(alg: string, kid?: string) {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), alg, ...(kid ? { kid } : {}) };
  return { publicKey, privateKey, pem: await exportSPKI(publicKey), jwk };
}

beforeAll(async () => {
  keys = {
    es: await pair('ES256', 'es-1'),
    rs: await pair('RS256', 'rs-1'),
    other: await pair('ES256', 'x'),
  };
});

describe('createVerifier: construction', () => {
  it('needs exactly one key source', () => {
    expect(() => createVerifier({ auth: authConfig(), fetch })).toThrow(
      'auth needs exactly one key source: "jwksUrl", "jwksFile"/"jwks", "publicKey" or "secret"',
    );
    expect(() =>
      createVerifier({ auth: authConfig({ publicKey: keys.es.pem, secret: 'x'.repeat(32) }), fetch }),
    ).toThrow('auth needs exactly one key source, got "publicKey", "secret"');
    expect(() => createVerifier({ auth: authConfig({ jwksFile: '/etc/jwks.json' }), fetch })).toThrow(
      '"auth.jwksFile" must be read by the host and passed as "auth.jwks"',
    );
  });

  it('validates issuer, audience, timeouts and the key material', () => {
    expect(() => createVerifier({ auth: authConfig({ issuer: '', secret: 'x'.repeat(32) }), fetch })).toThrow(
      TypeError,
    );
    expect(() =>
      createVerifier({ auth: authConfig({ audience: '', secret: 'x'.repeat(32) }), fetch }),
    ).toThrow('"auth.audience" must be a non-empty string');
    expect(() => createVerifier({ auth: authConfig({ secret: 'short' }), fetch })).toThrow(
      '"auth.secret" must be at least 32 bytes for HS256 (RFC 7518 §3.2)',
    );
    expect(() =>
      createVerifier({ auth: authConfig({ jwksUrl: 'https://idp.example/jwks', jwksTimeoutMs: 0 }), fetch }),
    ).toThrow('"auth.jwksTimeoutMs" must be an integer from 1 to 60000');
    expect(() => createVerifier({ auth: authConfig({ jwksUrl: 'not a url' }), fetch })).toThrow(
      '"auth.jwksUrl" must be an absolute URL',
    );
    expect(() => createVerifier({ auth: authConfig({ publicKey: 'hello' }), fetch })).toThrow(
      '"auth.publicKey" must be a PEM-encoded SPKI public key ("-----BEGIN PUBLIC KEY-----")',
    );
    expect(() =>
      createVerifier({
        auth: authConfig({ publicKey: '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----' }),
        fetch,
      }),
    ).toThrow('"auth.publicKey" is not a valid SPKI structure');
    expect(() =>
      createVerifier({ auth: authConfig({ jwks: { keys: [{ kty: 'oct', k: 'c2VjcmV0' }] } }), fetch }),
    ).toThrow('"auth.jwks" must contain public keys only (no "oct" keys, no private members)');
    expect(() => createVerifier({ auth: authConfig({ jwks: { keys: [] } }), fetch })).toThrow(
      '"auth.jwks" must contain at least one key',
    );
    expect(() => createVerifier({ auth: authConfig({ jwks: { keys: 'x' } as never }), fetch })).toThrow(
      '"auth.jwks" must be a JSON Web Key Set: { "keys": [ ...JWK objects ] }',
    );
  });

  it('refuses "none" and HS* with an asymmetric source, and algorithms that do not fit the key', () => {
    expect(() =>
      createVerifier({ auth: authConfig({ publicKey: keys.es.pem, algorithms: ['ES256', 'none'] }), fetch }),
    ).toThrow('"auth.algorithms" must not contain "none"');
    expect(() =>
      createVerifier({ auth: authConfig({ secret: 'x'.repeat(32), algorithms: ['NONE'] }), fetch }),
    ).toThrow('"auth.algorithms" must not contain "none"');
    expect(() =>
      createVerifier({ auth: authConfig({ publicKey: keys.rs.pem, algorithms: ['HS256'] }), fetch }),
    ).toThrow(
      '"auth.algorithms": "HS256" needs a shared secret and is never allowed with a public key source',
    );
    expect(() =>
      createVerifier({
        auth: authConfig({ jwks: { keys: [keys.rs.jwk] }, algorithms: ['RS256', 'HS512'] }),
        fetch,
      }),
    ).toThrow(
      '"auth.algorithms": "HS512" needs a shared secret and is never allowed with a public key source',
    );
    expect(() =>
      createVerifier({
        auth: authConfig({ jwksUrl: 'https://idp.example/jwks', algorithms: ['HS256'] }),
        fetch,
      }),
    ).toThrow(TypeError);
    expect(() =>
      createVerifier({ auth: authConfig({ secret: 'x'.repeat(32), algorithms: ['RS256'] }), fetch }),
    ).toThrow('"auth.algorithms": "RS256" cannot be verified with "auth.secret" (HS256, HS384, HS512)');
    expect(() =>
      createVerifier({ auth: authConfig({ publicKey: keys.es.pem, algorithms: ['RS256'] }), fetch }),
    ).toThrow('"auth.algorithms": "RS256" cannot be verified with a P-256 "auth.publicKey"');
    expect(() =>
      createVerifier({ auth: authConfig({ jwks: { keys: [keys.rs.jwk] }, algorithms: ['XX1'] }), fetch }),
    ).toThrow('"auth.algorithms": "XX1" is not a supported JWS algorithm');
  });

  it('detects the PEM key type and defaults its algorithms (RSA: RS256 and PS256; P-384: ES384; Ed25519: EdDSA)', async () => {
    const rsa = createVerifier({ auth: authConfig({ publicKey: keys.rs.pem }), fetch });
    await expect(rsa(await mint(keys.rs.privateKey, { alg: 'RS256' }))).resolves.toMatchObject({
      sub: 'user-1',
    });
    const ps = await generateKeyPair('PS256');
    const psVerify = createVerifier({
      auth: authConfig({ publicKey: await exportSPKI(ps.publicKey) }),
      fetch,
    });
    await expect(psVerify(await mint(ps.privateKey, { alg: 'PS256' }))).resolves.toMatchObject({
      sub: 'user-1',
    });
    // Other RSA algorithms only when configured.
    await unauthorized(rsa(craft({ alg: 'RS512' }, claims(), 'AAAA')), 'ERR_JOSE_ALG_NOT_ALLOWED');
    const rs512 = await generateKeyPair('RS512');
    const only512 = createVerifier({
      auth: authConfig({ publicKey: await exportSPKI(rs512.publicKey), algorithms: ['RS512'] }),
      fetch,
    });
    await expect(only512(await mint(rs512.privateKey, { alg: 'RS512' }))).resolves.toBeTruthy();
    await unauthorized(only512(await mint(keys.rs.privateKey, { alg: 'RS256' })), 'ERR_JOSE_ALG_NOT_ALLOWED');

    const p384 = await generateKeyPair('ES384');
    const v384 = createVerifier({ auth: authConfig({ publicKey: await exportSPKI(p384.publicKey) }), fetch });
    await expect(v384(await mint(p384.privateKey, { alg: 'ES384' }))).resolves.toBeTruthy();

    const ed = await generateKeyPair('EdDSA');
    const vEd = createVerifier({ auth: authConfig({ publicKey: await exportSPKI(ed.publicKey) }), fetch });
    await expect(vEd(await mint(ed.privateKey, { alg: 'EdDSA' }))).resolves.toBeTruthy();
    // RFC 9864's fully specified name for the same scheme: only when configured.
    await unauthorized(vEd(await mint(ed.privateKey, { alg: 'Ed25519' })), 'ERR_JOSE_ALG_NOT_ALLOWED');
    const vEd25519 = createVerifier({
      auth: authConfig({ publicKey: await exportSPKI(ed.publicKey), algorithms: ['Ed25519'] }),
      fetch,
    });
    await expect(vEd25519(await mint(ed.privateKey, { alg: 'Ed25519' }))).resolves.toBeTruthy();

    const hs = createVerifier({ auth: authConfig({ secret: 's'.repeat(32) }), fetch });
    await expect(
      hs(await mint(new TextEncoder().encode('s'.repeat(32)), { alg: 'HS256' })),
    ).resolves.toBeTruthy();
  });
});

describe('configured key problems are 503, not 401', () => {
  it('an RSA public key under 2048 bits verifies nothing and says so', async () => {
    const weak = await crypto.subtle.generateKey(
      {
        name: 'RSASSA-PKCS1-v1_5',
        modulusLength: 1024,
        publicExponent: new Uint8Array([1, 0, 1]),
        hash: 'SHA-256',
      },
      true,
      ['sign', 'verify'],
    );
    const verify = createVerifier({
      auth: authConfig({ publicKey: await exportSPKI(weak.publicKey) }),
      fetch,
    });
    const e = await rejection(verify(craft({ alg: 'RS256' }, claims(), 'AAAA')));
    expect(e.code).toBe('ERR_AUTH_UNAVAILABLE');
    expect(e.data?.reason).toBe('the configured RSA public key has 1024 bits; 2048 or more are required');
  });
});

describe('A5: algorithms', () => {
  it('A5: alg none is rejected', async () => {
    const verify = createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch });
    for (const alg of ['none', 'None', 'NONE']) {
      await unauthorized(verify(craft({ alg, typ: 'JWT' }, claims())));
    }
    const jwks = createVerifier({ auth: authConfig({ jwks: { keys: [keys.es.jwk] } }), fetch });
    await unauthorized(jwks(craft({ alg: 'none' }, claims())), 'ERR_JOSE_ALG_NOT_ALLOWED');
    const hs = createVerifier({ auth: authConfig({ secret: 's'.repeat(32) }), fetch });
    await unauthorized(hs(craft({ alg: 'none' }, claims())), 'ERR_JOSE_ALG_NOT_ALLOWED');
  });

  it('A5: an unsigned token', async () => {
    const verify = createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch });
    const good = await mint(keys.es.privateKey);
    const [h, p] = good.split('.') as [string, string, string];
    await unauthorized(verify(`${h}.${p}.`));
    await unauthorized(verify(`${h}.${p}`));
    await unauthorized(verify(craft({ alg: 'ES256' }, claims())));
    // The signature of another token over another payload.
    const sig = (await mint(keys.es.privateKey, { claims: { sub: 'admin' } })).split('.')[2];
    await unauthorized(verify(`${h}.${base64url.encode(JSON.stringify(claims({ sub: 'admin' })))}.${sig}`));
  });

  it('A5: an algorithm outside the allowlist', async () => {
    // Inline JWKS holds both keys, but only ES256 is allowed.
    const verify = createVerifier({
      auth: authConfig({ jwks: { keys: [keys.es.jwk, keys.rs.jwk] }, algorithms: ['ES256'] }),
      fetch,
    });
    await expect(verify(await mint(keys.es.privateKey, { kid: 'es-1' }))).resolves.toBeTruthy();
    await unauthorized(
      verify(await mint(keys.rs.privateKey, { alg: 'RS256', kid: 'rs-1' })),
      'ERR_JOSE_ALG_NOT_ALLOWED',
    );
    const es = createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch });
    await unauthorized(es(await mint(keys.rs.privateKey, { alg: 'RS256' })), 'ERR_JOSE_ALG_NOT_ALLOWED');
  });

  it('A5: HS256 signed with the RSA public key as the secret', async () => {
    const pemSecret = new TextEncoder().encode(keys.rs.pem);
    const jwkSecret = new TextEncoder().encode(JSON.stringify(keys.rs.jwk));
    const pem = createVerifier({ auth: authConfig({ publicKey: keys.rs.pem }), fetch });
    await unauthorized(pem(await mint(pemSecret, { alg: 'HS256' })), 'ERR_JOSE_ALG_NOT_ALLOWED');
    const jwks = createVerifier({ auth: authConfig({ jwks: { keys: [keys.rs.jwk] } }), fetch });
    await unauthorized(
      jwks(await mint(pemSecret, { alg: 'HS256', kid: 'rs-1' })),
      'ERR_JOSE_ALG_NOT_ALLOWED',
    );
    await unauthorized(
      jwks(await mint(jwkSecret, { alg: 'HS256', kid: 'rs-1' })),
      'ERR_JOSE_ALG_NOT_ALLOWED',
    );
    // And no configuration can make it work: HS* with a public key source does not construct.
    expect(() =>
      createVerifier({ auth: authConfig({ publicKey: keys.rs.pem, algorithms: ['HS256'] }), fetch }),
    ).toThrow(TypeError);
  });
});

describe('A6: keys', () => {
  it('A6: unknown signing key / unknown kid / kid-alg mismatch', async () => {
    const pem = createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch });
    await unauthorized(pem(await mint(keys.other.privateKey)), 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED');

    const jwks = createVerifier({ auth: authConfig({ jwks: { keys: [keys.es.jwk, keys.rs.jwk] } }), fetch });
    await expect(jwks(await mint(keys.es.privateKey, { kid: 'es-1' }))).resolves.toBeTruthy();
    // Unknown signing key under a known kid.
    await unauthorized(
      jwks(await mint(keys.other.privateKey, { kid: 'es-1' })),
      'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
    );
    // Unknown kid, even when the key itself is in the set.
    await unauthorized(jwks(await mint(keys.es.privateKey, { kid: 'nope' })), 'ERR_JWKS_NO_MATCHING_KEY');
    // kid of the EC key with an RSA alg; kid of the RSA key (alg RS256) with PS256.
    await unauthorized(
      jwks(await mint(keys.rs.privateKey, { alg: 'RS256', kid: 'es-1' })),
      'ERR_JWKS_NO_MATCHING_KEY',
    );
    // The same RSA key material signing PS256, under a kid whose JWK says RS256.
    const asPss = await importPKCS8(await exportPKCS8(keys.rs.privateKey), 'PS256');
    await unauthorized(jwks(await mint(asPss, { alg: 'PS256', kid: 'rs-1' })), 'ERR_JWKS_NO_MATCHING_KEY');
  });
});

describe('A7: issuer and audience', () => {
  it('A7: wrong iss / wrong aud / missing aud', async () => {
    const verify = createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch });
    const k = keys.es.privateKey;
    const e1 = await unauthorized(verify(await mint(k, { iss: 'https://evil.example' })));
    expect(e1.data).toMatchObject({ reason: 'ERR_JWT_CLAIM_VALIDATION_FAILED', claim: 'iss' });
    await unauthorized(verify(await mint(k, { iss: null })), 'ERR_JWT_CLAIM_VALIDATION_FAILED');
    const e2 = await unauthorized(verify(await mint(k, { aud: 'https://other.example/mcp' })));
    expect(e2.data).toMatchObject({ claim: 'aud' });
    const e3 = await unauthorized(verify(await mint(k, { aud: null })));
    expect(e3.data).toMatchObject({ claim: 'aud' });
    // An array audience that contains ours is fine (RFC 7519 §4.1.3).
    await expect(
      verify(await mint(k, { claims: { aud: ['https://other.example', AUDIENCE] }, aud: null })),
    ).resolves.toBeTruthy();
  });
});

describe('A8: time', () => {
  it('A8: expired / future nbf / missing exp / tolerance capped at 60 s', async () => {
    const verify = createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch });
    const k = keys.es.privateKey;
    await unauthorized(verify(await mint(k, { exp: now() - 120 })), 'ERR_JWT_EXPIRED');
    await unauthorized(verify(await mint(k, { nbf: now() + 120 })), 'ERR_JWT_CLAIM_VALIDATION_FAILED');
    const e = await unauthorized(verify(await mint(k, { exp: null })));
    expect(e.data).toMatchObject({ reason: 'ERR_JWT_CLAIM_VALIDATION_FAILED', claim: 'exp' });
    // Within the 30 s tolerance: accepted; beyond it: refused.
    await expect(verify(await mint(k, { exp: now() - 10 }))).resolves.toBeTruthy();
    await expect(verify(await mint(k, { nbf: now() + 10 }))).resolves.toBeTruthy();
    await unauthorized(verify(await mint(k, { exp: now() - 45 })), 'ERR_JWT_EXPIRED');

    expect(() =>
      createVerifier({ auth: authConfig({ publicKey: keys.es.pem, clockToleranceSeconds: 61 }), fetch }),
    ).toThrow('"auth.clockToleranceSeconds" must be a number from 0 to 60');
    expect(() =>
      createVerifier({ auth: authConfig({ publicKey: keys.es.pem, clockToleranceSeconds: -1 }), fetch }),
    ).toThrow(TypeError);
    const strict = createVerifier({
      auth: authConfig({ publicKey: keys.es.pem, clockToleranceSeconds: 0 }),
      fetch,
    });
    await unauthorized(strict(await mint(k, { exp: now() - 5 })), 'ERR_JWT_EXPIRED');
    const lax = createVerifier({
      auth: authConfig({ publicKey: keys.es.pem, clockToleranceSeconds: 60 }),
      fetch,
    });
    await expect(lax(await mint(k, { exp: now() - 50 }))).resolves.toBeTruthy();
    await unauthorized(lax(await mint(k, { exp: now() - 75 })), 'ERR_JWT_EXPIRED');
  });
});

describe('A9: garbage', () => {
  const enc = (v: string | Uint8Array) => base64url.encode(v);
  const anyJson = fc.jsonValue().map((v) => enc(JSON.stringify(v)));
  const headerish = fc
    .record(
      {
        alg: fc.oneof(
          fc.constantFrom('ES256', 'RS256', 'HS256', 'PS256', 'EdDSA', 'none', ''),
          fc.string(),
          fc.jsonValue(),
        ),
        kid: fc.oneof(fc.constantFrom('es-1', 'rs-1'), fc.string(), fc.jsonValue()),
        typ: fc.jsonValue(),
        crit: fc.oneof(fc.constant(['b64']), fc.constant(['exp']), fc.jsonValue()),
        b64: fc.jsonValue(),
        jwk: fc.jsonValue(),
      },
      { requiredKeys: [] },
    )
    .map((h) => enc(JSON.stringify(h)));
  const payloadish = fc
    .record(
      {
        sub: fc.jsonValue(),
        iss: fc.oneof(fc.constant(ISSUER), fc.jsonValue()),
        aud: fc.oneof(fc.constant(AUDIENCE), fc.jsonValue()),
        exp: fc.oneof(fc.integer(), fc.double(), fc.jsonValue()),
        nbf: fc.jsonValue(),
        iat: fc.jsonValue(),
      },
      { requiredKeys: [] },
    )
    .map((p) => enc(JSON.stringify(p)));
  const segment = fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary' }),
    anyJson,
    fc.uint8Array({ maxLength: 600 }).map(enc),
    fc.constantFrom('', '.', '=', '==', 'e30', 'bnVsbA', '%%%', ' '),
  );
  const token = fc.oneof(
    fc.string({ unit: 'binary' }),
    fc.array(segment, { minLength: 0, maxLength: 6 }).map((parts) => parts.join('.')),
    fc.tuple(headerish, payloadish, segment).map((p) => p.join('.')),
    fc.tuple(headerish, segment, segment).map((p) => p.join('.')),
  );

  it('A9: garbage header/payload/signature is 401 never 500', async () => {
    const verifiers = [
      createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch }),
      createVerifier({ auth: authConfig({ jwks: { keys: [keys.es.jwk, keys.rs.jwk] } }), fetch }),
      createVerifier({ auth: authConfig({ secret: 's'.repeat(32) }), fetch }),
    ];
    await fc.assert(
      fc.asyncProperty(token, async (t) => {
        for (const verify of verifiers) {
          const e = await verify(t).then(
            () => undefined,
            (x: unknown) => x,
          );
          expect(e).toBeInstanceOf(ManifoldError);
          expect((e as ManifoldError).code).toBe('ERR_UNAUTHORIZED');
          expect((e as ManifoldError).publicMessage).toBe('invalid token');
          // The token never travels in the error (A15).
          if (t.length > 8) expect(JSON.stringify((e as ManifoldError).data)).not.toContain(t);
        }
      }),
      { numRuns: 300 },
    );
    for (const verify of verifiers) {
      await unauthorized(verify(undefined as never));
      await unauthorized(verify(42 as never));
      await unauthorized(verify('a'.repeat(100_000)), 'ERR_JWT_TOO_LARGE');
    }
  });

  it('A9: a valid token with one segment replaced is 401', async () => {
    const verify = createVerifier({ auth: authConfig({ jwks: { keys: [keys.es.jwk] } }), fetch });
    const good = await mint(keys.es.privateKey, { kid: 'es-1' });
    await expect(verify(good)).resolves.toBeTruthy();
    const parts = good.split('.');
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 2 }),
        fc.oneof(segment, headerish, payloadish),
        async (i, replacement) => {
          // Only a change of the decoded signature bytes counts: base64url padding bits are free.
          const same =
            i === 2
              ? (() => {
                  try {
                    return (
                      Buffer.from(base64url.decode(replacement)).equals(
                        Buffer.from(base64url.decode(parts[2]!)),
                      ) && /^[A-Za-z0-9_-]*$/.test(replacement)
                    );
                  } catch {
                    return false;
                  }
                })()
              : replacement === parts[i];
          fc.pre(!same);
          const t = parts.map((p, j) => (j === i ? replacement : p)).join('.');
          await unauthorized(verify(t));
        },
      ),
      { numRuns: 300 },
    );
  });
});

// --- JWKS over real loopback HTTP ---

interface JwksServer {
  server: Server;
  url: string;
  hits: () => number;
  set: (behaviour: Behaviour) => void;
}

type Behaviour =
  | { kind: 'keys'; keys: JWK[] }
  | { kind: 'status'; status: number }
  | { kind: 'hang' }
  | { kind: 'redirect'; location: string };

async function jwksServer(initial: Behaviour): Promise<JwksServer> {
  let behaviour = initial;
  let count = 0;
  const server = createServer((_req, res: ServerResponse) => {
    count++;
    const b = behaviour;
    if (b.kind === 'hang') return; // never answers
    if (b.kind === 'status') {
      res.writeHead(b.status, { 'content-type': 'text/plain' }).end('nope');
    } else if (b.kind === 'redirect') {
      res.writeHead(302, { location: b.location }).end();
    } else {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: b.keys }));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    url: `http://127.0.0.1:${port}/jwks.json`,
    hits: () => count,
    set: (b) => {
      behaviour = b;
    },
  };
}

const servers: JwksServer[] = [];
async function startJwks(initial: Behaviour): Promise<JwksServer> {
  const s = await jwksServer(initial);
  servers.push(s);
  return s;
}

afterEach(async () => {
  vi.useRealTimers();
  for (const s of servers.splice(0)) {
    s.server.closeAllConnections();
    await new Promise<void>((r) => s.server.close(() => r()));
  }
});

/** Freezes Date (jose's cooldown clock) so cooldowns pass on command; sockets and timers stay real. */
function freezeDate(): { advance: (seconds: number) => void } {
  vi.useFakeTimers({ toFake: ['Date'] });
  let t = Date.now();
  vi.setSystemTime(t);
  return {
    advance: (seconds) => {
      t += seconds * 1000;
      vi.setSystemTime(t);
    },
  };
}

describe('A10: JWKS rotation and floods (real loopback JWKS)', () => {
  it('A10: JWKS rotation: a new kid verifies after at most one refetch; a flood of random kids causes at most one fetch per cooldown', async () => {
    const clock = freezeDate();
    const jwks = await startJwks({ kind: 'keys', keys: [keys.es.jwk] });
    const verify = createVerifier({
      auth: authConfig({ jwksUrl: jwks.url, jwksCooldownSeconds: 30 }),
      fetch,
    });
    await expect(verify(await mint(keys.es.privateKey, { kid: 'es-1' }))).resolves.toBeTruthy();
    expect(jwks.hits()).toBe(1);

    // A flood of random kids right after a fetch: nothing fetched at all.
    const flood = async (n: number) => {
      const tokens = await Promise.all(
        Array.from({ length: n }, () => mint(keys.other.privateKey, { kid: crypto.randomUUID() })),
      );
      const results = await Promise.all(tokens.map((t) => rejection(verify(t))));
      for (const e of results) expect(e.code).toBe('ERR_UNAUTHORIZED');
      // And sequentially, after the concurrent burst.
      for (const t of tokens.slice(0, 10)) await unauthorized(verify(t), 'ERR_JWKS_NO_MATCHING_KEY');
    };
    await flood(50);
    expect(jwks.hits()).toBe(1);

    // Each cooldown that passes allows exactly one more fetch, however large the flood.
    clock.advance(31);
    await flood(50);
    expect(jwks.hits()).toBe(2);
    clock.advance(31);
    await flood(50);
    expect(jwks.hits()).toBe(3);

    // Rotation: the IdP publishes a new key. Once the cooldown allows, one refetch picks it up.
    jwks.set({ kind: 'keys', keys: [keys.es.jwk, keys.rs.jwk] });
    clock.advance(31);
    await expect(verify(await mint(keys.rs.privateKey, { alg: 'RS256', kid: 'rs-1' }))).resolves.toBeTruthy();
    expect(jwks.hits()).toBe(4);
    // Both keys now verify from the cache.
    await expect(verify(await mint(keys.rs.privateKey, { alg: 'RS256', kid: 'rs-1' }))).resolves.toBeTruthy();
    await expect(verify(await mint(keys.es.privateKey, { kid: 'es-1' }))).resolves.toBeTruthy();
    expect(jwks.hits()).toBe(4);
  });

  it('A10: a new kid right after startup verifies with exactly one refetch', async () => {
    const clock = freezeDate();
    const jwks = await startJwks({ kind: 'keys', keys: [keys.es.jwk] });
    const verify = createVerifier({ auth: authConfig({ jwksUrl: jwks.url, jwksCooldownSeconds: 5 }), fetch });
    await expect(verify(await mint(keys.es.privateKey, { kid: 'es-1' }))).resolves.toBeTruthy();
    jwks.set({ kind: 'keys', keys: [keys.rs.jwk] });
    clock.advance(6);
    await expect(verify(await mint(keys.rs.privateKey, { alg: 'RS256', kid: 'rs-1' }))).resolves.toBeTruthy();
    expect(jwks.hits()).toBe(2);
  });

  it('A10: a failing JWKS endpoint is asked at most once per cooldown too', async () => {
    const clock = freezeDate();
    const jwks = await startJwks({ kind: 'status', status: 500 });
    const verify = createVerifier({
      auth: authConfig({ jwksUrl: jwks.url, jwksCooldownSeconds: 30 }),
      fetch,
    });
    for (let i = 0; i < 20; i++) {
      const e = await rejection(verify(await mint(keys.es.privateKey, { kid: crypto.randomUUID() })));
      expect(e.code).toBe('ERR_AUTH_UNAVAILABLE');
    }
    expect(jwks.hits()).toBe(1);
    // Recovered, and the cooldown has passed: the next token verifies.
    jwks.set({ kind: 'keys', keys: [keys.es.jwk] });
    clock.advance(31);
    await expect(verify(await mint(keys.es.privateKey, { kid: 'es-1' }))).resolves.toBeTruthy();
    expect(jwks.hits()).toBe(2);
  });
});

describe('A11: JWKS endpoint failures (real loopback servers)', () => {
  it('A11: a JWKS endpoint that hangs gives 503 within the timeout; a JWKS redirect is not followed', async () => {
    const hang = await startJwks({ kind: 'hang' });
    const verify = createVerifier({ auth: authConfig({ jwksUrl: hang.url, jwksTimeoutMs: 300 }), fetch });
    const started = performance.now();
    const e = await rejection(verify(await mint(keys.es.privateKey, { kid: 'es-1' })));
    const elapsed = performance.now() - started;
    expect(e.code).toBe('ERR_AUTH_UNAVAILABLE');
    expect(e.publicMessage).toBe('authorization keys unavailable');
    expect(e.data?.reason).toBe('JWKS fetch timed out');
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(3000);
    expect(hang.hits()).toBe(1);

    // The redirect target serves a perfectly good JWKS, and is never asked.
    const target = await startJwks({ kind: 'keys', keys: [keys.es.jwk] });
    const redirect = await startJwks({ kind: 'redirect', location: target.url });
    const viaRedirect = createVerifier({ auth: authConfig({ jwksUrl: redirect.url }), fetch });
    const r = await rejection(viaRedirect(await mint(keys.es.privateKey, { kid: 'es-1' })));
    expect(r.code).toBe('ERR_AUTH_UNAVAILABLE');
    expect(r.data?.reason).toBe('JWKS endpoint answered HTTP 302');
    expect(redirect.hits()).toBe(1);
    expect(target.hits()).toBe(0);
  });

  it('A11: a fetch that ignores its abort signal still ends within the timeout', async () => {
    const never: typeof fetch = () => new Promise<Response>(() => {});
    const verify = createVerifier({
      auth: authConfig({ jwksUrl: 'https://idp.example/jwks', jwksTimeoutMs: 200 }),
      fetch: never,
    });
    const started = performance.now();
    const e = await rejection(verify(await mint(keys.es.privateKey, { kid: 'es-1' })));
    expect(e.code).toBe('ERR_AUTH_UNAVAILABLE');
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('A11: errors, non-JWKS bodies and refused egress are 503 and never name the URL', async () => {
    const bad = await startJwks({ kind: 'status', status: 404 });
    const v404 = createVerifier({ auth: authConfig({ jwksUrl: bad.url }), fetch });
    const e404 = await rejection(v404(await mint(keys.es.privateKey, { kid: 'es-1' })));
    expect(e404.code).toBe('ERR_AUTH_UNAVAILABLE');
    expect(e404.data?.reason).toBe('JWKS endpoint answered HTTP 404');

    const notJwks: typeof fetch = async () => new Response('{"hello":1}', { status: 200 });
    const v1 = createVerifier({ auth: authConfig({ jwksUrl: 'https://idp.example/jwks' }), fetch: notJwks });
    const e1 = await rejection(v1(await mint(keys.es.privateKey, { kid: 'es-1' })));
    expect(e1.code).toBe('ERR_AUTH_UNAVAILABLE');

    const huge: typeof fetch = async () =>
      new Response(`{"keys":[${'{},'.repeat(300_000)}{}]}`, { status: 200 });
    const v2 = createVerifier({ auth: authConfig({ jwksUrl: 'https://idp.example/jwks' }), fetch: huge });
    const e2 = await rejection(v2(await mint(keys.es.privateKey, { kid: 'es-1' })));
    expect(e2.code).toBe('ERR_AUTH_UNAVAILABLE');
    expect(e2.data?.reason).toBe('JWKS response is larger than 524288 bytes');

    const refused: typeof fetch = async () => {
      throw new ManifoldError('ERR_EGRESS_DENIED', 'egress denied');
    };
    const v3 = createVerifier({
      auth: authConfig({ jwksUrl: 'https://idp.internal.example/jwks' }),
      fetch: refused,
    });
    const e3 = await rejection(v3(await mint(keys.es.privateKey, { kid: 'es-1' })));
    expect(e3.code).toBe('ERR_AUTH_UNAVAILABLE');
    for (const e of [e404, e1, e2, e3]) {
      expect(JSON.stringify({ m: e.publicMessage, d: e.data })).not.toMatch(/127\.0\.0\.1|idp\.|jwks/);
    }
  });

  it('A11: the fetch is told not to follow redirects', async () => {
    const seen: (RequestInit | undefined)[] = [];
    const spy: typeof fetch = async (_url, init) => {
      seen.push(init);
      return new Response(JSON.stringify({ keys: [keys.es.jwk] }), { status: 200 });
    };
    const verify = createVerifier({ auth: authConfig({ jwksUrl: 'https://idp.example/jwks' }), fetch: spy });
    await expect(verify(await mint(keys.es.privateKey, { kid: 'es-1' }))).resolves.toBeTruthy();
    expect(seen).toHaveLength(1);
    expect(seen[0]?.redirect).toBe('manual');
    expect(seen[0]?.signal).toBeInstanceOf(AbortSignal);
  });
});

afterAll(() => {
  vi.useRealTimers();
});

describe('#13.16 token type, lifetime and padding', () => {
  const signed = (header: Record<string, unknown>, payload: JWTPayload) =>
    new SignJWT(payload).setProtectedHeader({ alg: 'ES256', ...header }).sign(keys.es.privateKey);

  it('a typ outside tokenTypes is refused; JWT, at+jwt (any case) and no typ pass', async () => {
    const verify = createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch });
    for (const typ of ['JWT', 'at+jwt', 'AT+JWT', undefined]) {
      await expect(verify(await signed(typ ? { typ } : {}, claims()))).resolves.toBeTruthy();
    }
    for (const typ of ['id_token+jwt', 'logout+jwt', 'secevent+jwt']) {
      await unauthorized(verify(await signed({ typ }, claims())), 'ERR_JWT_TYP');
    }
    const strict = createVerifier({
      auth: authConfig({ publicKey: keys.es.pem, tokenTypes: ['at+jwt'] }),
      fetch,
    });
    await unauthorized(strict(await signed({ typ: 'JWT' }, claims())), 'ERR_JWT_TYP');
  });

  it('a token living longer than maxTokenLifetimeSeconds is refused, with or without iat', async () => {
    const verify = createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch });
    const year = 365 * 86_400;
    await unauthorized(verify(await signed({}, claims({ exp: now() + year }))), 'ERR_JWT_LIFETIME');
    const { iat: _omit, ...noIat } = claims({ exp: now() + year });
    await unauthorized(verify(await signed({}, noIat)), 'ERR_JWT_LIFETIME');
    await expect(verify(await signed({}, claims({ exp: now() + 3600 })))).resolves.toBeTruthy();
    const long = createVerifier({
      auth: authConfig({ publicKey: keys.es.pem, maxTokenLifetimeSeconds: 2 * year }),
      fetch,
    });
    await expect(long(await signed({}, claims({ exp: now() + year })))).resolves.toBeTruthy();
  });

  /** An authenticator over the ES test key that counts the signature checks it makes. */
  function countingAuthenticator() {
    let count = 0;
    const verify = createVerifier({ auth: authConfig({ publicKey: keys.es.pem }), fetch });
    const authenticate = createAuthenticator(authConfig({ publicKey: keys.es.pem }), fetch, async (t) => {
      count++;
      return verify(t);
    });
    return { authenticate, verifications: () => count };
  }

  it('a padded signature is the same token: one cache entry, one principal', async () => {
    const { authenticate, verifications } = countingAuthenticator();
    const token = await mint(keys.es.privateKey);
    const req = (t: string) => new Request('http://gw/mcp', { headers: { authorization: `Bearer ${t}` } });
    const a = await authenticate(req(token));
    const b = await authenticate(req(`${token}==`));
    expect(b.key).toBe(a.key);
    expect(verifications()).toBe(1);
  });

  it('two tokens taking turns each keep their own principal, verified once each', async () => {
    const { authenticate, verifications } = countingAuthenticator();
    const req = (t: string) => new Request('http://gw/mcp', { headers: { authorization: `Bearer ${t}` } });
    const a = await mint(keys.es.privateKey, { claims: { scope: 'tools:alpha__*' } });
    const b = await mint(keys.es.privateKey, { claims: { scope: 'tools:beta__*' } });
    const pa = await authenticate(req(a));
    const pb = await authenticate(req(b));
    expect(JSON.stringify(pa)).toContain('alpha__');
    expect(JSON.stringify(pb)).toContain('beta__');
    for (let i = 0; i < 3; i++) {
      expect(await authenticate(req(a))).toBe(pa);
      expect(await authenticate(req(b))).toBe(pb);
    }
    expect(verifications()).toBe(2);
    await unauthorized(authenticate(req(`${a}x`)));
    expect(verifications()).toBe(3);
  });

  it('a repeated Authorization header is answered from memory only until the token expires', async () => {
    const { authenticate, verifications } = countingAuthenticator();
    const req = (t: string) => new Request('http://gw/mcp', { headers: { authorization: `Bearer ${t}` } });
    const short = await mint(keys.es.privateKey, { exp: now() + 2 });
    const first = await authenticate(req(short));
    expect(await authenticate(req(short))).toBe(first);
    expect(verifications()).toBe(1);
    // A refused header is never remembered: each attempt is verified and refused again.
    const forged = `${short.slice(0, -4)}AAAA`;
    await unauthorized(authenticate(req(forged)));
    await unauthorized(authenticate(req(forged)));
    expect(verifications()).toBe(3);
    // Past its exp (jose still allows the clock tolerance): verified again, not answered from memory.
    vi.useFakeTimers({ now: Date.now() + 3000, toFake: ['Date'] });
    try {
      await authenticate(req(short));
      expect(verifications()).toBe(4);
      // Past the tolerance too: refused.
      vi.setSystemTime(Date.now() + 600_000);
      await unauthorized(authenticate(req(short)));
      expect(verifications()).toBe(5);
    } finally {
      vi.useRealTimers();
    }
  });
});
