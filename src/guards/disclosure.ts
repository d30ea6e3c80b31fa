import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { isObject } from '../lib/json.js';

/** The gateway's meta-tool that returns the full definition of a tool listed in short form. */
export const DESCRIBE_TOOL_NAME = 'manifold__describe_tool';

/** One tool of a server, under the name the gateway exposes it as. */
export interface DisclosureInput {
  name: string;
  tool: Tool;
}

export interface DisclosureResult {
  /** In input order: the tool itself when inlined whole, a shortened copy when deferred. */
  tools: Tool[];
  /** Exposed names of the shortened tools, in input order. */
  deferred: string[];
  /** What `tools` costs, in tokens of 4 characters. */
  tokens: number;
  /** The least any shedding can reach: names, descriptions and `{type: 'object'}` schemas. */
  floorTokens: number;
  /** True when even the floor is over the budget; `tools` is then as short as it gets. */
  floorExceeded: boolean;
}

const CHARS_PER_TOKEN = 4;
const SCALAR_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null', 'array', 'object']);
const TIER2: Tool['inputSchema'] = Object.freeze({ type: 'object' as const });

/** Appended to a deferred tool's description, so a model knows where the full schema is. */
function pointer(name: string): string {
  return `Full schema: call ${DESCRIBE_TOOL_NAME} with {"name": ${JSON.stringify(name)}}.`;
}

/**
 * Applies one server's schema disclosure budget. Every inlined description and schema costs
 * context in every conversation, whether or not the tool is used, so a server whose tools cost
 * more than `budgetTokens` (4 characters per token, counted on the JSON of each tool's name,
 * description, inputSchema and outputSchema) has its largest schemas shed first, stopping as soon
 * as it fits, so small schemas stay whole:
 *
 * 1. tier 1: `tier1Stub` (parameter names, scalar types, required), largest schema first;
 * 2. if every useful tier-1 step is not enough, tier 2: `{type: 'object'}`, largest stub first.
 *
 * A deferred tool loses its outputSchema and its description gains one sentence pointing at
 * `manifold__describe_tool`; that sentence counts against the budget too, and a tool is only
 * shortened when that actually saves characters. Names and descriptions are never shed, so a
 * budget below them all is reported as `floorExceeded`. Output is deterministic (ties broken by
 * name) and in input order; input is never mutated.
 *
 * @example
 * const { tools, deferred, floorExceeded } = discloseServer(
 *   listed.map((tool) => ({ name: `github__${tool.name}`, tool })),
 *   20_000,
 * );
 * // deferred: ['github__create_pull_request', ...], the tools whose schemas were shortened
 */
export function discloseServer(
  tools: readonly DisclosureInput[],
  budgetTokens: number | 'off',
): DisclosureResult {
  if (
    budgetTokens !== 'off' &&
    !(typeof budgetTokens === 'number' && budgetTokens >= 0 && Number.isFinite(budgetTokens))
  ) {
    throw new TypeError(
      `discloseServer: budgetTokens must be a non-negative number or 'off', got ${String(budgetTokens)}`,
    );
  }
  const entries = tools.map(({ name, tool }) => {
    const full = chars(name, tool.description, tool.inputSchema, tool.outputSchema);
    const described = deferredDescription(name, tool.description);
    const stub = tier1Stub(tool.inputSchema);
    return {
      name,
      tool,
      stub,
      // Cost at level 0 (whole), 1 (tier-1 stub) and 2 (tier-2 stub).
      cost: [full, chars(name, described, stub), chars(name, described, TIER2)] as const,
      schemaChars: [json(tool.inputSchema) + json(tool.outputSchema), json(stub), json(TIER2)] as const,
      level: 0 as 0 | 1 | 2,
    };
  });
  let total = entries.reduce((n, e) => n + e.cost[0], 0);
  const floor = entries.reduce((n, e) => n + Math.min(e.cost[0], e.cost[2]), 0);

  if (budgetTokens !== 'off') {
    const limit = budgetTokens * CHARS_PER_TOKEN;
    for (const level of [1, 2] as const) {
      if (total <= limit) break;
      // Largest schema at its current level first; equal sizes go by name so output is stable.
      const order = entries
        .filter((e) => e.level < level)
        .sort((a, b) => b.schemaChars[b.level] - a.schemaChars[a.level] || compare(a.name, b.name));
      for (const e of order) {
        if (total <= limit) break;
        if (e.cost[level] >= e.cost[e.level]) continue;
        total += e.cost[level] - e.cost[e.level];
        e.level = level;
      }
    }
  }

  return {
    tools: entries.map((e) =>
      e.level === 0 ? e.tool : shorten(e.name, e.tool, e.level === 1 ? e.stub : TIER2),
    ),
    deferred: entries.filter((e) => e.level > 0).map((e) => e.name),
    tokens: Math.ceil(total / CHARS_PER_TOKEN),
    floorTokens: Math.ceil(floor / CHARS_PER_TOKEN),
    floorExceeded: budgetTokens !== 'off' && floor > budgetTokens * CHARS_PER_TOKEN,
  };
}

/**
 * The tier-1 stub of an input schema: enough for a model to call the tool correctly in the
 * common case (parameter names, their scalar types, which are required), nothing else.
 * Descriptions, enums, formats, patterns, defaults, examples, `$defs` and nested bodies go;
 * `manifold__describe_tool` returns the full schema when the model needs it.
 *
 * @example
 * tier1Stub({
 *   type: 'object',
 *   properties: { q: { type: 'string', description: 'Query', minLength: 1 }, opts: { type: 'object', properties: {} } },
 *   required: ['q'],
 * });
 * // { type: 'object', properties: { q: { type: 'string' }, opts: { type: 'object' } }, required: ['q'] }
 */
export function tier1Stub(schema: Tool['inputSchema']): Tool['inputSchema'] {
  const stub: Tool['inputSchema'] = { type: 'object' };
  const properties = schema?.properties;
  if (isObject(properties)) {
    const out: Record<string, object> = {};
    for (const [key, value] of Object.entries(properties)) {
      // defineProperty: an own `__proto__` property name from JSON.parse must stay a name.
      Object.defineProperty(out, key, {
        value: stubProperty(value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    stub.properties = out;
  }
  if (Array.isArray(schema?.required)) stub.required = schema.required.filter((r) => typeof r === 'string');
  return stub;
}

function stubProperty(schema: unknown): object {
  // Boolean subschemas: `true` accepts anything, `false` nothing (`not: {}` says the same).
  if (schema === false) return { not: {} };
  if (schema === null || typeof schema !== 'object') return {};
  const type = (schema as { type?: unknown }).type;
  if (typeof type === 'string' && SCALAR_TYPES.has(type)) return { type };
  if (
    Array.isArray(type) &&
    type.length > 0 &&
    type.every((t) => typeof t === 'string' && SCALAR_TYPES.has(t))
  ) {
    return { type: [...type] };
  }
  // No plain type (anyOf, $ref, enum only…): say nothing rather than something wrong.
  return {};
}

function shorten(name: string, tool: Tool, inputSchema: Tool['inputSchema']): Tool {
  const { outputSchema: _outputSchema, ...rest } = tool;
  return { ...rest, description: deferredDescription(name, tool.description), inputSchema };
}

function deferredDescription(name: string, description: string | undefined): string {
  return description ? `${description} ${pointer(name)}` : pointer(name);
}

function chars(name: string, description: string | undefined, input: unknown, output?: unknown): number {
  return json(name) + json(description ?? '') + json(input) + json(output);
}

/** JSON length in characters; absent values cost nothing. */
function json(value: unknown): number {
  return value === undefined ? 0 : (JSON.stringify(value)?.length ?? 0);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
