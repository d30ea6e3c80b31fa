import { exportSPKI, generateKeyPair, SignJWT } from 'jose';

/**
 * A throwaway ES256 issuer for e2e tests: its public key for `gateway.auth.publicKey`, and a
 * signer of 10-minute tokens with the given claims (`sub` defaults to "someone").
 */
export async function testIssuer(issuer: string, audience: string) {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  return {
    publicKey: await exportSPKI(publicKey),
    mint: (claims: Record<string, unknown>, subject = 'someone') =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256' })
        .setIssuer(issuer)
        .setAudience(audience)
        .setSubject(subject)
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(privateKey),
  };
}
