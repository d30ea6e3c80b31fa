import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { spreadUnder } from '../../src/lib/objects.js';

// The relay builds its per-call objects with spreadUnder instead of `{ ...from, ...own }` (#18);
// it must mean the same, for any keys, `__proto__` included.
describe('spreadUnder', () => {
  it('means { ...from, ...own }, with own first in key order', () => {
    expect(spreadUnder({ a: 1, b: 2 }, { b: 3, c: 4 })).toEqual({ b: 3, c: 4, a: 1 });
    expect(Object.keys(spreadUnder({ a: 1, b: 2 }, { b: 3, c: 4 }))).toEqual(['b', 'c', 'a']);
    expect(spreadUnder(undefined, { x: 1 })).toEqual({ x: 1 });
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.jsonValue()),
        fc.dictionary(fc.string(), fc.jsonValue()),
        (from, own) => {
          const wire = (o: unknown) => JSON.parse(JSON.stringify(o)) as Record<string, unknown>;
          const [f, o] = [wire(from), wire(own)];
          const got = spreadUnder(f, o);
          const want = { ...f, ...o };
          expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
          for (const k of Object.keys(want))
            expect(Object.getOwnPropertyDescriptor(got, k)?.value).toEqual(want[k]);
          expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
        },
      ),
    );
  });

  it('keeps a __proto__ key as an own key and never sets the prototype', () => {
    const from = JSON.parse('{"__proto__": {"polluted": true}, "k": 1}') as Record<string, unknown>;
    const out = spreadUnder(from, { own: 1 });
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect((out as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toEqual({ polluted: true });
    const own = JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(spreadUnder({ k: 1 }, own))).toBe(Object.prototype);
  });
});
