import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { paramHeaderPlan } from '../protocol/headers.js';
import { icons, small } from './item-bounds.js';
import { clipText, hasUnsafe, stripStrings, stripUnsafe, TOO_DEEP, utf8Bytes } from './text.js';

export interface ToolBoundsOptions {
  /** Longer descriptions are clipped, marker included. */
  maxDescriptionBytes: number;
  /** A tool whose inputSchema or outputSchema serializes larger than this is withheld. */
  maxSchemaBytes: number;
}

/** What `toolBounds` changed or refused, as data for the caller to log. */
export type ToolFinding =
  | { rule: 'description-clipped'; tool: string; bytes: number }
  | { rule: 'title-clipped'; tool: string; field: 'title' | 'annotations.title'; bytes: number }
  | {
      rule: 'schema-too-large';
      tool: string;
      which: 'inputSchema' | 'outputSchema';
      /** Serialized UTF-8 size; -1 when the schema nests too deeply to serialize at all. */
      bytes: number;
      /** Set when the schema nests deeper than this many levels, whatever its size. */
      depth?: number;
    }
  | { rule: 'unsafe-text-stripped'; tool: string; field: string }
  | { rule: 'invalid-x-mcp-header'; tool: string; reason: string };

export interface BoundedTool {
  /** `null` when the tool is withheld. */
  tool: Tool | null;
  findings: ToolFinding[];
}

/**
 * Deep enough for any hand-written or generated schema (each property level is two JSON levels),
 * shallow enough that walking it, and `JSON.stringify` later on, cannot exhaust the stack.
 */
export const MAX_SCHEMA_DEPTH = 64;
/** Titles are display names; nothing legitimate needs more. */
export const MAX_TITLE_BYTES = 256;
/** Findings name the tool; a hostile name must not make the log line unbounded. */
const MAX_LABEL_BYTES = 128;

/**
 * Builds the bound applied to every upstream tool definition before it enters the catalog
 * (SECURITY C6, E4). Upstream text is untrusted: terminal escapes, controls, bidirectional and
 * zero-width characters are stripped from the description, titles and every `description` /
 * `title` inside the schemas; the description is clipped with a visible marker. A schema over
 * `maxSchemaBytes` (or nested deeper than `MAX_SCHEMA_DEPTH`) withholds the whole tool: half a
 * schema is not a schema, and a model calling a tool from a truncated one would guess wrong.
 *
 * The name is left alone (the catalog rewrites unsafe names deterministically) but reported.
 * The input is never mutated; an untouched tool comes back as the same object.
 *
 * @example
 * const bound = toolBounds({ maxDescriptionBytes: 4096, maxSchemaBytes: 20_480 });
 * const { tool, findings } = bound(upstreamTool);
 * if (tool === null) {
 *   // withheld: findings holds a 'schema-too-large' entry naming the schema and its size
 * }
 */
export function toolBounds(options: ToolBoundsOptions): (tool: Tool) => BoundedTool {
  const maxDescriptionBytes = positiveInteger(options?.maxDescriptionBytes, 'maxDescriptionBytes');
  const maxSchemaBytes = positiveInteger(options?.maxSchemaBytes, 'maxSchemaBytes');

  return function boundTool(tool: Tool): BoundedTool {
    const label = labelFor(tool.name);
    const findings: ToolFinding[] = [];
    if (hasUnsafe(tool.name)) findings.push({ rule: 'unsafe-text-stripped', tool: label, field: 'name' });

    // Schemas first: a withheld tool needs no further work, and both sizes are reported.
    const schemas: Partial<Pick<Tool, 'inputSchema' | 'outputSchema'>> = {};
    let withheld = false;
    for (const which of ['inputSchema', 'outputSchema'] as const) {
      const schema = tool[which];
      if (schema === undefined) continue;
      // Every string, at any depth: enum and const values, defaults and property names too (#13.9).
      const walked = stripStrings(schema, MAX_SCHEMA_DEPTH);
      if (walked === TOO_DEEP) {
        findings.push({
          rule: 'schema-too-large',
          tool: label,
          which,
          bytes: serializedBytes(schema),
          depth: MAX_SCHEMA_DEPTH,
        });
        withheld = true;
        continue;
      }
      const bytes = serializedBytes(walked);
      if (bytes > maxSchemaBytes) {
        findings.push({ rule: 'schema-too-large', tool: label, which, bytes });
        withheld = true;
      } else if (walked !== schema) {
        findings.push({ rule: 'unsafe-text-stripped', tool: label, field: which });
        schemas[which] = walked as Tool['inputSchema'];
      }
    }
    if (withheld) return { tool: null, findings };
    // A tool whose x-mcp-header annotations break the rules is left out, as a streamable-HTTP
    // client must (spec 2026-07-28: streamable-http, "Schema Extension"): the gateway re-exposes
    // tools over HTTP, so it applies the rule whatever transport the upstream uses.
    const headers = paramHeaderPlan(tool.inputSchema);
    if (!headers.ok) {
      findings.push({ rule: 'invalid-x-mcp-header', tool: label, reason: headers.reason.slice(0, 200) });
      return { tool: null, findings };
    }

    // Only the fields the protocol defines (schema: Tool), each bounded: an unknown field, or a
    // `_meta`, `annotations` or `execution` over 2 KiB, is not relayed (#13.10).
    const out: Record<string, unknown> = { name: tool.name };
    const description = boundText(tool.description, maxDescriptionBytes, 'description', label, findings);
    if (description !== undefined) out.description = description;
    const title = boundText(tool.title, MAX_TITLE_BYTES, 'title', label, findings);
    if (title !== undefined) out.title = title;
    out.inputSchema = schemas.inputSchema ?? tool.inputSchema;
    const outputSchema = schemas.outputSchema ?? tool.outputSchema;
    if (outputSchema !== undefined) out.outputSchema = outputSchema;
    if (tool.annotations !== undefined) {
      const annotated = tool.annotations?.title;
      const annotationTitle = boundText(annotated, MAX_TITLE_BYTES, 'annotations.title', label, findings);
      const annotations = small(
        annotationTitle !== annotated ? { ...tool.annotations, title: annotationTitle } : tool.annotations,
      );
      if (annotations) out.annotations = annotations;
    }
    const extras = tool as Record<string, unknown>;
    const shown = icons(extras.icons);
    if (shown) out.icons = shown;
    for (const key of ['execution', '_meta'] as const) {
      const v = small(extras[key]);
      if (v) out[key] = v;
    }
    return { tool: unchanged(tool, out) ? tool : (out as Tool), findings };
  };
}

/** Strips, then clips; pushes a finding for each. Non-strings pass through untouched. */
function boundText<T>(
  text: T,
  maxBytes: number,
  field: 'description' | 'title' | 'annotations.title',
  tool: string,
  findings: ToolFinding[],
): T | string {
  if (typeof text !== 'string') return text;
  const safe = stripUnsafe(text);
  if (safe !== text) findings.push({ rule: 'unsafe-text-stripped', tool, field });
  const clipped = clipText(safe, maxBytes);
  if (clipped.clipped) {
    findings.push(
      field === 'description'
        ? { rule: 'description-clipped', tool, bytes: clipped.bytes }
        : { rule: 'title-clipped', tool, field, bytes: clipped.bytes },
    );
  }
  return clipped.text;
}

/** The same object back when bounding changed nothing, so an untouched tool stays itself. */
function unchanged(tool: Tool, out: Record<string, unknown>): boolean {
  const given = tool as Record<string, unknown>;
  const keys = Object.keys(given).filter((k) => given[k] !== undefined);
  return keys.length === Object.keys(out).length && keys.every((k) => out[k] === given[k]);
}

function serializedBytes(value: unknown): number {
  try {
    return utf8Bytes(JSON.stringify(value) ?? '');
  } catch {
    // Nesting deep enough to overflow the stack: the depth finding says why it was withheld.
    return -1;
  }
}

function labelFor(name: string): string {
  if (!hasUnsafe(name) && utf8Bytes(name) <= MAX_LABEL_BYTES) return name;
  return clipText(stripUnsafe(name), MAX_LABEL_BYTES).text;
}

function positiveInteger(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(`toolBounds: options.${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}
