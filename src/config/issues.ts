/**
 * The translation of zod's findings into issues that read well: `expected a string, got number`
 * plus a `fix` sentence. Only enum-like values that did not come from `${VAR}` are ever shown.
 */
import type * as z from 'zod/v4-mini';
import type { FieldTable } from './field-text.js';
import { formatPath, type PathSegment } from './paths.js';
import type { ConfigIssue } from './types.js';

function fieldKey(table: FieldTable, rel: readonly PathSegment[]): string {
  let key = String(rel[0] ?? '');
  for (const segment of rel.slice(1)) {
    if (typeof segment === 'number') key += '[]';
    else if (table[`${key}.${segment}`]) key += `.${segment}`;
    else key += '.*';
  }
  return key;
}

/** What a value is, for `got ...`; never the content of a string. */
export function describeKind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'boolean') return String(value);
  return typeof value;
}

type ZodIssue = z.core.$ZodIssue & { input?: unknown };

export interface TranslateContext {
  table: FieldTable;
  /** Path of the object that was validated, e.g. ['mcpServers', 'github']. */
  base: readonly PathSegment[];
  /** Formatted paths whose string values came (at least partly) from `${VAR}`. */
  tainted: ReadonlySet<string>;
}

/** Runs a schema and turns its findings into issues, at most one per path. */
export function validateShape(schema: z.ZodMiniType, value: unknown, ctx: TranslateContext): ConfigIssue[] {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return [];
  // zod may report two findings for one value (e.g. the safe-integer bound and our own bound);
  // keep the last, which is the most specific.
  const byPath = new Map<string, ConfigIssue>();
  for (const issue of result.error.issues as ZodIssue[]) {
    const path = [...ctx.base, ...(issue.path as PathSegment[])];
    const translated = translateIssue(issue, path, ctx);
    byPath.set(translated.path, translated);
  }
  return [...byPath.values()];
}

function translateIssue(issue: ZodIssue, path: PathSegment[], ctx: TranslateContext): ConfigIssue {
  const rel = path.slice(ctx.base.length);
  const text = ctx.table[fieldKey(ctx.table, rel)];
  const formatted = formatPath(path);
  const expected = text?.expected ?? 'a valid value';
  const fix = text?.fix;
  const input = issue.input;
  let message: string;
  switch (issue.code) {
    case 'invalid_type':
      if (issue.expected === 'int' && typeof input === 'number') {
        message = `expected an integer, got ${input}`;
      } else {
        message = `expected ${expected}, got ${describeKind(input)}`;
      }
      break;
    case 'too_small':
      if (issue.origin === 'string' && Number(issue.minimum) > 1) {
        // A long minimum is for secrets: say how long, never what was given.
        message = `must be at least ${String(issue.minimum)} characters long`;
      } else if (issue.origin === 'string' || issue.origin === 'array') message = 'must not be empty';
      else message = `must be at least ${String(issue.minimum)}, got ${String(input)}`;
      break;
    case 'too_big':
      message = `must be at most ${String(issue.maximum)}, got ${String(input)}`;
      break;
    case 'invalid_value':
      message = `expected ${expected}, got ${showValue(input, ctx.tainted.has(formatted))}`;
      break;
    case 'invalid_union':
      // Numbers never come from ${VAR}, so showing one leaks nothing.
      message =
        typeof input === 'number'
          ? `expected ${expected}, got ${input}`
          : `expected ${expected}, got ${showValue(input, ctx.tainted.has(formatted))}`;
      break;
    default:
      message = `expected ${expected}, got ${describeKind(input)}`;
  }
  return fix ? { path: formatted, message, fix } : { path: formatted, message };
}

/** Shows a short enum-like value, unless it came from an environment variable. */
export function showValue(value: unknown, tainted: boolean): string {
  if (typeof value !== 'string') return describeKind(value);
  if (tainted) return 'a value taken from an environment variable';
  if (value.length > 40 || [...value].some((c) => c < ' ' || c === '\x7f')) return 'another string';
  return JSON.stringify(value);
}
