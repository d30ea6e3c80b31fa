/**
 * TypeScript declarations of tools for code mode (#50): a model reads `tools.name(args): Promise<…>`
 * signatures generated from each tool's input and output schemas, and writes a program against them.
 * The schemas are upstream text: every declaration is bounded (depth, members, characters), a
 * name that is not an identifier is quoted, and descriptions are cut to one line that cannot close
 * a comment. A schema the generator cannot say precisely becomes `unknown`, never a wrong type;
 * `manifold__describe_tool` returns the full schema when the model needs it.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';

/** Nesting deeper than this is declared `unknown`. */
const MAX_DEPTH = 6;
/** Properties, union members or enum values kept per level. */
const MAX_MEMBERS = 64;
/** One tool's declaration, at most; past it the arguments are declared loosely. */
export const MAX_DECLARATION_CHARS = 6000;
/** A description's first line, at most. */
const MAX_DOC_CHARS = 300;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** What a call returns when the tool declares no output schema. */
export const TOOL_RESULT_TYPE =
  'type ToolResult = { content: Array<{ type: string; text?: string; [key: string]: unknown }>; structuredContent?: unknown };';

/** A property or method name as TypeScript reads it: bare when an identifier, else quoted. */
export function memberName(name: string): string {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

/** One line of a description, safe inside a `/** … *\/` comment. */
function docLine(text: unknown): string {
  if (typeof text !== 'string') return '';
  const line = text
    .replace(/\*\//g, '* /')
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this removes
    .replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, ' ')
    .trim();
  return line.length > MAX_DOC_CHARS ? `${line.slice(0, MAX_DOC_CHARS)}…` : line;
}

function literal(value: unknown): string | undefined {
  if (value === null) return 'null';
  if (typeof value === 'string' || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

function union(parts: string[]): string {
  const unique = [...new Set(parts)];
  if (unique.length === 0) return 'never';
  if (unique.includes('unknown')) return 'unknown';
  return unique.length === 1 ? unique[0]! : unique.map((p) => (p.includes('=>') ? `(${p})` : p)).join(' | ');
}

/** The TypeScript type of one JSON Schema, bounded by depth and member count. */
export function typeOf(schema: unknown, depth = 0): string {
  if (schema === true || schema === undefined) return 'unknown';
  if (schema === false) return 'never';
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return 'unknown';
  if (depth > MAX_DEPTH) return 'unknown';
  const s = schema as Record<string, unknown>;
  if ('const' in s) return literal(s.const) ?? 'unknown';
  if (Array.isArray(s.enum)) {
    const values = s.enum.slice(0, MAX_MEMBERS).map(literal);
    if (values.some((v) => v === undefined) || s.enum.length > MAX_MEMBERS) return typeOfType(s, depth);
    return union(values as string[]);
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = s[key];
    if (Array.isArray(options) && options.length > 0) {
      if (options.length > MAX_MEMBERS) return 'unknown';
      return union(options.map((o) => typeOf(o, depth + 1)));
    }
  }
  if (Array.isArray(s.allOf) && s.allOf.length > 0 && s.allOf.length <= MAX_MEMBERS) {
    const parts = s.allOf.map((o) => typeOf(o, depth + 1)).filter((p) => p !== 'unknown');
    return parts.length === 0 ? 'unknown' : parts.join(' & ');
  }
  return typeOfType(s, depth);
}

function typeOfType(s: Record<string, unknown>, depth: number): string {
  const type = s.type;
  if (Array.isArray(type)) {
    if (type.length === 0 || type.length > 8) return 'unknown';
    return union(type.map((t) => typeOfType({ ...s, type: t }, depth)));
  }
  switch (type) {
    case 'string':
      return 'string';
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array': {
      const items = s.items;
      if (Array.isArray(items)) return 'unknown[]';
      const inner = typeOf(items, depth + 1);
      return /^[A-Za-z0-9_.]+$/.test(inner) ? `${inner}[]` : `Array<${inner}>`;
    }
    case 'object':
      return objectType(s, depth);
    default:
      // No type: an object when it names properties, else anything.
      return s.properties !== undefined ? objectType(s, depth) : 'unknown';
  }
}

function objectType(s: Record<string, unknown>, depth: number): string {
  const props = s.properties;
  const required = new Set(Array.isArray(s.required) ? s.required.filter((r) => typeof r === 'string') : []);
  const members: string[] = [];
  if (typeof props === 'object' && props !== null && !Array.isArray(props)) {
    const keys = Object.keys(props);
    for (const key of keys.slice(0, MAX_MEMBERS)) {
      const value = (props as Record<string, unknown>)[key];
      const doc = docLine((value as { description?: unknown } | null)?.description);
      const optional = required.has(key) ? '' : '?';
      members.push(
        `${doc ? `/** ${doc} */ ` : ''}${memberName(key)}${optional}: ${typeOf(value, depth + 1)};`,
      );
    }
    if (keys.length > MAX_MEMBERS) members.push('[key: string]: unknown;');
  }
  const extra = s.additionalProperties;
  if (typeof extra === 'object' && extra !== null) {
    members.push(`[key: string]: ${typeOf(extra, depth + 1)};`);
  } else if (members.length === 0 && extra !== false) {
    return 'Record<string, unknown>';
  }
  return `{ ${members.join(' ')} }`;
}

/**
 * The declaration of one tool as a member of `tools`, bounded by `MAX_DECLARATION_CHARS`: the
 * arguments from its input schema, the answer from its output schema (`ToolResult` without one).
 *
 * @example
 * toolDeclaration({ name: 'memory__read_graph', description: 'Read the graph', inputSchema: { type: 'object' } });
 * // '/** Read the graph *\/\nmemory__read_graph(args?: Record<string, unknown>): Promise<ToolResult>;'
 */
export function toolDeclaration(
  tool: Pick<Tool, 'name' | 'description' | 'inputSchema' | 'outputSchema'>,
): string {
  const doc = docLine(tool.description);
  const input = typeOf(tool.inputSchema);
  const required = Array.isArray(tool.inputSchema?.required) && tool.inputSchema.required.length > 0;
  const output = tool.outputSchema ? typeOf(tool.outputSchema) : 'ToolResult';
  const head = doc ? `/** ${doc} */\n` : '';
  const full = `${head}${memberName(tool.name)}(args${required ? '' : '?'}: ${input}): Promise<${output}>;`;
  if (full.length <= MAX_DECLARATION_CHARS) return full;
  const loose = `${head}${memberName(tool.name)}(args${required ? '' : '?'}: Record<string, unknown>): Promise<${tool.outputSchema ? 'unknown' : 'ToolResult'}>; // full schema: manifold__describe_tool`;
  return loose.length <= MAX_DECLARATION_CHARS
    ? loose
    : `${memberName(tool.name)}(args?: Record<string, unknown>): Promise<unknown>;`;
}

/** The declarations of a set of tools, as the `tools` global a program sees. */
export function toolsDeclaration(
  tools: readonly Pick<Tool, 'name' | 'description' | 'inputSchema' | 'outputSchema'>[],
): string {
  const members = tools.map((t) => toolDeclaration(t).replace(/^/gm, '  '));
  return `${TOOL_RESULT_TYPE}\ndeclare const tools: {\n${members.join('\n')}\n};`;
}
