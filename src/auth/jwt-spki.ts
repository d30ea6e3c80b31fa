/**
 * PEM SPKI inspection (RFC 5280 §4.1.2.7, RFC 3279, RFC 5480, RFC 8410): reads the key type of a
 * configured `auth.publicKey` from its DER, synchronously, so a wrong key fails at construction.
 */

export type SpkiKind = 'RSA' | 'P-256' | 'P-384' | 'P-521' | 'Ed25519';

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
export function spkiKind(pem: string): SpkiKind {
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
