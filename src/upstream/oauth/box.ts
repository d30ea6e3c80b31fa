/**
 * Confidentiality at rest for upstream credentials and for the OAuth `state` (which carries the
 * PKCE verifier through the browser): AES-256-GCM through Web Crypto, the key derived with
 * HKDF-SHA-256 from the deployment's secret, the label as salt, so one secret yields unrelated keys
 * per purpose. Every seal binds its additional data (e.g. `server\0subject\0issuer`), so a value
 * copied to another row or another purpose does not open.
 */
import { base64url } from 'jose';

const enc = new TextEncoder();
const dec = new TextDecoder();
const VERSION = 'v1';
const IV_BYTES = 12; // NIST SP 800-38D §8.2: 96-bit random IVs.
/** Sealed text larger than this is refused unopened. */
export const MAX_SEALED = 64 * 1024;
/** The secret's minimum length, the same as the config's for `gateway.oauth.secret`. */
export const MIN_SECRET_BYTES = 32;

export class SecretBox {
  private constructor(private readonly key: CryptoKey) {}

  /**
   * @example const box = await SecretBox.create(new TextEncoder().encode(secret), 'manifold/upstream-credentials/v1')
   */
  static async create(secret: Uint8Array, label: string): Promise<SecretBox> {
    if (secret.byteLength < MIN_SECRET_BYTES) {
      throw new TypeError(`SecretBox: the secret must be at least ${MIN_SECRET_BYTES} bytes`);
    }
    if (!label) throw new TypeError('SecretBox: the label must not be empty');
    const root = await crypto.subtle.importKey('raw', secret as BufferSource, 'HKDF', false, ['deriveKey']);
    const key = await crypto.subtle.deriveKey(
      { name: 'HKDF', hash: 'SHA-256', salt: enc.encode(label) as BufferSource, info: new Uint8Array(0) },
      root,
      { name: 'AES-GCM', length: 256 },
      false,
      ['encrypt', 'decrypt'],
    );
    return new SecretBox(key);
  }

  /** `v1.<iv>.<ciphertext+tag>`, base64url: JSON of `value`, bound to `aad`. */
  async seal(value: unknown, aad: string): Promise<string> {
    const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
    const plain = enc.encode(JSON.stringify(value) ?? 'null');
    const ct = await crypto.subtle.encrypt(
      { name: 'AES-GCM', iv: iv as BufferSource, additionalData: enc.encode(aad) as BufferSource },
      this.key,
      plain as BufferSource,
    );
    return `${VERSION}.${base64url.encode(iv)}.${base64url.encode(new Uint8Array(ct))}`;
  }

  /** The sealed value, or undefined when the text is malformed, tampered, for another AAD or key. */
  async open(text: string, aad: string): Promise<unknown | undefined> {
    try {
      if (typeof text !== 'string' || text.length > MAX_SEALED) return undefined;
      const parts = text.split('.');
      if (parts.length !== 3 || parts[0] !== VERSION) return undefined;
      const iv = base64url.decode(parts[1] ?? '');
      const ct = base64url.decode(parts[2] ?? '');
      if (iv.byteLength !== IV_BYTES) return undefined;
      const plain = await crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: iv as BufferSource, additionalData: enc.encode(aad) as BufferSource },
        this.key,
        ct as BufferSource,
      );
      return JSON.parse(dec.decode(plain)) as unknown;
    } catch {
      return undefined;
    }
  }
}
