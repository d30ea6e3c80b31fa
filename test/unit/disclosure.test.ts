import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import {
  DESCRIBE_TOOL_NAME,
  type DisclosureInput,
  discloseServer,
  tier1Stub,
} from '../../src/guards/disclosure.js';

function frozen<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) frozen(v);
    Object.freeze(value);
  }
  return value;
}

/** A tool whose input schema has `params` richly described parameters, the first two required. */
function tool(name: string, params: number, extra: Partial<Tool> = {}): DisclosureInput {
  const properties: Record<string, object> = {};
  for (let i = 0; i < params; i++) {
    properties[`p${i}`] =
      i % 3 === 0
        ? {
            type: 'string',
            description: `Parameter ${i} of ${name}, described at length.`,
            enum: ['a', 'b', 'c'],
          }
        : i % 3 === 1
          ? { type: ['integer', 'null'], minimum: 0, default: 10, description: 'A count.' }
          : {
              type: 'object',
              properties: { deep: { type: 'string', pattern: '^x+$' } },
              description: 'Nested.',
            };
  }
  return {
    name,
    tool: {
      name,
      description: `Does ${name}.`,
      inputSchema: { type: 'object', properties, required: ['p0', 'p1'].slice(0, params) },
      outputSchema: {
        type: 'object',
        properties: { result: { type: 'string', description: 'The outcome.' } },
      },
      ...extra,
    },
  };
}

/** The measure discloseServer promises, computed independently: JSON characters. */
function chars(inputs: readonly DisclosureInput[], tools: readonly Tool[]): number {
  const len = (v: unknown) => (v === undefined ? 0 : JSON.stringify(v).length);
  return tools.reduce(
    (n, t, i) =>
      n + len(inputs[i]!.name) + len(t.description ?? '') + len(t.inputSchema) + len(t.outputSchema),
    0,
  );
}
const measure = (inputs: readonly DisclosureInput[], tools: readonly Tool[]) =>
  Math.ceil(chars(inputs, tools) / 4);
const wholeChars = (inputs: readonly DisclosureInput[]) =>
  chars(
    inputs,
    inputs.map((i) => i.tool),
  );
/** Characters saved by moving one tool to its tier-1 form. */
function tier1Saving(input: DisclosureInput): number {
  const { outputSchema: _o, ...rest } = input.tool;
  const stub = {
    ...rest,
    description: `${input.tool.description} ${sentence(input.name)}`,
    inputSchema: tier1Stub(input.tool.inputSchema),
  };
  return wholeChars([input]) - chars([input], [stub]);
}

const sentence = (name: string) => `Full schema: call ${DESCRIBE_TOOL_NAME} with {"name": "${name}"}.`;

describe('discloseServer', () => {
  it("inlines everything unchanged when 'off', however large", () => {
    const inputs = frozen(Array.from({ length: 50 }, (_, i) => tool(`t${i}`, 40)));
    const r = discloseServer(inputs, 'off');
    expect(r.deferred).toEqual([]);
    expect(r.floorExceeded).toBe(false);
    for (const [i, t] of r.tools.entries()) expect(t).toBe(inputs[i]!.tool);
    expect(r.tokens).toBe(measure(inputs, r.tools));
  });

  it('inlines everything unchanged when the server fits', () => {
    const inputs = frozen([tool('a', 3), tool('b', 2)]);
    const r = discloseServer(inputs, 10_000);
    expect(r.tools[0]).toBe(inputs[0]!.tool);
    expect(r.tools[1]).toBe(inputs[1]!.tool);
    expect(r).toMatchObject({ deferred: [], floorExceeded: false, tokens: measure(inputs, r.tools) });
  });

  it('E4: a 200-tool catalog with large schemas comes in at or under budget', () => {
    const inputs = frozen(Array.from({ length: 200 }, (_, i) => tool(`srv__tool_${i}`, 10 + (i % 25))));
    const before = measure(
      inputs,
      inputs.map((i) => i.tool),
    );
    expect(before).toBeGreaterThan(100_000);
    const r = discloseServer(inputs, 20_000);
    expect(r.floorExceeded).toBe(false);
    expect(r.tokens).toBeLessThanOrEqual(20_000);
    expect(measure(inputs, r.tools)).toBe(r.tokens);
    expect(r.deferred.length).toBeGreaterThan(0);
    for (const [i, t] of r.tools.entries()) {
      const name = inputs[i]!.name;
      if (!r.deferred.includes(name)) continue;
      expect(t.description).toBe(`Does ${name}. ${sentence(name)}`);
      expect(t.outputSchema).toBeUndefined();
    }
  });

  it('stubs keep every parameter name, its plain type, and the required list', () => {
    const inputs = frozen(Array.from({ length: 20 }, (_, i) => tool(`t${i}`, 12)));
    // Exactly what every tool at tier 1 costs: all are deferred, none falls to tier 2.
    const saved = inputs.reduce((n, i) => n + tier1Saving(i), 0);
    const r = discloseServer(inputs, Math.ceil((wholeChars(inputs) - saved) / 4));
    expect(r.deferred).toHaveLength(20);
    for (const t of r.tools) {
      expect(t.inputSchema.required).toEqual(['p0', 'p1']);
      expect(Object.keys(t.inputSchema.properties ?? {})).toEqual(
        Array.from({ length: 12 }, (_, i) => `p${i}`),
      );
    }
    expect(r.tools[0]!.inputSchema.properties).toMatchObject({
      p0: { type: 'string' },
      p1: { type: ['integer', 'null'] },
      p2: { type: 'object' },
    });
  });

  it('small schemas stay whole while the largest are shed first', () => {
    const small = Array.from({ length: 10 }, (_, i) => tool(`small_${i}`, 1));
    const large = [tool('large_a', 60), tool('large_b', 50), tool('large_c', 40)];
    const inputs = frozen([
      small[0]!,
      large[0]!,
      ...small.slice(1, 5),
      large[1]!,
      ...small.slice(5),
      large[2]!,
    ]);
    const whole = measure(
      inputs,
      inputs.map((i) => i.tool),
    );
    // Just enough to need shedding large_a and nothing more.
    const r = discloseServer(inputs, Math.ceil((wholeChars(inputs) - tier1Saving(large[0]!)) / 4));
    expect(r.deferred).toEqual(['large_a']);
    r.tools.forEach((t, i) => {
      if (inputs[i]!.name !== 'large_a') expect(t).toBe(inputs[i]!.tool);
    });
    // A tighter budget sheds the next largest, still leaving the small ones whole.
    const tighter = discloseServer(inputs, Math.ceil(whole / 2));
    expect(tighter.deferred).toEqual(['large_a', 'large_b', 'large_c'].slice(0, tighter.deferred.length));
    expect(tighter.deferred.every((n) => n.startsWith('large_'))).toBe(true);
    expect(tighter.tokens).toBeLessThanOrEqual(Math.ceil(whole / 2));
  });

  it('falls back to tier 2, largest stub first, when tier 1 everywhere is not enough', () => {
    const inputs = frozen([tool('a', 30), tool('b', 5), tool('c', 15)]);
    const allTier1 = discloseServer(inputs, 1).tools;
    expect(allTier1.every((t) => t.inputSchema.properties === undefined)).toBe(true); // floor case: all tier 2
    const tier1Tokens = measure(
      inputs,
      inputs.map((i) => ({
        ...i.tool,
        description: `Does ${i.name}. ${sentence(i.name)}`,
        inputSchema: tier1Stub(i.tool.inputSchema),
        outputSchema: undefined,
      })),
    );
    // A budget a little under "everything at tier 1": only the largest stub (a) drops to tier 2.
    const r = discloseServer(inputs, tier1Tokens - 5);
    expect(r.deferred).toEqual(['a', 'b', 'c']);
    expect(r.tools[0]!.inputSchema).toEqual({ type: 'object' });
    expect(r.tools[1]!.inputSchema).toEqual(tier1Stub(inputs[1]!.tool.inputSchema));
    expect(r.tools[2]!.inputSchema).toEqual(tier1Stub(inputs[2]!.tool.inputSchema));
    expect(r.tokens).toBeLessThanOrEqual(tier1Tokens - 5);
    expect(r.floorExceeded).toBe(false);
  });

  it('reports a floor that is over budget, with the floor in tokens', () => {
    const inputs = frozen(
      Array.from({ length: 30 }, (_, i) => tool(`t${i}`, 8, { description: 'd'.repeat(400) })),
    );
    const r = discloseServer(inputs, 500);
    const floor = measure(
      inputs,
      inputs.map((i) => ({
        ...i.tool,
        description: `${i.tool.description} ${sentence(i.name)}`,
        inputSchema: { type: 'object' as const },
        outputSchema: undefined,
      })),
    );
    expect(r).toMatchObject({ floorExceeded: true, floorTokens: floor, tokens: floor });
    expect(r.deferred).toHaveLength(30);
    expect(r.tools.every((t) => JSON.stringify(t.inputSchema) === '{"type":"object"}')).toBe(true);
    // Names and descriptions are never shed.
    for (const [i, t] of r.tools.entries())
      expect(t.description?.startsWith(inputs[i]!.tool.description!)).toBe(true);
  });

  it('counts the pointer sentence, and never defers a tool when that would cost more', () => {
    const tiny = frozen([
      { name: 'x', tool: { name: 'x', inputSchema: { type: 'object' as const } } },
      tool('big', 40),
    ]);
    const r = discloseServer(tiny, 1);
    expect(r.deferred).toEqual(['big']);
    expect(r.tools[0]).toBe(tiny[0]!.tool);
    expect(r.tokens).toBe(measure(tiny, r.tools));
    expect(r.tools[1]!.description).toBe(`Does big. ${sentence('big')}`);
  });

  it('is deterministic, breaks size ties by name and keeps input order', () => {
    const twins = [tool('zeta', 20), tool('alpha', 20), tool('mid', 20)].map((t) => ({
      ...t,
      tool: { ...t.tool, description: 'Same.' },
    }));
    const inputs = frozen(twins);
    // Room for shedding exactly one of three equal tools: the first by name goes.
    const budget = Math.ceil((wholeChars(inputs) - tier1Saving(inputs[1]!)) / 4);
    const r = discloseServer(inputs, budget);
    expect(r.deferred).toEqual(['alpha']);
    expect(r.tools.map((t) => t.name)).toEqual(['zeta', 'alpha', 'mid']);
    const again = discloseServer(structuredClone(twins), budget);
    expect(JSON.stringify(again)).toBe(JSON.stringify(r));
    const reversed = discloseServer([...inputs].reverse(), budget);
    expect(reversed.deferred).toEqual(['alpha']);
    expect(reversed.tools.map((t) => t.name)).toEqual(['mid', 'alpha', 'zeta']);
  });

  it('keeps other tool fields on deferred tools and never mutates the input', () => {
    const input = tool('t', 30, { title: 'T', annotations: { readOnlyHint: true }, _meta: { k: 1 } });
    const inputs = frozen([input]);
    const snapshot = structuredClone(inputs);
    const r = discloseServer(inputs, 0);
    expect(r.tools[0]).toMatchObject({
      name: 't',
      title: 'T',
      annotations: { readOnlyHint: true },
      _meta: { k: 1 },
    });
    expect(r.tools[0]).not.toHaveProperty('outputSchema');
    expect(inputs).toEqual(snapshot);
  });

  it('rejects a budget that is not a non-negative number or off', () => {
    expect(() => discloseServer([], -1)).toThrow(TypeError);
    expect(() => discloseServer([], Number.NaN)).toThrow(/budgetTokens/);
    expect(() => discloseServer([], 'on' as never)).toThrow(TypeError);
  });
});

describe('tier1Stub', () => {
  it('keeps names, plain types and required; drops everything else', () => {
    const schema = {
      type: 'object' as const,
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      description: 'Top.',
      $defs: { Opt: { type: 'string' } },
      additionalProperties: false,
      properties: {
        q: {
          type: 'string',
          description: 'Query.',
          minLength: 1,
          pattern: '^.+$',
          format: 'uri',
          examples: ['x'],
        },
        n: { type: 'integer', default: 5, enum: [1, 5] },
        tags: { type: 'array', items: { type: 'string', enum: ['a'] } },
        opts: { type: 'object', properties: { deep: { type: 'string' } }, required: ['deep'] },
        either: { anyOf: [{ type: 'string' }, { type: 'number' }] },
        ref: { $ref: '#/$defs/Opt' },
        odd: { type: 'file' },
        mixed: { type: ['string', 'null'] },
        never: false,
      },
      required: ['q', 'opts'],
    };
    expect(tier1Stub(frozen(schema) as unknown as Tool['inputSchema'])).toEqual({
      type: 'object',
      properties: {
        q: { type: 'string' },
        n: { type: 'integer' },
        tags: { type: 'array' },
        opts: { type: 'object' },
        either: {},
        ref: {},
        odd: {},
        mixed: { type: ['string', 'null'] },
        never: { not: {} },
      },
      required: ['q', 'opts'],
    });
  });

  it('handles a schema with no properties', () => {
    expect(tier1Stub({ type: 'object' })).toEqual({ type: 'object' });
    expect(tier1Stub({ type: 'object', required: [] })).toEqual({ type: 'object', required: [] });
  });
});
