import { describe, expect, it } from 'vitest';
import { legacyResult, membersJson, modernResult } from '../../src/server/mcp/exchange.js';

// A result's JSON built member by member (#18) must be JSON.stringify's text, byte for byte, for
// either era's dressing.
const modern = modernResult({ name: 'manifold', version: '9.9.9' });

const results: Record<string, unknown>[] = [
  {},
  { content: [{ type: 'text', text: 'Echo: hello' }] },
  { content: [], isError: true },
  {
    content: [{ type: 'text', text: 'ü "quoted" \n\u2028 \ud800' }],
    structuredContent: { a: [1, null, 'x'] },
  },
  { content: [], isError: undefined, structuredContent: undefined },
  { content: [], fn: () => 1, sym: Symbol('s') },
  { '2': 'two', '1': 'one', 'we"ird\\key': 1, '': 0 },
  { content: [], when: new Date(0), big: { toJSON: () => 'custom' } },
  { a: 1, b: 2, c: 3, d: 4, e: 5 },
  Object.create(
    { inherited: 1 },
    { own: { value: 2, enumerable: true }, hidden: { value: 3, enumerable: false } },
  ),
];

describe('membersJson', () => {
  it('is JSON.stringify without the braces, for a few members', () => {
    for (const r of results) {
      const members = membersJson(r);
      if (Object.keys(r).length > 4) {
        expect(members).toBeUndefined();
        continue;
      }
      expect(`{${members}}`).toBe(JSON.stringify(r));
    }
  });

  it('leaves an object with its own toJSON to JSON.stringify', () => {
    const r = { content: [], toJSON: () => ({ replaced: true }) };
    expect(membersJson(r)).toBeUndefined();
    expect(legacyResult.json(r)).toBe('{"replaced":true}');
  });

  it('gives both eras the text of their dressed result serialized', () => {
    for (const r of results) {
      expect(legacyResult.json(r)).toBe(JSON.stringify(legacyResult.result(r)));
      // Integer-like keys come first in an object, so `result(r)` puts them before `resultType`;
      // the JSON text puts the gateway's members first. The same members and values either way.
      if (Object.keys(r).some((k) => /^\d+$/.test(k))) {
        expect(JSON.parse(modern.json(r)!)).toEqual(JSON.parse(JSON.stringify(modern.result(r))));
      } else {
        expect(modern.json(r)).toBe(JSON.stringify(modern.result(r)));
      }
    }
    // A result with a `_meta` or `resultType` of its own is dressed as an object instead.
    expect(modern.json({ content: [], _meta: { a: 1 } })).toBeUndefined();
    expect(modern.json({ content: [], resultType: 'complete' })).toBeUndefined();
  });
});
