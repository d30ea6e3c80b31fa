import { b64url, unb64url } from '../auth/seal.js';
import { ManifoldError } from '../errors.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

interface CursorBody {
  /** Digest of the catalog the page belongs to. */
  v: string;
  /** Offset of the next page in the principal's visible list. */
  o: number;
  /** Owner: a cursor is only valid for the principal it was issued to (SECURITY B8). */
  p: string;
}

const invalid = () => new ManifoldError('ERR_INVALID_PARAMS', 'invalid cursor: list again without a cursor');

/**
 * Opaque, tamper-evident pagination cursors: the body is MACed with a key that never leaves the
 * gateway. Instances that share `key` accept each other's cursors.
 */
export class CursorSealer {
  private constructor(private readonly key: CryptoKey) {}

  static async create(secret?: Uint8Array): Promise<CursorSealer> {
    const raw = secret ?? crypto.getRandomValues(new Uint8Array(32));
    const key = await crypto.subtle.importKey(
      'raw',
      raw as BufferSource,
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['sign', 'verify'],
    );
    return new CursorSealer(key);
  }

  async seal(version: string, offset: number, owner: string): Promise<string> {
    const body = enc.encode(JSON.stringify({ v: version, o: offset, p: owner } satisfies CursorBody));
    const mac = new Uint8Array(await crypto.subtle.sign('HMAC', this.key, body as BufferSource));
    return `${b64url(body)}.${b64url(mac.subarray(0, 16))}`;
  }

  /** The offset, or an -32602 error for anything forged, foreign, stale or malformed. */
  async open(cursor: unknown, version: string, owner: string): Promise<number> {
    if (typeof cursor !== 'string' || cursor.length > 512) throw invalid();
    const [bodyPart, macPart, extra] = cursor.split('.');
    if (!bodyPart || !macPart || extra !== undefined) throw invalid();
    let body: Uint8Array;
    let mac: Uint8Array;
    try {
      body = unb64url(bodyPart);
      mac = unb64url(macPart);
    } catch {
      throw invalid();
    }
    const full = new Uint8Array(await crypto.subtle.sign('HMAC', this.key, body as BufferSource)).subarray(
      0,
      16,
    );
    if (mac.length !== full.length || !timingSafeEqual(mac, full)) throw invalid();
    let parsed: CursorBody;
    try {
      parsed = JSON.parse(dec.decode(body)) as CursorBody;
    } catch {
      throw invalid();
    }
    if (parsed.p !== owner || !Number.isInteger(parsed.o) || parsed.o < 0) throw invalid();
    if (parsed.v !== version) {
      throw new ManifoldError(
        'ERR_INVALID_PARAMS',
        'the tool catalog changed since this cursor was issued: list again',
      );
    }
    return parsed.o;
  }
}

function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}
