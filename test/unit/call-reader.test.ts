import { describe, expect, it } from 'vitest';
import { readEnvelopedCall, readPlainCall } from '../../src/server/mcp/call-reader.js';
import { EnvelopeCache } from '../../src/server/mcp/envelope-cache.js';

// A tools/call in the SDK clients' layout, read without parsing its fixed parts (#18): whatever it
// returns must be exactly JSON.parse's value, keys in the same order, and nothing for a body
// JSON.parse refuses.
const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'v2-user', version: '1.0.0' },
};

const legacyCall = (id: unknown, name: unknown, args: unknown) =>
  JSON.stringify({ method: 'tools/call', params: { name, arguments: args }, jsonrpc: '2.0', id });
/** The spec examples' order: jsonrpc and id first. */
const legacyCall2 = (id: unknown, name: unknown, args: unknown) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
const modernCall2 = (id: unknown, name: unknown, args: unknown) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name, arguments: args, _meta: ENVELOPE },
  });
const modernCall = (id: unknown, name: unknown, args: unknown) =>
  JSON.stringify({
    method: 'tools/call',
    params: { name, arguments: args, _meta: ENVELOPE },
    jsonrpc: '2.0',
    id,
  });

/** JSON.parse's value, or 'throws'. */
function parsed(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return 'throws';
  }
}

/** Past any cool-down a failed body started: the reader is tried again after 64 calls. */
function settle(): void {
  const good = legacyCall(1, 'x', {});
  for (let i = 0; i < 70; i++) readPlainCall(good);
}

describe('readPlainCall', () => {
  it('reads a legacy tools/call in the SDK layout as JSON.parse does, keys in order', () => {
    settle();
    for (const args of [{ message: 'hi' }, {}, { a: [1, { b: null }], s: 'é "q" \\ \n' }, []])
      for (const body of [legacyCall(12, 'server__echo', args), legacyCall2(12, 'server__echo', args)]) {
        const read = readPlainCall(body);
        expect(read).toBeDefined();
        expect(JSON.stringify(read)).toBe(JSON.stringify(JSON.parse(body)));
        expect(read).toEqual(JSON.parse(body));
      }
  });

  it('leaves anything outside the layout to JSON.parse, and never reads a body JSON.parse refuses', () => {
    const good = legacyCall(7, 'echo', { message: 'hi' });
    const variants = [
      // The name: escapes and control characters are not read as text.
      legacyCall(7, 'a"b', {}),
      legacyCall(7, 'a\\b', {}),
      legacyCall(7, 'a\u0001b', {}),
      good.replace('"echo"', '"\\u0065cho"'),
      // The id: only a safe integer's digits.
      legacyCall('7', 'echo', {}),
      legacyCall(-1, 'echo', {}),
      legacyCall(1.5, 'echo', {}),
      legacyCall(2 ** 60, 'echo', {}),
      good.replace('"id":7}', '"id":07}'),
      good.replace('"id":7}', '"id":1e3}'),
      good.replace('"id":7}', '"id": 7}'),
      good.replace('"id":7}', '"id":}'),
      // Members after arguments, and the text the tail is found by, inside the arguments.
      good.replace('}},"jsonrpc"', '},"_meta":{"progressToken":1}},"jsonrpc"'),
      good.replace('}},"jsonrpc"', '},"task":{"ttl":5}},"jsonrpc"'),
      legacyCall(7, 'echo', { s: '},"jsonrpc":"2.0","id":8}' }),
      good.replace('{"message":"hi"}', '{"x":{},"jsonrpc":"2.0","id":5}'),
      // Whitespace, truncation and trailing text.
      good.replace('"arguments":', '"arguments": '),
      good.replace('{"message"', ' {"message"'),
      good.slice(0, -1),
      `${good} `,
      `${good}}`,
      good.replace('{"message":"hi"}', '{"message":"hi"'),
      good.replace('{"message":"hi"}', '{"message":"hi"}}'),
      good.replace('{"message":"hi"}', ''),
      good.replace('{"message":"hi"}', '{"message":"hi",}'),
      good.replace('tools/call', 'tools/list'),
      good.replace('"2.0"', '"1.0"'),
    ];
    for (const body of variants) {
      settle();
      const read = readPlainCall(body);
      const want = parsed(body);
      if (read !== undefined) {
        expect(want).not.toBe('throws');
        expect(JSON.stringify(read)).toBe(JSON.stringify(want));
      }
    }
    // The ones that are valid and in the layout are read; the rest are not.
    settle();
    expect(readPlainCall(legacyCall(7, 'echo', { s: '},"jsonrpc":"2.0","id":8}' }))).toEqual(
      JSON.parse(legacyCall(7, 'echo', { s: '},"jsonrpc":"2.0","id":8}' })),
    );
    settle();
    expect(readPlainCall(good.replace('{"message":"hi"}', '{"x":{},"jsonrpc":"2.0","id":5}'))).toBeDefined();
    for (const i of [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 18, 19, 20, 21, 22, 23, 24, 25, 26]) {
      settle();
      expect(readPlainCall(variants[i]!), `variant ${i}`).toBeUndefined();
    }
  });

  it('reads ids of one to fifteen digits as their numbers, and no longer ones', () => {
    for (const id of [0, 9, 10, 123456789, 2 ** 31, 999999999999999]) {
      for (const body of [legacyCall(id, 'echo', {}), legacyCall2(id, 'echo', {})]) {
        settle();
        expect(readPlainCall(body)?.id, body).toBe(id);
      }
    }
    for (const body of [legacyCall(1000000000000000, 'echo', {}), legacyCall2(2 ** 53 - 1, 'echo', {})]) {
      settle();
      expect(readPlainCall(body), body).toBeUndefined();
    }
  });

  it('matches JSON.parse on generated bodies', () => {
    let seed = 11;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const pieces = [
      '{',
      '}',
      '[',
      ']',
      '"',
      ',',
      ':',
      '\\',
      ' ',
      '1',
      'a',
      '"x":',
      '},"jsonrpc":"2.0","id":',
    ];
    let read = 0;
    for (let i = 0; i < 2000; i++) {
      let body = (i % 2 === 0 ? legacyCall : legacyCall2)(next(1000), ['echo', 'a b', 'ü'][next(3)], {
        n: i,
        s: 'x',
      });
      // Change one to three places of the body.
      for (let k = next(3); k >= 0; k--) {
        const at = next(body.length);
        const cut = next(3);
        body = body.slice(0, at) + pieces[next(pieces.length)] + body.slice(at + cut);
      }
      settle();
      const got = readPlainCall(body);
      if (got === undefined) continue;
      read++;
      const want = parsed(body);
      expect(want).not.toBe('throws');
      expect(JSON.stringify(got)).toBe(JSON.stringify(want));
    }
    // Some of the changed bodies are still in the layout and are read.
    expect(read).toBeGreaterThan(20);
  });

  it('in the spec order too: reads the layout, and declines what is outside it', () => {
    const good = legacyCall2(7, 'echo', { message: 'hi' });
    settle();
    expect(JSON.stringify(readPlainCall(good))).toBe(good);
    const outside = [
      legacyCall2('7', 'echo', {}),
      legacyCall2(7, 'a"b', {}),
      good.replace('"id":7,', '"id":7 ,'),
      good.replace('"id":7,', '"id":-7,'),
      good.replace('}}', '},"_meta":{"progressToken":1}}'),
      good.replace('}}', '}} '),
      good.replace('}}', '}'),
      good.replace('{"message":"hi"}}', '{"message":"hi"}}}'),
      good.replace('"method":"tools/call"', '"method":"tools/list"'),
      JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        params: { name: 'echo', arguments: {} },
        method: 'tools/call',
      }),
    ];
    for (const [i, body] of outside.entries()) {
      settle();
      expect(readPlainCall(body), `variant ${i}`).toBeUndefined();
    }
  });

  it('stops trying for 64 calls after arguments that do not parse alone', () => {
    settle();
    const good = legacyCall(7, 'echo', { message: 'hi' });
    expect(readPlainCall(good)).toBeDefined();
    expect(
      readPlainCall(good.replace('}},"jsonrpc"', '},"_meta":{"progressToken":1}},"jsonrpc"')),
    ).toBeUndefined();
    for (let i = 0; i < 64; i++) expect(readPlainCall(good)).toBeUndefined();
    expect(readPlainCall(good)).toEqual(JSON.parse(good));
  });
});

describe('EnvelopeCache with a tools/call in the SDK layout', () => {
  it('reads around the known envelope: the same value as JSON.parse, keys in order, the envelope shared', () => {
    settle();
    const cache = new EnvelopeCache();
    cache.parse(modernCall(0, 'echo', {}));
    const a = cache.parse(modernCall(1, 'server__echo', { message: 'hi' })) as {
      params: { _meta: unknown };
    };
    const b = cache.parse(modernCall(2, 'echo', [1, 2])) as { params: { _meta: unknown } };
    expect(JSON.stringify(a)).toBe(modernCall(1, 'server__echo', { message: 'hi' }));
    expect(JSON.stringify(b)).toBe(modernCall(2, 'echo', [1, 2]));
    expect(a.params._meta).toBe(b.params._meta);
    expect(Object.isFrozen(a.params._meta)).toBe(true);
    // The spec examples' order, as the bench sends it: the envelope ends right before `}}`.
    const order2 = new EnvelopeCache();
    order2.parse(modernCall2(0, 'echo', {}));
    const c = order2.parse(modernCall2(5, 'server__echo', { message: 'hi' })) as {
      params: { _meta: unknown };
    };
    expect(JSON.stringify(c)).toBe(modernCall2(5, 'server__echo', { message: 'hi' }));
    expect(Object.isFrozen(c.params._meta)).toBe(true);
    // Both layouts are read by the reader itself, not the cache's splice.
    const text = `"_meta":${JSON.stringify(ENVELOPE)}`;
    for (const body of [modernCall(8, 'echo', { m: 1 }), modernCall2(8, 'echo', { m: 1 })]) {
      const at = body.indexOf(text);
      settle();
      const read = readEnvelopedCall(body, at, at + text.length, ENVELOPE);
      expect(JSON.stringify(read)).toBe(body);
      // Not where the text stands: declined.
      expect(readEnvelopedCall(body, at + 1, at + 1 + text.length, ENVELOPE)).toBeUndefined();
    }
    // Outside the layout (a string id, a member before _meta), still exact.
    for (const body of [
      modernCall('x', 'echo', {}),
      modernCall(3, 'echo', {}).replace(',"_meta":', ',"task":{"ttl":1},"_meta":'),
      modernCall(4, 'e"cho', {}),
    ]) {
      expect(JSON.stringify(cache.parse(body))).toBe(JSON.stringify(JSON.parse(body)));
    }
  });
});
