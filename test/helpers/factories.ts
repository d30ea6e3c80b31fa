/**
 * What tests build over and over, built one way: upstream configs, principals, and signed tokens
 * with the `gateway.auth` that accepts them.
 */
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from 'jose';
import type { Principal } from '../../src/auth/principal.js';
import { EVERYTHING, MEMORY } from './harness.js';

// ---- upstream configs ----------------------------------------------------------------------

/** A stdio upstream: `script` run by this Node with `args`, plus any other fields of its entry. */
export const stdioServer = (script: string, args: string[] = [], extra: Record<string, unknown> = {}) => ({
  command: process.execPath,
  args: [script, ...args],
  ...extra,
});

/** server-everything (a legacy-era server from npm) on stdio. */
export const everythingStdio = (extra: Record<string, unknown> = {}) =>
  stdioServer(EVERYTHING, ['stdio'], extra);

/** server-memory (a stateful legacy-era server from npm) on stdio. */
export const memoryStdio = (extra: Record<string, unknown> = {}) => stdioServer(MEMORY, [], extra);

// ---- principals ----------------------------------------------------------------------------

/**
 * A principal as authentication makes one (src/auth/grants.ts): its keys are JSON arrays of what
 * they stand for, so two principals differ in `viewKey` exactly when their views may differ.
 * Defaults: tenant "t", subject "s", grants ['*'].
 */
export function principal(fields: Partial<Principal> = {}): Principal {
  const { tenant = 't', subject = 's', grants = ['*'], ...rest } = fields;
  const cap = rest.cap ?? null;
  const admin = rest.admin ?? false;
  return {
    tenant,
    subject,
    grants,
    key: JSON.stringify([tenant, subject]),
    viewKey: JSON.stringify([tenant, subject, grants, cap, admin, rest.profile ?? null]),
    ...rest,
  };
}

// ---- tokens --------------------------------------------------------------------------------

export interface TestIssuer {
  /** The public key, SPKI PEM, for `gateway.auth.publicKey`. */
  publicKey: string;
  /** The public key as a JWKS (with `kid` when one was given), for `gateway.auth.jwksUrl` or a file. */
  jwks: { keys: JWK[] };
  /** `gateway.auth` that trusts this issuer: spread it and add the rest (`tenantClaim`...). */
  auth: { issuer: string; audience: string; publicKey: string };
  /** A signed token with `claims`; `sub` is `subject`, else `claims.sub`, else "someone". */
  mint(claims?: Record<string, unknown>, subject?: string): Promise<string>;
}

/**
 * A throwaway ES256 issuer: tokens valid for `expiresIn` (default 10 minutes), signed with a key
 * made for this test alone.
 */
export async function testIssuer(
  issuer: string,
  audience: string,
  options: { kid?: string; expiresIn?: string } = {},
): Promise<TestIssuer> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const spki = await exportSPKI(publicKey);
  const jwk = { ...(await exportJWK(publicKey)), alg: 'ES256', use: 'sig' };
  const kid = options.kid;
  return {
    publicKey: spki,
    jwks: { keys: [kid ? { ...jwk, kid } : jwk] },
    auth: { issuer, audience, publicKey: spki },
    mint: (claims = {}, subject) =>
      new SignJWT(claims)
        .setProtectedHeader(kid ? { alg: 'ES256', kid } : { alg: 'ES256' })
        .setIssuer(issuer)
        .setAudience(audience)
        .setSubject(subject ?? (typeof claims.sub === 'string' ? claims.sub : 'someone'))
        .setIssuedAt()
        .setExpirationTime(options.expiresIn ?? '10m')
        .sign(privateKey),
  };
}
