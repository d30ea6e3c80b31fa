import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  errorInstead,
  RESULT_CAP_SLACK,
  resultCap,
  TRUNCATED_META_KEY,
} from '../../src/guards/result-cap.js';

const size = (v: unknown) => new TextEncoder().encode(JSON.stringify(v)).length;
type Result = Record<string, unknown>;
type Block = { type: string; text?: string; [k: string]: unknown };

function frozen<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) frozen(v);
    Object.freeze(value);
  }
  return value;
}

const text = (t: string) => ({ type: 'text', text: t });
const blocksOf = (r: Result) => r.content as Block[];
const lastText = (r: Result) => blocksOf(r).at(-1)!.text!;

describe('resultCap', () => {
  it('returns a result within the cap unchanged, as the same object', () => {
    const cap = resultCap(1024);
    const r = frozen({ content: [text('hello')], isError: false });
    const out = cap(r);
    expect(out.result).toBe(r);
    const { result, truncated, originalBytes, json } = out;
    expect({ result, truncated, originalBytes, json }).toEqual({
      result: r,
      truncated: false,
      originalBytes: size(r),
      json: JSON.stringify(r),
    });
    // Exactly at the cap still fits; multibyte text is measured in bytes.
    const exact = { content: [text('é'.repeat(100))] };
    expect(resultCap(size(exact))(exact).truncated).toBe(false);
    expect(resultCap(size(exact) - 1)(exact).truncated).toBe(true);
  });

  it('E1: truncates a 1 MB text with a visible marker and flags the result', () => {
    const big = frozen({ content: [text('a'.repeat(1024 * 1024))], _meta: { 'com.example/trace': 'abc' } });
    const { result, truncated, originalBytes } = resultCap(65_536)(big);
    expect(truncated).toBe(true);
    expect(originalBytes).toBe(size(big));
    expect(size(result)).toBeLessThanOrEqual(65_536);
    expect(size(result)).toBeGreaterThan(65_000);
    const out = blocksOf(result);
    expect(out).toHaveLength(1);
    expect(out[0]!.text).toMatch(/^a+\n\[… truncated: \d+ of 1048576 bytes\]$/);
    expect(result._meta).toEqual({ 'com.example/trace': 'abc', [TRUNCATED_META_KEY]: true });
    expect(blocksOf(big)[0]!.text).toHaveLength(1024 * 1024);
  });

  it('E1: cuts multibyte text only at code point boundaries', () => {
    for (const unit of ['😀', '世界', 'é', '👨‍👩‍👧']) {
      for (let cap = 1024; cap < 1040; cap++) {
        const { result } = resultCap(cap)({ content: [text(unit.repeat(2000))] });
        expect(size(result)).toBeLessThanOrEqual(cap);
        const kept = lastText(result).split('\n[…')[0]!;
        expect(kept).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
        expect(JSON.stringify(result)).not.toContain('\\ud');
      }
    }
  });

  it('E1: counts JSON escaping, so quote- and control-heavy text still fits', () => {
    const nasty = '"\\\u0001\n'.repeat(5000);
    const { result } = resultCap(2048)({ content: [text(nasty)] });
    expect(size(result)).toBeLessThanOrEqual(2048);
    expect(lastText(result)).toMatch(/\[… truncated: \d+ of 20000 bytes\]$/);
  });

  it('E1: replaces an image that does not fit with a placeholder and keeps later blocks that do', () => {
    const data = 'A'.repeat(1_398_104); // base64 of 1048578 bytes
    const r = frozen({
      content: [text('before'), { type: 'image', data, mimeType: 'image/png' }, text('after')],
    });
    const { result } = resultCap(4096)(r);
    expect(blocksOf(result)).toEqual([
      text('before'),
      text('[image image/png, 1048578 bytes, omitted: over the result size cap]'),
      text('after'),
    ]);
    const audio = { type: 'audio', data: 'QUJD'.repeat(10_000), mimeType: 'audio/wav' };
    expect(blocksOf(resultCap(2048)({ content: [audio] }).result)[0]!.text).toBe(
      '[audio audio/wav, 30000 bytes, omitted: over the result size cap]',
    );
  });

  it('E1: replaces a resource blob with a placeholder and cuts resource text', () => {
    const blob = {
      type: 'resource',
      resource: { uri: 'file:///a.bin', blob: 'AAAA'.repeat(5000), mimeType: 'application/zip' },
    };
    const doc = {
      type: 'resource',
      resource: { uri: 'file:///a.txt', text: 'line\n'.repeat(2000), mimeType: 'text/plain' },
    };
    const { result } = resultCap(3000)(frozen({ content: [blob, doc] }));
    expect(size(result)).toBeLessThanOrEqual(3000);
    const [first, second] = blocksOf(result);
    expect(first).toEqual(
      text('[resource file:///a.bin application/zip, 15000 bytes, omitted: over the result size cap]'),
    );
    const res = second!.resource as { uri: string; text: string; mimeType: string };
    expect(res.uri).toBe('file:///a.txt');
    expect(res.mimeType).toBe('text/plain');
    expect(res.text).toMatch(/\[… truncated: \d+ of 10000 bytes\]$/);
  });

  it('E1: once the budget is gone, one marker counts the blocks left out', () => {
    const r = {
      content: [text('x'.repeat(3000)), ...Array.from({ length: 9 }, (_, i) => text(`block ${i}`))],
    };
    const { result } = resultCap(1024)(r);
    const out = blocksOf(result);
    expect(size(result)).toBeLessThanOrEqual(1024);
    expect(out[0]!.text).toMatch(/\[… truncated: \d+ of 3000 bytes\]$/);
    expect(out.at(-1)).toEqual(text('[… 9 more content blocks omitted: over the result size cap]'));
    expect(out).toHaveLength(2);
  });

  it('E1: drops structuredContent that does not fit, whole, with a notice', () => {
    const structured = { rows: Array.from({ length: 500 }, (_, i) => ({ id: i, name: `row ${i}` })) };
    const r = frozen({ content: [text('500 rows')], structuredContent: structured, isError: false });
    const { result } = resultCap(4096)(r);
    expect(result).not.toHaveProperty('structuredContent');
    expect(result.isError).toBe(false);
    expect(blocksOf(result)).toEqual([
      text('500 rows'),
      text(`[… structuredContent omitted: ${size(structured)} bytes, over the result size cap]`),
    ]);
    expect(size(result)).toBeLessThanOrEqual(4096);
  });

  it('E1: keeps a small structuredContent whole and cuts the text instead', () => {
    const structured = { count: 3, ok: true };
    const r = { content: [text('y'.repeat(10_000))], structuredContent: structured };
    const { result } = resultCap(2048)(r);
    expect(result.structuredContent).toBe(structured);
    expect(lastText(result)).toMatch(/\[… truncated: \d+ of 10000 bytes\]$/);
    expect(size(result)).toBeLessThanOrEqual(2048);
  });

  it('E1: an oversized upstream _meta gives way to content', () => {
    const r = {
      content: [text('z'.repeat(5000))],
      isError: true,
      _meta: { blob: 'm'.repeat(5000) },
      extra: 1,
    };
    const { result } = resultCap(2048)(r);
    expect(result._meta).toEqual({ [TRUNCATED_META_KEY]: true });
    expect(result.isError).toBe(true);
    expect(result).not.toHaveProperty('extra');
    expect(blocksOf(result).at(-1)).toEqual(
      text('[… _meta and other result fields omitted: over the result size cap]'),
    );
    expect(size(result)).toBeLessThanOrEqual(2048);
  });

  it(`E1: with a tiny cap the result stays within the cap plus ${RESULT_CAP_SLACK} bytes`, () => {
    const r = {
      content: [{ type: 'resource_link', uri: 'x'.repeat(500), name: 'n' }],
      structuredContent: { a: 'b'.repeat(500) },
    };
    for (const cap of [1, 10, 100, 300]) {
      const { result, truncated } = resultCap(cap)(r);
      expect(truncated).toBe(true);
      expect(size(result)).toBeLessThanOrEqual(cap + RESULT_CAP_SLACK);
      expect(result._meta).toEqual({ [TRUNCATED_META_KEY]: true });
    }
  });

  it('validates maxBytes when built', () => {
    expect(() => resultCap(0)).toThrow('resultCap: maxBytes must be a positive integer, got 0');
    expect(() => resultCap(1.5)).toThrow(TypeError);
    expect(() => resultCap(Number.POSITIVE_INFINITY)).toThrow(TypeError);
  });

  it('E1: always serializable, within the bound, truncated iff over, input untouched (property)', () => {
    const anyText = fc.string({ unit: 'binary', maxLength: 3000 });
    const block = fc.oneof(
      anyText.map(text),
      fc.record({
        type: fc.constantFrom('image', 'audio'),
        data: fc.base64String({ maxLength: 4000 }),
        mimeType: fc.string(),
      }),
      fc.record({
        type: fc.constant('resource'),
        resource: fc.oneof(
          fc.record({ uri: fc.webUrl(), text: anyText }),
          fc.record({ uri: fc.webUrl(), blob: fc.base64String({ maxLength: 4000 }), mimeType: fc.string() }),
        ),
      }),
      fc.record({ type: fc.constant('resource_link'), uri: fc.webUrl(), name: fc.string() }),
      fc.jsonValue({ maxDepth: 3 }),
    );
    const result = fc.record(
      {
        content: fc.array(block, { maxLength: 8 }),
        structuredContent: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 })),
        isError: fc.boolean(),
        _meta: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })),
        other: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: ['content'] },
    );
    fc.assert(
      fc.property(result, fc.integer({ min: 1, max: 6000 }), (r, cap) => {
        const input = JSON.parse(JSON.stringify(r)) as Result;
        const before = JSON.stringify(input);
        const out = resultCap(cap)(input);
        const json = JSON.stringify(out.result);
        expect(typeof json).toBe('string');
        expect(JSON.parse(json)).toEqual(out.result);
        expect(out.originalBytes).toBe(size(input));
        expect(out.truncated).toBe(out.originalBytes > cap);
        expect(JSON.stringify(input)).toBe(before);
        if (!out.truncated) {
          expect(out.result).toBe(input);
        } else {
          expect(size(out.result)).toBeLessThanOrEqual(cap < 1024 ? cap + RESULT_CAP_SLACK : cap);
          expect((out.result._meta as Result)[TRUNCATED_META_KEY]).toBe(true);
          expect(Array.isArray(out.result.content)).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('errorInstead', () => {
  it('replaces content, structuredContent and isError, keeping every other field in order', () => {
    const r = frozen({
      resultType: 'complete',
      content: [text('the real answer')],
      structuredContent: { rows: [1, 2, 3] },
      isError: false,
      extra: { kept: true },
      _meta: { [TRUNCATED_META_KEY]: true, 'com.example/trace': 'abc' },
    });
    const out = errorInstead(r, 'it went wrong');
    expect(Object.keys(out)).toEqual(['resultType', 'extra', '_meta', 'content', 'isError']);
    expect(out).toEqual({
      resultType: 'complete',
      extra: { kept: true },
      _meta: { [TRUNCATED_META_KEY]: true, 'com.example/trace': 'abc' },
      content: [text('it went wrong')],
      isError: true,
    });
    expect(r.content).toEqual([text('the real answer')]);
  });

  it('keeps an own __proto__ key from JSON.parse as a key', () => {
    const r = JSON.parse('{"__proto__":{"polluted":true},"content":[]}') as Result;
    const out = errorInstead(r, 'x');
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(JSON.stringify(out)).toBe(
      '{"__proto__":{"polluted":true},"content":[{"type":"text","text":"x"}],"isError":true}',
    );
  });
});
