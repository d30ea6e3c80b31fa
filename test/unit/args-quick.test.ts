import { Validator } from '@cfworker/json-schema';
import { describe, expect, it } from 'vitest';
import { compileArgsValidator } from '../../src/guards/args.js';
import { quickAccept } from '../../src/guards/args-quick.js';

// The quick check may only ever say yes where the full validator says yes (#18): checked here
// against @cfworker/json-schema itself on generated schemas and values.
const full = (schema: unknown, args: unknown) =>
  new Validator(JSON.parse(JSON.stringify(schema)), '2020-12', false).validate(args).valid;

/** A small deterministic generator, so a failure names a reproducible case. */
function rng(seed: number) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const TYPES = ['string', 'number', 'integer', 'boolean', 'null', undefined] as const;
const VALUES: unknown[] = ['', 'x', 0, 1, 1.5, -3, true, false, null, [], {}, [1], { a: 1 }];
const NAMES = ['a', 'b', 'query', '__proto__', 'constructor', 'x y', ''];

describe('quickAccept', () => {
  it('never accepts what the full validator refuses (3,000 generated schemas and arguments)', () => {
    const r = rng(18);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
    let accepted = 0;
    for (let i = 0; i < 3000; i++) {
      const properties: Record<string, unknown> = {};
      for (const name of NAMES) {
        if (r() < 0.5) continue;
        const type = pick(TYPES);
        properties[name] = type === undefined ? { description: 'any' } : { type, title: name };
      }
      const schema: Record<string, unknown> = { type: 'object', properties };
      if (r() < 0.5) schema.required = NAMES.filter(() => r() < 0.3);
      if (r() < 0.4) schema.additionalProperties = r() < 0.5;
      const quick = quickAccept(schema);
      expect(quick, JSON.stringify(schema)).toBeDefined();
      for (let j = 0; j < 6; j++) {
        const args: Record<string, unknown> = JSON.parse('{}');
        for (const name of NAMES) if (r() < 0.5) args[name] = pick(VALUES);
        // JSON.parse makes `__proto__` an own key, as a client's arguments arrive.
        const wire = JSON.parse(JSON.stringify(args)) as unknown;
        if (quick!(wire)) {
          accepted++;
          expect(full(schema, wire), `${JSON.stringify(schema)} ${JSON.stringify(wire)}`).toBe(true);
        }
      }
      for (const odd of [null, [], 'x', 1]) expect(quick!(odd)).toBe(false);
    }
    // The quick path is really taken, not vacuously safe.
    expect(accepted).toBeGreaterThan(2000);
  });

  it('takes only the simple shape: constraints and unknown keywords fall back to the validator', () => {
    const simple = {
      type: 'object',
      properties: { q: { type: 'string', 'x-mcp-header': 'Q' } },
      required: ['q'],
    };
    expect(quickAccept(simple)?.({ q: 'x' })).toBe(true);
    for (const prop of [
      { type: 'string', minLength: 1 },
      { type: 'string', pattern: '^a' },
      { type: 'string', enum: ['a'] },
      { type: 'string', format: 'uri' },
      { type: ['string', 'null'] },
      { type: 'object', properties: {} },
      { type: 'array' },
      { const: 1 },
      { $ref: '#/$defs/x' },
      { anyOf: [{ type: 'string' }] },
      false,
    ]) {
      expect(quickAccept({ type: 'object', properties: { q: prop } }), JSON.stringify(prop)).toBeUndefined();
    }
    expect(quickAccept({ type: 'object', additionalProperties: { type: 'string' } })).toBeUndefined();
    expect(quickAccept({ type: 'object', patternProperties: {} })).toBeUndefined();
    expect(quickAccept({ type: 'object', minProperties: 1 })).toBeUndefined();
    expect(quickAccept({ properties: {} })).toBeUndefined();
  });

  it('leaves the problem lines to the full validator', () => {
    const compiled = compileArgsValidator({
      type: 'object',
      properties: { q: { type: 'string' }, n: { type: 'integer' } },
      required: ['q'],
      additionalProperties: false,
    });
    if (!compiled.ok) throw new Error(compiled.reason);
    expect(compiled.validate({ q: 'x', n: 2 })).toEqual({ valid: true });
    expect(compiled.validate({ n: 2.5, extra: 1 })).toEqual({
      valid: false,
      problems: expect.arrayContaining([
        '/q: required property is missing',
        '/n: expected type integer, got number',
      ]),
    });
  });
});
