import { describe, expect, it } from 'vitest';
import { splitMeta } from '../../src/server/mcp/split-meta.js';

// A tools/call's downstream `_meta`: the progress token is mapped, reserved keys stay at the edge,
// everything else is relayed. A shared envelope (frozen by the envelope cache) is split once and
// kept in front, so the same frozen object must give the same split, and nothing else may get it.
const envelope = () => ({
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
});

describe('splitMeta', () => {
  it('maps the progress token, keeps reserved keys back and relays the rest', () => {
    const split = splitMeta({ ...envelope(), progressToken: 5, 'vendor.example/x': 1 });
    expect(split.progressToken).toBe(5);
    expect(split.relayed).toEqual({ traceparent: envelope().traceparent, 'vendor.example/x': 1 });
    expect(splitMeta(undefined)).toEqual({ progressToken: undefined, relayed: undefined });
    expect(splitMeta([1])).toEqual({ progressToken: undefined, relayed: undefined });
  });

  it('splits a shared (frozen) envelope once, and never gives its split to another object', () => {
    const shared = Object.freeze(envelope());
    const first = splitMeta(shared);
    expect(splitMeta(shared)).toBe(first);
    expect(Object.isFrozen(first.relayed)).toBe(true);

    // A request's own _meta, even with the same keys, is split afresh, and so is a change to it.
    const own = envelope();
    const ownSplit = splitMeta(own);
    expect(ownSplit).not.toBe(first);
    expect(ownSplit.relayed).toEqual(first.relayed);
    own.traceparent = '00-other';
    (own as Record<string, unknown>).progressToken = 'p';
    expect(splitMeta(own)).toEqual({ progressToken: 'p', relayed: { traceparent: '00-other' } });

    // Another shared envelope after the first gets its own split; the first still gets its own.
    const other = Object.freeze({ ...envelope(), traceparent: '00-second' });
    expect(splitMeta(other).relayed).toEqual({ traceparent: '00-second' });
    expect(splitMeta(shared)).toBe(first);
    expect(splitMeta(other).relayed).toEqual({ traceparent: '00-second' });
  });
});
