import { describe, expect, it } from 'vitest';
import {
  MAX_DECLARATION_CHARS,
  toolDeclaration,
  toolsDeclaration,
  typeOf,
} from '../../src/code/declarations.js';

describe('TypeScript declarations from JSON Schema (#50)', () => {
  it('declares arguments and the answer, quoting a name that is not an identifier', () => {
    const d = toolDeclaration({
      name: 'ev__get-sum',
      description: 'Adds two numbers.',
      inputSchema: {
        type: 'object',
        properties: {
          a: { type: 'number', description: 'First' },
          'b-value': { type: 'integer' },
          mode: { enum: ['fast', 'exact'] },
          tags: { type: 'array', items: { type: 'string' } },
          opt: { type: ['string', 'null'] },
        },
        required: ['a', 'b-value'],
      },
      outputSchema: { type: 'object', properties: { sum: { type: 'number' } }, required: ['sum'] },
    });
    expect(d).toBe(
      '/** Adds two numbers. */\n"ev__get-sum"(args: { /** First */ a: number; "b-value": number; mode?: "fast" | "exact"; tags?: string[]; opt?: string | null; }): Promise<{ sum: number; }>;',
    );
  });

  it('says ToolResult without an output schema, and makes arguments optional when none is required', () => {
    expect(toolDeclaration({ name: 'mem__read_graph', inputSchema: { type: 'object' } })).toBe(
      'mem__read_graph(args?: Record<string, unknown>): Promise<ToolResult>;',
    );
  });

  it('never lets upstream text close the comment or break the line', () => {
    const d = toolDeclaration({
      name: 'x',
      description: 'Nice tool */ declare const evil: 1; /*\nsecond line\u2028third',
      inputSchema: { type: 'object' },
    });
    expect(d).not.toContain('*/ declare');
    expect(d.split('\n')).toHaveLength(2);
  });

  it('is bounded: deep, wide and huge schemas become unknown or a loose signature', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 50; i++) deep = { type: 'object', properties: { n: deep } };
    expect(typeOf(deep)).toContain('unknown');
    const wide = {
      type: 'object',
      properties: Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`p${i}`, { type: 'string' }])),
    };
    const d = toolDeclaration({ name: 'wide', inputSchema: wide as never });
    expect(d.length).toBeLessThanOrEqual(MAX_DECLARATION_CHARS);
    expect(typeOf({ $ref: '#/$defs/x' })).toBe('unknown');
    expect(typeOf({ anyOf: [{ type: 'string' }, { type: 'number' }] })).toBe('string | number');
  });

  it('declares the tools global with the ToolResult type', () => {
    const all = toolsDeclaration([{ name: 'a__b', inputSchema: { type: 'object' } }]);
    expect(all).toMatch(/^type ToolResult = /);
    expect(all).toContain(
      'declare const tools: {\n  a__b(args?: Record<string, unknown>): Promise<ToolResult>;\n};',
    );
  });
});
