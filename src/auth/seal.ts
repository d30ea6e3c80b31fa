/**
 * Sealed values: JSON the gateway hands a client and must get back unchanged (an MRTR
 * `requestState`), MACed with a key derived from the deployment's secret and a label, so a value
 * sealed for one purpose never opens for another. Integrity only: nothing in a sealed value may be
 * secret (spec 2026-07-28: patterns/mrtr, "Servers MUST protect its integrity").
 */
import { base64url } from 'jose';

const enc = new TextEncoder();
const dec = new TextDecoder();

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

/** Sealed values larger than this are refused unopened. */
const MAX_SEALED = 64 * 1024;

export class Sealer {
  private constructor(private readonly key: CryptoKey) {}

  /** A sealer for one purpose: HMAC-SHA-256 under HMAC(secret, label). */
  static async create(secret: Uint8Array, label: string): Promise<Sealer> {
    const root = await crypto.subtle.importKey(
      'raw',
      secret as BufferSource,
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['sign'],
    );
    const derived = new Uint8Array(await crypto.subtle.sign('HMAC', root, enc.encode(label) as BufferSource));
    const key = await crypto.subtle.importKey(
      'raw',
      derived as BufferSource,
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['sign', 'verify'],
    );
    return new Sealer(key);
  }

  async seal(value: unknown): Promise<string> {
    const body = enc.encode(JSON.stringify(value));
    const mac = new Uint8Array(await crypto.subtle.sign('HMAC', this.key, body as BufferSource));
    return `${base64url.encode(body)}.${base64url.encode(mac)}`;
  }

  /** The sealed value, or undefined for anything forged, altered, foreign or malformed. */
  async open(sealed: unknown): Promise<unknown> {
    if (typeof sealed !== 'string' || sealed.length > MAX_SEALED) return undefined;
    const parts = sealed.split('.');
    if (parts.length !== 2) return undefined;
    let body: Uint8Array;
    let mac: Uint8Array;
    try {
      body = base64url.decode(parts[0]!);
      mac = base64url.decode(parts[1]!);
    } catch {
      return undefined;
    }
    const expected = new Uint8Array(await crypto.subtle.sign('HMAC', this.key, body as BufferSource));
    if (!equal(mac, expected)) return undefined;
    try {
      return JSON.parse(dec.decode(body));
    } catch {
      return undefined;
    }
  }
}
