import { Sealer } from '../auth/seal.js';
import { ManifoldError } from '../errors.js';

interface CursorBody {
  /** Digest of the catalog the page belongs to. */
  v: string;
  /** Offset of the next page in the principal's visible list. */
  o: number;
  /** Owner: a cursor is only valid for the principal it was issued to (SECURITY B8). */
  p: string;
}

/** Cursors are a few dozen characters; a longer one is refused unopened. */
const MAX_CURSOR = 512;

const invalid = () => new ManifoldError('ERR_INVALID_PARAMS', 'invalid cursor: list again without a cursor');

/**
 * Opaque, tamper-evident pagination cursors: the body is MACed with a key that never leaves the
 * gateway. Instances that share `secret` accept each other's cursors.
 */
export class CursorSealer {
  private constructor(private readonly sealer: Sealer) {}

  static async create(secret?: Uint8Array): Promise<CursorSealer> {
    const raw = secret ?? crypto.getRandomValues(new Uint8Array(32));
    return new CursorSealer(await Sealer.create(raw, 'manifold/cursor'));
  }

  seal(version: string, offset: number, owner: string): Promise<string> {
    return this.sealer.seal({ v: version, o: offset, p: owner } satisfies CursorBody);
  }

  /** The offset, or an -32602 error for anything forged, foreign, stale or malformed. */
  async open(cursor: unknown, version: string, owner: string): Promise<number> {
    if (typeof cursor !== 'string' || cursor.length > MAX_CURSOR) throw invalid();
    const parsed = (await this.sealer.open(cursor)) as Partial<CursorBody> | null | undefined;
    if (parsed?.p !== owner || !Number.isInteger(parsed.o) || (parsed.o as number) < 0) throw invalid();
    if (parsed.v !== version) {
      throw new ManifoldError(
        'ERR_INVALID_PARAMS',
        'the tool catalog changed since this cursor was issued: list again',
      );
    }
    return parsed.o as number;
  }
}
