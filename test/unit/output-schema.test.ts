import { describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../src/aggregate/catalog.js';
import { parseConfigObject } from '../../src/config/load.js';
import { CallGuards } from '../../src/gateway/call-guards.js';
import { compileOutputValidator, MAX_PROBLEMS } from '../../src/guards/args.js';
import { TRUNCATED_META_KEY } from '../../src/guards/result-cap.js';
import { createJsonLogger } from '../../src/lib/log.js';

// Issue #14: a tools/call answer is checked against the tool's outputSchema, and a result the cap
// had to strip of its structured content stays valid for a client that knows the schema.

type Result = Record<string, unknown>;
type Line = { level: string; event: string; [k: string]: unknown };

const CAP = 2048;
const size = (v: unknown) => new TextEncoder().encode(JSON.stringify(v)).length;

function frozen<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) frozen(v);
    Object.freeze(value);
  }
  return value;
}

function guards(): { guards: CallGuards; logs: Line[] } {
  const parsed = parseConfigObject(
    { mcpServers: { s: { command: 'node', maxResultBytes: CAP } }, gateway: { maxResultBytes: 65_536 } },
    {},
  );
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const logs: Line[] = [];
  const log = createJsonLogger({ level: 'debug', write: (l) => logs.push(JSON.parse(l) as Line) });
  return { guards: new CallGuards(parsed.config, log), logs };
}

function entry(outputSchema?: unknown): CatalogEntry {
  const full = {
    name: 's__weather',
    inputSchema: { type: 'object' },
    ...(outputSchema === undefined ? {} : { outputSchema }),
  };
  return frozen({
    name: 's__weather',
    server: 's',
    original: 'weather',
    tool: full,
    full,
    deferred: false,
    risk: 'read',
    approval: 'allow',
  }) as unknown as CatalogEntry;
}

const weather = frozen({
  type: 'object',
  properties: {
    city: { type: 'string' },
    celsius: { type: 'number' },
    conditions: { enum: ['sun', 'rain', 'snow'] },
  },
  required: ['city', 'celsius'],
  additionalProperties: false,
});

/** What a client of the 2026 era gets: dressed with resultType and the gateway's _meta. */
const dressed = (r: Result): Result => ({
  ...r,
  resultType: 'complete',
  _meta: { ...(r._meta as Result | undefined), 'io.modelcontextprotocol/serverInfo': { name: 'gw' } },
});

const parse = (json: string) => JSON.parse(json) as Result;
const textOf = (r: Result) => (r.content as { type: string; text: string }[]).map((b) => b.text).join('\n');

describe('compileOutputValidator', () => {
  it('lists the problems of structured content, worded like argument problems', () => {
    const compiled = compileOutputValidator(weather);
    if (!compiled.ok) throw new Error(compiled.reason);
    expect(compiled.validate({ city: 'Oslo', celsius: -3 })).toEqual({ valid: true });
    expect(compiled.validate({ celsius: 'cold', wind: 3 })).toEqual({
      valid: false,
      problems: [
        '/city: required property is missing',
        '/celsius: expected type number, got string',
        '/wind: property is not allowed',
      ],
    });
  });

  it('refuses a schema it cannot handle with a reason instead of throwing', () => {
    expect(compileOutputValidator({ $ref: '#/$defs/missing' })).toEqual({
      ok: false,
      reason: '$ref #/$defs/missing cannot be resolved',
    });
  });
});

describe('CallGuards.capResult: output schema', () => {
  it('relays valid structured content untouched, serialized as is', () => {
    const { guards: g, logs } = guards();
    const r = frozen(
      dressed({
        content: [{ type: 'text', text: '{"city":"Oslo","celsius":-3}' }],
        structuredContent: { city: 'Oslo', celsius: -3, conditions: 'snow' },
      }),
    );
    expect(g.capResult(entry(weather), r)).toBe(JSON.stringify(r));
    expect(logs).toEqual([]);
  });

  it('answers structured content that violates the schema with an isError result naming the problems', () => {
    const { guards: g, logs } = guards();
    const r = frozen(
      dressed({
        content: [{ type: 'text', text: 'SECRET upstream text' }],
        structuredContent: { city: 7, conditions: 'fog' },
        _meta: { 'com.example/trace': 'abc' },
      }),
    );
    const out = parse(g.capResult(entry(weather), r));
    expect(out).not.toHaveProperty('structuredContent');
    expect(out.isError).toBe(true);
    expect(out.resultType).toBe('complete');
    expect(out._meta).toEqual(r._meta);
    expect(out.content).toEqual([
      {
        type: 'text',
        text: [
          'The answer of tool s__weather did not match its declared output schema, so it was not relayed:',
          '- /celsius: required property is missing',
          '- /city: expected type string, got number',
          '- /conditions: Instance does not match any of ["sun","rain","snow"]',
        ].join('\n'),
      },
    ]);
    expect(JSON.stringify(out)).not.toContain('SECRET');
    expect(logs).toEqual([
      expect.objectContaining({
        event: 'guard.output_invalid',
        server: 's',
        tool: 's__weather',
        problems: 3,
      }),
    ]);
  });

  it('bounds the problem list like the argument check does', () => {
    const { guards: g } = guards();
    const many = { type: 'object', additionalProperties: { type: 'string' } };
    const structured = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, i]));
    const out = parse(g.capResult(entry(many), { content: [], structuredContent: structured }));
    const lines = textOf(out).split('\n');
    expect(lines).toHaveLength(1 + MAX_PROBLEMS);
    expect(lines.at(-1)).toBe(`- … and ${50 - MAX_PROBLEMS + 1} more problems`);
  });

  it('treats a missing structuredContent as a mismatch', () => {
    const { guards: g } = guards();
    const out = parse(
      g.capResult(entry(weather), dressed({ content: [{ type: 'text', text: 'Oslo, -3' }] })),
    );
    expect(out.isError).toBe(true);
    expect(out.resultType).toBe('complete');
    expect(textOf(out)).toBe(
      'The answer of tool s__weather did not match its declared output schema, so it was not relayed:\n' +
        '- (root): structuredContent is missing',
    );
  });

  it('relays an upstream isError result unchecked, with or without structured content', () => {
    const { guards: g, logs } = guards();
    const bare = frozen({ content: [{ type: 'text', text: 'city not found' }], isError: true });
    expect(g.capResult(entry(weather), bare)).toBe(JSON.stringify(bare));
    const odd = frozen({ content: [], structuredContent: { nope: 1 }, isError: true });
    expect(g.capResult(entry(weather), odd)).toBe(JSON.stringify(odd));
    expect(logs).toEqual([]);
  });

  it('leaves tools without an output schema alone, structured content or not', () => {
    const { guards: g, logs } = guards();
    const r = frozen({ content: [{ type: 'text', text: 'x' }], structuredContent: { city: 7 } });
    expect(g.capResult(entry(), r)).toBe(JSON.stringify(r));
    const none = frozen({ content: [{ type: 'text', text: 'x' }] });
    expect(g.capResult(entry(), none)).toBe(JSON.stringify(none));
    expect(logs).toEqual([]);
  });

  it('skips a schema it cannot compile, logging it once per entry, and never blocks', () => {
    const { guards: g, logs } = guards();
    const e = entry({ $schema: 'https://example.com/my-dialect', type: 'object' });
    const r = frozen({ content: [], structuredContent: { anything: true } });
    expect(g.capResult(e, r)).toBe(JSON.stringify(r));
    expect(g.capResult(e, r)).toBe(JSON.stringify(r));
    expect(logs).toEqual([
      expect.objectContaining({
        level: 'warn',
        event: 'guard.output_unvalidated',
        rule: 'schema-unsupported',
        server: 's',
        tool: 's__weather',
        reason: 'unsupported JSON Schema dialect https://example.com/my-dialect',
      }),
    ]);
    // An uncompilable schema still requires structured content: a client that knows it throws.
    expect(parse(g.capResult(e, { content: [] })).isError).toBe(true);
  });

  it('does not touch the catalog schema (the validator works on a copy)', () => {
    const { guards: g } = guards();
    const schema = {
      type: 'object',
      properties: { a: { $ref: '#/$defs/n' } },
      $defs: { n: { type: 'number' } },
    };
    const before = JSON.stringify(schema);
    g.capResult(entry(schema), { content: [], structuredContent: { a: 'x' } });
    expect(JSON.stringify(schema)).toBe(before);
  });
});

describe('CallGuards.capResult: the cap and an output schema', () => {
  const rows = { city: 'Oslo', celsius: -3, conditions: 'snow' };
  const big = () =>
    frozen(
      dressed({
        content: [{ type: 'text', text: 'r'.repeat(5000) }],
        structuredContent: { ...rows, city: 'O'.repeat(5000) },
        _meta: { 'com.example/trace': 'abc' },
      }),
    );

  it('answers a too-large result whose structured content had to go with a too-large isError result', () => {
    const { guards: g, logs } = guards();
    const r = big();
    const json = g.capResult(entry(weather), r);
    const out = parse(json);
    expect(out).not.toHaveProperty('structuredContent');
    expect(out.isError).toBe(true);
    expect(out.resultType).toBe('complete');
    expect(out._meta).toEqual({ ...(r._meta as Result), [TRUNCATED_META_KEY]: true });
    expect(textOf(out)).toBe(
      `The answer of tool s__weather was too large to relay: ${size(r)} bytes, over the result size cap of ` +
        `${CAP} bytes. Its structured content, which the tool's output schema requires, cannot be cut to ` +
        'fit. Ask for less: a narrower query, fewer items or a smaller page.',
    );
    expect(new TextEncoder().encode(json).length).toBeLessThanOrEqual(CAP);
    expect(logs.map((l) => l.event)).toEqual(['guard.result_truncated']);
  });

  it('without an output schema the same result keeps the old cap: content cut, no isError', () => {
    const { guards: g } = guards();
    const out = parse(g.capResult(entry(), big()));
    expect(out).not.toHaveProperty('structuredContent');
    expect(out).not.toHaveProperty('isError');
    expect(textOf(out)).toContain('[… structuredContent omitted:');
    expect((out._meta as Result)[TRUNCATED_META_KEY]).toBe(true);
  });

  it('keeps a result whose small structured content survived the cap, and checks it', () => {
    const { guards: g } = guards();
    const r = frozen({ content: [{ type: 'text', text: 'y'.repeat(10_000) }], structuredContent: rows });
    const out = parse(g.capResult(entry(weather), r));
    expect(out.structuredContent).toEqual(rows);
    expect(out).not.toHaveProperty('isError');
    expect(textOf(out)).toMatch(/\[… truncated: \d+ of 10000 bytes\]$/);
    expect((out._meta as Result)[TRUNCATED_META_KEY]).toBe(true);

    const bad = frozen({
      content: [{ type: 'text', text: 'y'.repeat(10_000) }],
      structuredContent: { city: 1 },
    });
    const refused = parse(g.capResult(entry(weather), bad));
    expect(refused.isError).toBe(true);
    expect(refused).not.toHaveProperty('structuredContent');
    expect(textOf(refused)).toContain('- /city: expected type string, got number');
    expect(refused._meta).toEqual({ [TRUNCATED_META_KEY]: true });
  });

  it('an upstream isError result over the cap is cut as before, not replaced', () => {
    const { guards: g } = guards();
    const r = frozen({ content: [{ type: 'text', text: 'e'.repeat(10_000) }], isError: true });
    const out = parse(g.capResult(entry(weather), r));
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/^e+\n\[… truncated: \d+ of 10000 bytes\]$/);
  });

  it('with a tiny cap the replacement is itself capped and stays an isError result', () => {
    const parsed = parseConfigObject({ mcpServers: { s: { command: 'node', maxResultBytes: 100 } } }, {});
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
    const g = new CallGuards(parsed.config, createJsonLogger({ level: 'error', write: () => {} }));
    const out = parse(g.capResult(entry(weather), big()));
    expect(out.isError).toBe(true);
    expect(out).not.toHaveProperty('structuredContent');
    expect((out._meta as Result)[TRUNCATED_META_KEY]).toBe(true);
  });
});
