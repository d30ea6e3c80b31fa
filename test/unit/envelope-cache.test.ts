import { describe, expect, it } from 'vitest';
import { EnvelopeCache } from '../../src/server/mcp/envelope-cache.js';

// The modern request's `_meta` envelope, parsed once per distinct text (#18): every body must
// parse to exactly what JSON.parse gives, whatever the cache holds.
const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'v2-user', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': { sampling: {}, roots: { listChanged: true } },
};
const OTHER = { ...ENVELOPE, 'io.modelcontextprotocol/clientInfo': { name: 'other', version: '2' } };

/** The SDK v2 client's order: `_meta` last in params, params before jsonrpc and id. */
const call = (id: number, meta: unknown = ENVELOPE, args: unknown = { message: 'hi' }) =>
  JSON.stringify({
    method: 'tools/call',
    params: { name: 'echo', arguments: args, _meta: meta },
    jsonrpc: '2.0',
    id,
  });

type Msg = { params: { _meta: Record<string, unknown>; arguments: Record<string, unknown> } };
const parse = (cache: EnvelopeCache, body: string) => cache.parse(body) as Msg;

/** A cache that has learned ENVELOPE. */
function warm(): EnvelopeCache {
  const cache = new EnvelopeCache();
  parse(cache, call(0));
  return cache;
}

describe('EnvelopeCache', () => {
  it('gives what JSON.parse gives, and the same frozen envelope once the text is known', () => {
    const cache = new EnvelopeCache();
    const first = parse(cache, call(1));
    expect(first).toEqual(JSON.parse(call(1)));
    // The request that taught the cache keeps an envelope of its own.
    expect(Object.isFrozen(first.params._meta)).toBe(false);
    const second = parse(cache, call(2));
    const third = parse(cache, call(3, ENVELOPE, { message: 'other' }));
    expect(second).toEqual(JSON.parse(call(2)));
    expect(third).toEqual(JSON.parse(call(3, ENVELOPE, { message: 'other' })));
    expect(second.params._meta).toBe(third.params._meta);
    expect(second.params._meta).not.toBe(first.params._meta);
    expect(Object.isFrozen(second.params._meta)).toBe(true);
    const caps = second.params._meta['io.modelcontextprotocol/clientCapabilities'] as Record<string, unknown>;
    expect(Object.isFrozen(caps) && Object.isFrozen(caps.roots)).toBe(true);
    expect(() => {
      (caps as { sampling: unknown }).sampling = undefined;
    }).toThrow(TypeError);
    // The arguments are the request's own.
    expect(Object.isFrozen(second.params.arguments)).toBe(false);
    expect(second.params.arguments).not.toBe(third.params.arguments);
  });

  it('finds the envelope wherever the client puts it, and any key order', () => {
    const cache = warm();
    const bodies = [
      JSON.stringify({
        jsonrpc: '2.0',
        id: 4,
        method: 'tools/call',
        params: { _meta: ENVELOPE, name: 'e', arguments: {} },
      }),
      JSON.stringify({ params: { _meta: ENVELOPE }, id: 5, jsonrpc: '2.0', method: 'server/discover' }),
      JSON.stringify({
        jsonrpc: '2.0',
        id: 'x',
        method: 'tools/list',
        params: { cursor: 'c', _meta: ENVELOPE },
      }),
    ];
    for (const body of bodies) expect(cache.parse(body)).toEqual(JSON.parse(body));
    expect((cache.parse(bodies[1]!) as Msg).params._meta).toBe((cache.parse(bodies[2]!) as Msg).params._meta);
  });

  it('shares the envelope when it closes params and the message, and stays exact when it only seems to', () => {
    const cache = warm();
    const known = JSON.stringify(ENVELOPE);
    // params last and `_meta` last in it: the body ends `}}` right after the envelope.
    const closing = (id: number) =>
      JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'e', arguments: { n: id }, _meta: ENVELOPE },
      });
    const a = parse(cache, closing(70));
    const b = parse(cache, closing(71));
    expect(a).toEqual(JSON.parse(closing(70)));
    expect(b).toEqual(JSON.parse(closing(71)));
    expect(a.params._meta).toBe(b.params._meta);
    expect(Object.isFrozen(a.params._meta)).toBe(true);
    // The same `}}` tail where the known text is not params._meta: parsed as JSON.parse does.
    const bodies = [
      `{"jsonrpc":"2.0","id":72,"method":"tools/call","other":{"_meta":${known}}}`,
      `{"jsonrpc":"2.0","id":73,"method":"tools/call","params":{"_meta":"x"},"other":{"_meta":${known}}}`,
      `{"jsonrpc":"2.0","id":74,"params":{"name":"e","arguments":{"_meta":${known}}}}`,
      `{"jsonrpc":"2.0","id":75,"params":{"_meta":${known}}}}`,
    ];
    for (const body of bodies.slice(0, 3)) expect(cache.parse(body), body).toEqual(JSON.parse(body));
    expect(() => cache.parse(bodies[3]!)).toThrow(SyntaxError);
  });

  it('looks first where the last envelope stood, counted from the end, and follows the layout as it moves', () => {
    const cache = warm();
    // A `_meta` in the arguments comes first in the body: the search for the first `"_meta":`
    // finds it, which is no known text; the envelope at the end is still the shared one.
    const shadowed = (id: number) => call(id, ENVELOPE, { _meta: { note: id } });
    const frozen = (body: string) => {
      const got = parse(cache, body);
      expect(got, body).toEqual(JSON.parse(body));
      return Object.isFrozen(got.params._meta);
    };
    expect(frozen(call(20))).toBe(true);
    expect(frozen(shadowed(21))).toBe(true);
    expect(frozen(shadowed(22))).toBe(true);
    // One digit fewer in the id: the tail moved, so the search decides (and finds the arguments').
    expect(frozen(shadowed(7))).toBe(false);
    expect(frozen(call(8))).toBe(true);
    expect(frozen(shadowed(9))).toBe(true);
    // Another layout (`_meta` first in params): found by the search, and then by its new place.
    const first = (id: number) =>
      JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { _meta: ENVELOPE, name: 'e', arguments: { id } },
      });
    const a = parse(cache, first(30));
    const b = parse(cache, first(31));
    expect(a).toEqual(JSON.parse(first(30)));
    expect(b.params._meta).toBe(a.params._meta);
    // Back to the first layout, with the known text shadowed again: found where it stood before.
    expect(Object.isFrozen(parse(cache, shadowed(22)).params._meta)).toBe(false);
    expect(Object.isFrozen(parse(cache, call(23)).params._meta)).toBe(true);
    expect(Object.isFrozen(parse(cache, shadowed(24)).params._meta)).toBe(true);
  });

  it('is exact when the known text stands somewhere other than params._meta', () => {
    const cache = warm();
    const known = JSON.stringify(ENVELOPE);
    const bodies = [
      // in the arguments, before a different envelope
      call(6, OTHER, { _meta: ENVELOPE }),
      // in the arguments, with no envelope at all
      JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'e', arguments: { _meta: ENVELOPE } },
      }),
      // a repeated key: the last `_meta` of params wins, as in JSON.parse
      `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"e","_meta":${known},"_meta":{"a":1}}}`,
      `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"e","_meta":{"a":1},"_meta":${known}}}`,
      // at the top level, not in params
      `{"jsonrpc":"2.0","id":10,"method":"ping","_meta":${known},"params":{}}`,
      // starting at an escaped quote: the key is `x"_meta`
      `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"x\\"_meta":${known},"name":"e"}}`,
      // inside a string (escaped), so not JSON structure at all
      JSON.stringify({ jsonrpc: '2.0', id: 12, method: 'tools/call', params: { name: `"_meta":${known}` } }),
      // params is not an object
      `{"jsonrpc":"2.0","id":13,"method":"x","params":[{"_meta":${known}}]}`,
      // an array body
      `[{"jsonrpc":"2.0","id":14,"method":"x","params":{"_meta":${known}}}]`,
      // whitespace inside the envelope: another text, parsed in full
      call(15).replace('"_meta":{', '"_meta": {'),
    ];
    for (const body of bodies) expect(cache.parse(body), body).toEqual(JSON.parse(body));
    // The envelope in the arguments is the request's own object, not the shared one.
    const inArgs = parse(cache, bodies[1]!);
    expect(Object.isFrozen(inArgs.params.arguments._meta)).toBe(false);
  });

  it('throws what JSON.parse throws', () => {
    const cache = warm();
    for (const body of [
      '',
      '{',
      call(16).slice(0, -1),
      `${call(17)}x`,
      call(18).replace('"id":18', '"id":'),
    ]) {
      expect(() => cache.parse(body)).toThrow(SyntaxError);
    }
  });

  it('keeps a few envelopes, and learns once in several misses', () => {
    const cache = new EnvelopeCache();
    const envelopes = [0, 1, 2, 3, 4].map((n) => ({
      ...ENVELOPE,
      'io.modelcontextprotocol/clientInfo': { name: `c${n}`, version: '1' },
    }));
    // Two requests; whether the second got the cached envelope (frozen; a parsed one is not).
    const shared = (meta: unknown) => {
      parse(cache, call(20, meta));
      return Object.isFrozen(parse(cache, call(21, meta)).params._meta);
    };
    // The first miss learns; the next fifteen do not.
    expect(shared(envelopes[0])).toBe(true);
    expect(shared(envelopes[1])).toBe(false);
    for (let i = 0; i < 13; i++) parse(cache, call(22 + i, { trace: i }));
    // The sixteenth miss after a learning learns again.
    parse(cache, call(40, envelopes[1]));
    expect(shared(envelopes[1])).toBe(true);
    expect(shared(envelopes[0])).toBe(true);
    // Sixteen misses in a row always learn; four slots, so a fifth envelope drops the oldest.
    const teach = (meta: unknown) => {
      for (let i = 0; i < 16; i++) parse(cache, call(50 + i, meta));
    };
    for (const meta of envelopes.slice(2)) {
      teach(meta);
      expect(shared(meta)).toBe(true);
    }
    expect(shared(envelopes[0])).toBe(false);
    expect(shared(envelopes[4])).toBe(true);
    expect(shared(envelopes[1])).toBe(true);
  });

  it('picks a nine-digit sentinel, which V8 parses without a string-to-double conversion', () => {
    // A private detail, checked because the count depends on it (#18): ten digits cost ~450 instructions.
    for (let i = 0; i < 200; i++) {
      const mark = (new EnvelopeCache() as unknown as { mark: number }).mark;
      expect(Number.isInteger(mark)).toBe(true);
      expect(String(mark)).toMatch(/^[1-9]\d{8}$/);
    }
  });

  it('parses a large body in full', () => {
    const cache = warm();
    const body = call(60, ENVELOPE, { text: 'x'.repeat(70 * 1024) });
    const a = parse(cache, body);
    const b = parse(cache, body);
    expect(a).toEqual(JSON.parse(body));
    expect(a.params._meta).not.toBe(b.params._meta);
  });

  it('matches JSON.parse on generated bodies', () => {
    const cache = new EnvelopeCache();
    const metas = [ENVELOPE, OTHER, { progressToken: 3, ...ENVELOPE }, {}, 'text', null, [ENVELOPE]];
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    for (let i = 0; i < 400; i++) {
      const meta = metas[next(metas.length)];
      const args = next(3) === 0 ? { _meta: metas[next(metas.length)] } : { n: i };
      const params: Record<string, unknown> =
        next(2) === 0
          ? { name: 'e', arguments: args, _meta: meta }
          : { _meta: meta, arguments: args, name: 'e' };
      const body = JSON.stringify(
        next(2) === 0
          ? { jsonrpc: '2.0', id: i, method: 'tools/call', params }
          : { params, id: i, jsonrpc: '2.0' },
      );
      expect(cache.parse(body)).toEqual(JSON.parse(body));
    }
  });
});
