import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { MAX_SCHEMA_DEPTH, MAX_TITLE_BYTES, toolBounds } from '../../src/guards/tool-bounds.js';

const ESC = '\u001b';
const BEL = '\u0007';
const bytes = (s: string) => new TextEncoder().encode(s).length;
const bound = toolBounds({ maxDescriptionBytes: 200, maxSchemaBytes: 2000 });

function tool(extra: Partial<Tool> = {}): Tool {
  return {
    name: 'search',
    description: 'Searches the index.',
    inputSchema: {
      type: 'object',
      properties: { q: { type: 'string', description: 'The query.' } },
      required: ['q'],
    },
    ...extra,
  };
}

/** Deep-frozen, so any mutation by the guard throws in strict-mode ESM. */
function frozen<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) frozen(v);
    Object.freeze(value);
  }
  return value;
}

function nested(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < depth; i++) schema = { type: 'object', properties: { a: schema } };
  return schema;
}

describe('toolBounds', () => {
  it('passes a clean tool through as the same object, with no findings', () => {
    const t = frozen(tool({ title: 'Search', annotations: { title: 'Search', readOnlyHint: true } }));
    expect(bound(t)).toEqual({ tool: t, findings: [] });
    expect(bound(t).tool).toBe(t);
  });

  it('C6: strips ANSI and bidi characters from the description and both titles', () => {
    const t = frozen(
      tool({
        description: `Reads ${ESC}[8mhidden${ESC}[0m files\u202e`,
        title: `Se\u200barch`,
        annotations: { title: `${ESC}]0;x\u0007Search`, destructiveHint: false },
      }),
    );
    const { tool: out, findings } = bound(t);
    expect(out?.description).toBe('Reads hidden files');
    expect(out?.title).toBe('Search');
    expect(out?.annotations).toEqual({ title: 'Search', destructiveHint: false });
    expect(findings).toEqual([
      { rule: 'unsafe-text-stripped', tool: 'search', field: 'description' },
      { rule: 'unsafe-text-stripped', tool: 'search', field: 'title' },
      { rule: 'unsafe-text-stripped', tool: 'search', field: 'annotations.title' },
    ]);
  });

  it('C6: strips description and title strings at any depth inside both schemas', () => {
    const t = frozen(
      tool({
        inputSchema: {
          type: 'object',
          title: `In\u2066put`,
          properties: {
            // A property literally named "title" holds a schema, which is walked, not replaced.
            title: { type: 'string', description: `Name${ESC}[2J` },
            items: { type: 'array', items: { anyOf: [{ type: 'string', description: 'ok\u200f' }] } },
          },
          $defs: { x: { description: '\u202aembedded' } },
        },
        outputSchema: { type: 'object', properties: { r: { type: 'string', title: 'R\ufeff' } } },
      }),
    );
    const { tool: out, findings } = bound(t);
    expect(out?.inputSchema).toEqual({
      type: 'object',
      title: 'Input',
      properties: {
        title: { type: 'string', description: 'Name' },
        items: { type: 'array', items: { anyOf: [{ type: 'string', description: 'ok' }] } },
      },
      $defs: { x: { description: 'embedded' } },
    });
    expect(out?.outputSchema).toEqual({ type: 'object', properties: { r: { type: 'string', title: 'R' } } });
    expect(findings.map((f) => f.rule === 'unsafe-text-stripped' && f.field)).toEqual([
      'inputSchema',
      'outputSchema',
    ]);
  });

  it('#13.9: strips every string a client is shown in a schema: enum values, defaults, property names', () => {
    const schema = {
      type: 'object' as const,
      properties: {
        mode: {
          type: 'string',
          enum: [`a${ESC}[0m`, `${ESC}]8;;http://evil${BEL}link${ESC}]8;;${BEL}`],
          default: 'x\u202e',
        },
        'name\u2066': { type: 'string', examples: ['e\ufe0f\udb40\udd10'] },
      },
    };
    const { tool: out, findings } = bound(frozen(tool({ inputSchema: schema })));
    expect(out?.inputSchema).toEqual({
      type: 'object',
      properties: {
        mode: { type: 'string', enum: ['a', 'link'], default: 'x' },
        name: { type: 'string', examples: ['e'] },
      },
    });
    expect(findings).toContainEqual({ rule: 'unsafe-text-stripped', tool: 'search', field: 'inputSchema' });
  });

  it('#13.10: only the fields of a Tool are relayed; _meta, annotations and execution over 2 KiB are dropped; icons bounded', () => {
    const icon = {
      src: 'https://example.com/i.png',
      mimeType: 'image/png',
      sizes: ['48x48'],
      extra: 'x'.repeat(10),
    };
    const big = { blob: 'm'.repeat(5 * 1024 * 1024) };
    const given = {
      ...tool({}),
      _meta: big,
      annotations: { readOnlyHint: true, title: `T${ESC}[2J` },
      execution: { taskSupport: 'optional' },
      icons: Array.from({ length: 20 }, () => icon),
      unknownField: 'y'.repeat(100_000),
    } as Record<string, unknown>;
    const out = bound(frozen(given as never)).tool as unknown as Record<string, unknown>;
    expect(out._meta).toBeUndefined();
    expect(out.unknownField).toBeUndefined();
    expect(out.annotations).toEqual({ readOnlyHint: true, title: 'T' });
    expect(out.execution).toEqual({ taskSupport: 'optional' });
    expect(out.icons).toHaveLength(8);
    expect((out.icons as unknown[])[0]).toEqual({ src: icon.src, mimeType: 'image/png', sizes: ['48x48'] });
    expect(JSON.stringify(out).length).toBeLessThan(4096);
    // A small _meta passes, its strings stripped.
    const small = bound(frozen({ ...tool({}), _meta: { note: `hi${ESC}[31m` } } as never))
      .tool as unknown as Record<string, unknown>;
    expect(small._meta).toEqual({ note: 'hi' });
  });

  it('C6: reports a name with unsafe characters but does not change it', () => {
    const name = `evil\u202etool`;
    const { tool: out, findings } = bound(frozen(tool({ name })));
    expect(out?.name).toBe(name);
    expect(findings).toEqual([{ rule: 'unsafe-text-stripped', tool: 'eviltool', field: 'name' }]);
  });

  it('E4: clips a long description with a marker, within the limit', () => {
    const description = 'Long text. '.repeat(100);
    const { tool: out, findings } = bound(frozen(tool({ description })));
    expect(bytes(out!.description!)).toBeLessThanOrEqual(200);
    expect(out!.description).toMatch(/\[… clipped: \d+ of 1100 bytes\]$/);
    expect(findings).toEqual([{ rule: 'description-clipped', tool: 'search', bytes: 1100 }]);
  });

  it('E4: clips an oversized title', () => {
    const { tool: out, findings } = bound(frozen(tool({ title: '標'.repeat(200) })));
    expect(bytes(out!.title!)).toBeLessThanOrEqual(MAX_TITLE_BYTES);
    expect(findings).toEqual([{ rule: 'title-clipped', tool: 'search', field: 'title', bytes: 600 }]);
  });

  it('E4: withholds a tool whose inputSchema is over the limit, naming it and its size', () => {
    const inputSchema = {
      type: 'object' as const,
      properties: { q: { type: 'string', description: 'x'.repeat(3000) } },
    };
    const size = bytes(JSON.stringify(inputSchema));
    expect(bound(frozen(tool({ inputSchema })))).toEqual({
      tool: null,
      findings: [{ rule: 'schema-too-large', tool: 'search', which: 'inputSchema', bytes: size }],
    });
  });

  it('E4: withholds a tool whose outputSchema is over the limit', () => {
    const outputSchema = {
      type: 'object' as const,
      properties: { r: { enum: Array.from({ length: 1000 }, (_, i) => i) } },
    };
    const { tool: out, findings } = bound(frozen(tool({ outputSchema })));
    expect(out).toBeNull();
    expect(findings).toEqual([
      {
        rule: 'schema-too-large',
        tool: 'search',
        which: 'outputSchema',
        bytes: bytes(JSON.stringify(outputSchema)),
      },
    ]);
  });

  it('E4: measures the limit in UTF-8 bytes, not characters', () => {
    const desc = '世'.repeat(700); // 700 characters, 2100 bytes
    const inputSchema = { type: 'object' as const, description: desc, properties: {} };
    expect(JSON.stringify(inputSchema).length).toBeLessThan(800);
    expect(bound(tool({ inputSchema })).tool).toBeNull();
  });

  it(`E4: a schema nested deeper than ${MAX_SCHEMA_DEPTH} levels is withheld however small`, () => {
    const shallow = bound(tool({ inputSchema: nested(30) as Tool['inputSchema'] }));
    expect(shallow.tool).not.toBeNull();
    const deep = toolBounds({ maxDescriptionBytes: 200, maxSchemaBytes: 1_000_000 });
    const { tool: out, findings } = deep(tool({ inputSchema: nested(40) as Tool['inputSchema'] }));
    expect(out).toBeNull();
    expect(findings).toEqual([
      expect.objectContaining({ rule: 'schema-too-large', which: 'inputSchema', depth: MAX_SCHEMA_DEPTH }),
    ]);
  });

  it('E4: a schema too deep for JSON.stringify is withheld without throwing', () => {
    const inputSchema = nested(100_000) as Tool['inputSchema'];
    const { tool: out, findings } = bound(tool({ inputSchema }));
    expect(out).toBeNull();
    expect(findings).toEqual([
      { rule: 'schema-too-large', tool: 'search', which: 'inputSchema', bytes: -1, depth: MAX_SCHEMA_DEPTH },
    ]);
  });

  it('never mutates its input and copies only what it changes', () => {
    const t = frozen(
      tool({
        description: `x${ESC}[0m`,
        inputSchema: {
          type: 'object',
          properties: { a: { type: 'string', description: '\u200b' }, b: { type: 'number' } },
        },
        annotations: { title: '\u202e', readOnlyHint: true },
      }),
    );
    const snapshot = structuredClone(t);
    const { tool: out } = bound(t);
    expect(t).toEqual(snapshot);
    expect(out).not.toBe(t);
    const props = out!.inputSchema.properties as Record<string, unknown>;
    expect(props.b).toBe((t.inputSchema.properties as Record<string, unknown>).b);
  });

  it('keeps a `__proto__` key an ordinary property', () => {
    const inputSchema = JSON.parse(
      '{"type":"object","properties":{"__proto__":{"type":"string","description":"\\u202ex"}}}',
    ) as Tool['inputSchema'];
    const out = bound(tool({ inputSchema })).tool!;
    const props = out.inputSchema.properties as Record<string, unknown>;
    expect(Object.getPrototypeOf(props)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(props, '__proto__')?.value).toEqual({
      type: 'string',
      description: 'x',
    });
  });

  it('validates its options when built', () => {
    expect(() => toolBounds({ maxDescriptionBytes: 0, maxSchemaBytes: 10 })).toThrow(
      'toolBounds: options.maxDescriptionBytes must be a positive integer, got 0',
    );
    expect(() => toolBounds({ maxDescriptionBytes: 10, maxSchemaBytes: Number.NaN })).toThrow(TypeError);
    expect(() => toolBounds({} as never)).toThrow(/maxDescriptionBytes/);
  });
});

describe('x-mcp-header annotations (spec 2026-07-28: streamable-http, Schema Extension)', () => {
  const bound = toolBounds({ maxDescriptionBytes: 4096, maxSchemaBytes: 20_480 });
  it('a tool with valid annotations passes unchanged', () => {
    const tool = {
      name: 'q',
      inputSchema: {
        type: 'object' as const,
        properties: { region: { type: 'string', 'x-mcp-header': 'Region' } },
      },
    };
    expect(bound(tool)).toEqual({ tool, findings: [] });
  });
  it('a tool with an invalid annotation is withheld, with the reason', () => {
    const r = bound({
      name: 'q',
      inputSchema: { type: 'object' as const, properties: { n: { type: 'number', 'x-mcp-header': 'N' } } },
    });
    expect(r.tool).toBeNull();
    expect(r.findings).toEqual([
      { rule: 'invalid-x-mcp-header', tool: 'q', reason: expect.stringContaining('number') },
    ]);
  });
});
