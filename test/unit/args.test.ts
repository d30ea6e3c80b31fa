import { describe, expect, it } from 'vitest';
import { type ArgsCheck, compileArgsValidator, MAX_PROBLEMS } from '../../src/guards/args.js';

function compiled(schema: unknown): (args: unknown) => ArgsCheck {
  const c = compileArgsValidator(schema);
  if (!c.ok) throw new Error(`expected a validator, got: ${c.reason}`);
  return c.validate;
}

function frozen<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) frozen(v);
    Object.freeze(value);
  }
  return value;
}

const search = {
  type: 'object',
  properties: {
    query: { type: 'string', minLength: 1 },
    limit: { type: 'integer', minimum: 1, maximum: 100 },
    filters: { type: 'object', properties: { lang: { enum: ['en', 'fr'] } } },
  },
  required: ['query'],
  additionalProperties: false,
};

describe('compileArgsValidator', () => {
  it('passes valid arguments', () => {
    const validate = compiled(search);
    expect(validate({ query: 'mcp' })).toEqual({ valid: true });
    expect(validate({ query: 'mcp', limit: 10, filters: { lang: 'fr' } })).toEqual({ valid: true });
  });

  it('lists a wrong type, a missing required property and an extra property together', () => {
    const validate = compiled(search);
    expect(validate({ limit: 'ten', extra: true })).toEqual({
      valid: false,
      problems: [
        '/query: required property is missing',
        '/limit: expected type integer, got string',
        '/extra: property is not allowed',
      ],
    });
    expect(validate({ query: 42 })).toEqual({
      valid: false,
      problems: ['/query: expected type string, got number'],
    });
    const closed = compiled({ type: 'object', properties: { a: {} }, unevaluatedProperties: false });
    expect(closed({ a: 1, b: 2 })).toEqual({ valid: false, problems: ['/b: property is not allowed'] });
  });

  it('reports nested and keyword problems with their location', () => {
    const validate = compiled(search);
    const r = validate({ query: '', limit: 1000, filters: { lang: 'de' } });
    expect(r.valid).toBe(false);
    const problems = (r as { problems: string[] }).problems;
    expect(problems).toHaveLength(3);
    expect(problems[0]).toMatch(/^\/query: String is too short/);
    expect(problems[1]).toMatch(/^\/limit: 1000 is greater than 100$/);
    expect(problems[2]).toMatch(/^\/filters\/lang: Instance does not match any of \["en","fr"\]$/);
    expect(validate('not an object')).toEqual({
      valid: false,
      problems: ['(root): expected type object, got string'],
    });
  });

  it('decodes locations into plain JSON pointers', () => {
    const validate = compiled({ type: 'object', properties: { 'a b/c~ü': { type: 'string' } } });
    expect(validate({ 'a b/c~ü': 1 })).toEqual({
      valid: false,
      problems: ['/a b~1c~0ü: expected type string, got number'],
    });
  });

  it(`dedupes and caps the list at ${MAX_PROBLEMS} lines`, () => {
    const validate = compiled({ type: 'object', additionalProperties: { type: 'string' } });
    const args = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, i]));
    const r = validate(args) as { valid: false; problems: string[] };
    expect(r.problems).toHaveLength(MAX_PROBLEMS);
    expect(new Set(r.problems).size).toBe(MAX_PROBLEMS);
    expect(r.problems.at(-1)).toBe('… and 31 more problems');
  });

  it('resolves a $defs-based $ref', () => {
    const validate = compiled({
      type: 'object',
      $defs: { Point: { type: 'object', properties: { x: { type: 'number' } }, required: ['x'] } },
      properties: { at: { $ref: '#/$defs/Point' } },
    });
    expect(validate({ at: { x: 1 } })).toEqual({ valid: true });
    expect(validate({ at: {} })).toEqual({ valid: false, problems: ['/at/x: required property is missing'] });
  });

  it('handles recursive refs and draft-07 definitions', () => {
    const tree = compiled({
      type: 'object',
      properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#' } } },
    });
    expect(tree({ name: 'a', children: [{ name: 'b', children: [] }] })).toEqual({ valid: true });
    expect(tree({ children: [{ name: 3 }] })).toEqual({
      valid: false,
      problems: ['/children/0/name: expected type string, got number'],
    });
    const draft7 = compiled({
      $schema: 'http://json-schema.org/draft-07/schema#',
      definitions: { id: { type: 'integer' } },
      type: 'object',
      properties: { id: { $ref: '#/definitions/id' } },
    });
    expect(draft7({ id: 1.5 })).toEqual({
      valid: false,
      problems: ['/id: expected type integer, got number'],
    });
  });

  it('a $ref to a missing definition cannot be handled: ok false with a reason', () => {
    const r = compileArgsValidator({ type: 'object', properties: { a: { $ref: '#/$defs/Missing' } } });
    expect(r).toEqual({
      ok: false,
      reason: expect.stringMatching(/\$ref #\/\$defs\/Missing cannot be resolved/),
    });
    const remote = compileArgsValidator({
      type: 'object',
      properties: { a: { $ref: 'https://example.com/s.json' } },
    });
    expect(remote.ok).toBe(false);
  });

  it('a $ref-shaped value inside data is not a reference', () => {
    const validate = compiled({ type: 'object', properties: { a: { const: { $ref: '#/nowhere' } } } });
    expect(validate({ a: { $ref: '#/nowhere' } })).toEqual({ valid: true });
  });

  it('an invalid pattern cannot be handled', () => {
    expect(
      compileArgsValidator({ type: 'object', properties: { a: { type: 'string', pattern: '(' } } }),
    ).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/pattern \( is not a valid regular expression/),
    });
    expect(compileArgsValidator({ type: 'object', patternProperties: { '[': {} } }).ok).toBe(false);
  });

  it('detects the dialect from $schema and refuses one it does not support', () => {
    for (const uri of [
      'https://json-schema.org/draft/2020-12/schema',
      'https://json-schema.org/draft/2019-09/schema',
      'http://json-schema.org/draft-07/schema#',
      'http://json-schema.org/draft-06/schema#',
      'http://json-schema.org/draft-04/schema#',
    ]) {
      expect(compileArgsValidator({ $schema: uri, type: 'object' }).ok).toBe(true);
    }
    expect(compileArgsValidator({ $schema: 'http://json-schema.org/draft-03/schema#' })).toEqual({
      ok: false,
      reason: 'unsupported JSON Schema dialect http://json-schema.org/draft-03/schema#',
    });
    expect(compileArgsValidator({ $schema: 42 }).ok).toBe(false);
  });

  it('defaults to 2020-12: prefixItems and items apply as in 2020-12', () => {
    const validate = compiled({
      type: 'array',
      prefixItems: [{ type: 'string' }],
      items: { type: 'number' },
    });
    expect(validate(['a', 1, 2])).toEqual({ valid: true });
    expect(validate(['a', 'b'])).toEqual({
      valid: false,
      problems: ['/1: expected type number, got string'],
    });
    // Draft 4 semantics differ: exclusiveMaximum is a boolean there.
    const d4 = compiled({
      $schema: 'http://json-schema.org/draft-04/schema#',
      maximum: 5,
      exclusiveMaximum: true,
    });
    expect(d4(5).valid).toBe(false);
  });

  it('rejects schemas that are not JSON objects, and accepts boolean schemas', () => {
    expect(compileArgsValidator('nope').ok).toBe(false);
    expect(compileArgsValidator(null).ok).toBe(false);
    expect(compileArgsValidator([]).ok).toBe(false);
    const cyclic: Record<string, unknown> = { type: 'object' };
    cyclic.self = cyclic;
    expect(compileArgsValidator(cyclic)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/not JSON/),
    });
    expect(compiled(true)({ anything: 1 })).toEqual({ valid: true });
  });

  it('never mutates the schema it is given', () => {
    const schema = frozen(structuredClone(search));
    const validate = compiled(schema);
    expect(validate({ query: 'x' })).toEqual({ valid: true });
    expect(Object.getOwnPropertyNames(schema)).toEqual(Object.keys(search));
  });

  it('an error the probe did not foresee lets the call through, saying why', () => {
    // undefined cannot arrive from JSON, but if it does the validator throws rather than answering.
    const validate = compiled({ type: 'object' });
    expect(validate(undefined)).toEqual({ valid: true, skipped: expect.stringMatching(/validator failed/) });
  });
});

describe('a null for an argument mirrored into a header (x-mcp-header)', () => {
  // The tool of the conformance scenario http-custom-headers (SEP-2243), with a nested mirror.
  const sql = {
    type: 'object',
    properties: {
      region: { type: 'string', 'x-mcp-header': 'Region' },
      priority: { type: 'integer', 'x-mcp-header': 'Priority' },
      verbose: { type: 'boolean', 'x-mcp-header': 'Verbose' },
      query: { type: 'string' },
      debug: { type: 'boolean' },
      opts: {
        type: 'object',
        properties: { trace: { type: 'boolean', 'x-mcp-header': 'Trace' } },
        additionalProperties: false,
      },
    },
    required: ['region', 'priority', 'query'],
    additionalProperties: false,
  };

  it('49.15: an optional one is no value, so it passes; the arguments are left as given', () => {
    const validate = compiled(sql);
    const args = frozen({ region: 'us-east1', priority: 1, verbose: null, query: 'SELECT 1' });
    expect(validate(args)).toEqual({ valid: true });
    expect(validate(frozen({ region: 'r', priority: 1, query: 'q', opts: { trace: null } }))).toEqual({
      valid: true,
    });
    expect(args.verbose).toBeNull();
  });

  it('49.15: a required one is missing, and a null anywhere else is still the wrong type', () => {
    const validate = compiled(sql);
    expect(validate({ region: null, priority: 1, query: 'q' })).toEqual({
      valid: false,
      problems: ['/region: required property is missing'],
    });
    // Not mirrored into a header: the schema alone decides, and boolean is not null.
    expect(validate({ region: 'r', priority: 1, query: 'q', debug: null })).toEqual({
      valid: false,
      problems: ['/debug: expected type boolean, got null'],
    });
    expect(validate({ region: 'r', priority: 1, query: 'q', verbose: 'yes' })).toEqual({
      valid: false,
      problems: ['/verbose: expected type boolean, got string'],
    });
  });
});
