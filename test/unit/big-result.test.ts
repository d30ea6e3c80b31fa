import { describe, expect, it, vi } from 'vitest';
import type { CatalogEntry } from '../../src/aggregate/catalog.js';
import { parseConfigObject } from '../../src/config/load.js';
import { CallGuards } from '../../src/gateway/call-guards.js';
import { resultCap } from '../../src/guards/result-cap.js';
import * as text from '../../src/guards/text.js';
import { createJsonLogger } from '../../src/lib/log.js';
import { rawResultMessage } from '../../src/protocol/jsonrpc.js';
import { legacyDress, modernDress } from '../../src/server/mcp/exchange.js';

// #18, "Big results": a result is serialized once, inside its JSON-RPC response; a result that
// fits is never scanned for its UTF-8 size; an upstream body is let go once it is read.

vi.mock('../../src/guards/text.js', async (original) => {
  const actual = await original<typeof import('../../src/guards/text.js')>();
  return { ...actual, utf8Bytes: vi.fn(actual.utf8Bytes) };
});

type Result = Record<string, unknown>;
const size = (v: unknown) => new TextEncoder().encode(JSON.stringify(v)).length;
const CAP = 2048;

function guards(): CallGuards {
  const parsed = parseConfigObject(
    { mcpServers: { s: { command: 'node', maxResultBytes: CAP } }, gateway: { maxResultBytes: 65_536 } },
    {},
  );
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  return new CallGuards(parsed.config, createJsonLogger({ level: 'error', write: () => {} }));
}

function entry(outputSchema?: unknown): CatalogEntry {
  const full = {
    name: 's__tool',
    inputSchema: { type: 'object' },
    ...(outputSchema === undefined ? {} : { outputSchema }),
  };
  return {
    name: 's__tool',
    server: 's',
    original: 'tool',
    tool: full,
    full,
    deferred: false,
    risk: 'read',
    approval: 'allow',
  } as unknown as CatalogEntry;
}

describe('CallGuards.resultMessage', () => {
  const schema = { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] };
  const cases: Array<[string, Result, unknown]> = [
    ['a result that fits', { content: [{ type: 'text', text: 'hello "wörld" \u2028 😀' }] }, undefined],
    ['a result over the cap', { content: [{ type: 'text', text: 'é'.repeat(5000) }] }, undefined],
    ['structured content that fits its schema', { content: [], structuredContent: { n: 1 } }, schema],
    ['structured content against its schema', { content: [], structuredContent: { n: 'x' } }, schema],
    [
      'structured content the cap drops',
      { content: [], structuredContent: { n: 1, pad: 'x'.repeat(4000) } },
      schema,
    ],
  ];
  cases.push(
    ['an empty result', {}, undefined],
    [
      'a result with its own _meta and resultType',
      { resultType: 'complete', _meta: { 'x/y': 1 }, content: [{ type: 'text', text: 'hi' }] },
      undefined,
    ],
    ['a result with its own _meta', { content: [], _meta: { progressToken: 3 } }, undefined],
    [
      "a modern upstream's result, its protocol fields cleared",
      { resultType: undefined, content: [{ type: 'text', text: 'z' }], _meta: undefined },
      undefined,
    ],
    // Fits as relayed, not once dressed for a 2026-07-28 client: the cap counts the dress.
    [
      'a result the dress takes over the cap',
      { content: [{ type: 'text', text: 'a'.repeat(2000) }] },
      undefined,
    ],
    [
      'an error result with an output schema',
      { content: [{ type: 'text', text: 'no' }], isError: true },
      schema,
    ],
  );
  // The dress of each era: the cap measures the result as the client gets it.
  const dresses = {
    legacy: legacyDress,
    modern: (r: Result) => modernDress({ name: 'manifold', version: '9.9.9' }, r),
  };
  for (const [what, result, outputSchema] of cases) {
    for (const [era, dress] of Object.entries(dresses)) {
      it(`is the response rawResultMessage makes of capResult: ${what}, ${era}`, () => {
        for (const id of [7, 'manifold:12', 'ïd "quoted" \u0000']) {
          const g = guards();
          const e = entry(outputSchema);
          const dressed = dress(result);
          expect(g.resultMessage(e, dressed, id)).toBe(rawResultMessage(id, g.capResult(e, dressed)));
        }
      });
    }
  }

  it('counts the dress against the cap', () => {
    const g = guards();
    const result = { content: [{ type: 'text', text: 'a'.repeat(2000) }] };
    expect(String(g.resultMessage(entry(), result, 1))).not.toContain('truncated');
    const modern = String(g.resultMessage(entry(), dresses.modern(result), 1));
    expect(modern).toContain('"manifold/truncated":true');
    expect(modern).toContain('"io.modelcontextprotocol/serverInfo"');
  });

  it('dresses a modern result: resultType, the gateway identity in _meta, the rest kept', () => {
    const dress = dresses.modern;
    const info = { 'io.modelcontextprotocol/serverInfo': { name: 'manifold', version: '9.9.9' } };
    expect(dress({})).toEqual({ resultType: 'complete', _meta: info });
    // As a 2026-07-28 upstream's edge may leave a result: its own protocol fields cleared.
    const cleared = { resultType: undefined, content: [{ type: 'text', text: 'y' }], _meta: undefined };
    expect(JSON.stringify(dress(cleared))).toBe(
      JSON.stringify({ resultType: 'complete', _meta: info, content: cleared.content }),
    );
    const own = dress({ resultType: 'x', _meta: { 'x/y': 1, 'io.modelcontextprotocol/serverInfo': 'up' } });
    expect(own).toEqual({ resultType: 'complete', _meta: { ...info, 'x/y': 1 } });
  });
});

describe('resultCap with a framing', () => {
  const framing = (id: string) => {
    const head = `{"id":${JSON.stringify(id)},"result":`;
    return {
      wrap: (result: Result) => ({ id, result }),
      chars: head.length + 1,
      bytes: new TextEncoder().encode(head).length + 1,
    };
  };

  it('serializes the framed value, and measures and caps the result alone', () => {
    const r = { content: [{ type: 'text', text: 'ü'.repeat(100) }] };
    const f = framing('ÿ'.repeat(50));
    const out = resultCap(size(r))(r, f);
    expect(out.truncated).toBe(false);
    expect(out.json).toBe(JSON.stringify(f.wrap(r)));
    expect(out.originalBytes).toBe(size(r));
    // One byte less is over, whatever the framing adds.
    const over = resultCap(size(r) - 1)(r, f);
    expect(over.truncated).toBe(true);
    expect(over.json).toBeUndefined();
    expect(over.originalBytes).toBe(size(r));
    expect(size(over.result)).toBeLessThanOrEqual(size(r) - 1 + 512);
  });

  it('does not scan a result that fits for its UTF-8 size until asked', () => {
    const utf8Bytes = vi.mocked(text.utf8Bytes);
    const r = { content: [{ type: 'text', text: 'ø'.repeat(5000) }] };
    utf8Bytes.mockClear();
    const out = resultCap(100_000)(r);
    expect(out.truncated).toBe(false);
    expect(utf8Bytes).not.toHaveBeenCalled();
    expect(out.originalBytes).toBe(size(r));
    expect(utf8Bytes).toHaveBeenCalledTimes(1);
    expect(out.originalBytes).toBe(size(r));
    expect(utf8Bytes).toHaveBeenCalledTimes(1);
  });
});

describe('resultCap: the UTF-8 size of a long string', () => {
  // A pair across the 16 Ki code-unit slices the count is taken in, lone surrogates, 2- and 3-byte
  // characters: the count is TextEncoder's, and no long string is encoded whole to get it.
  const long = `${'a'.repeat(16_383)}😀${'é'.repeat(20_000)}\ud800x${'€'.repeat(17_000)}\udc00😀`;
  const encoded = (t: string) => new TextEncoder().encode(t).length;

  it('counts as TextEncoder does, without encoding the whole string', () => {
    const r = { content: [{ type: 'text', text: long }] };
    const [resultBytes, textBytes] = [size(r), encoded(long)];
    const encode = vi.spyOn(TextEncoder.prototype, 'encode');
    try {
      // Between its length and three times it: measured to be found within the cap.
      const fits = resultCap(resultBytes)(r);
      expect(fits.truncated).toBe(false);
      expect(fits.originalBytes).toBe(resultBytes);
      expect(resultCap(resultBytes - 1)(r).truncated).toBe(true);
      const cut = resultCap(4096)(r);
      expect(cut.truncated).toBe(true);
      expect(cut.originalBytes).toBe(resultBytes);
      const marker = (cut.result.content as Array<{ text: string }>)[0]!.text.match(/of (\d+) bytes\]$/);
      expect(Number(marker?.[1])).toBe(textBytes);
      expect(encode.mock.calls.every(([t]) => (t ?? '').length <= 16_384)).toBe(true);
    } finally {
      encode.mockRestore();
    }
  });
});
