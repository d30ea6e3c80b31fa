/**
 * What the readers share while they walk a config: the errors and warnings found so far, and the
 * interpolator that substitutes `${VAR}` and remembers which paths it touched.
 */
import type * as z from 'zod/v4-mini';
import { isObject, type JsonObject } from '../lib/json.js';
import type { FieldTable } from './field-text.js';
import type { Interpolator } from './interpolate.js';
import { describeKind, validateShape } from './issues.js';
import { keysOf } from './json-parse.js';
import { formatPath, type PathSegment } from './paths.js';
import type { ConfigIssue } from './types.js';
import { unknownKeyWarning } from './unknown-keys.js';

export interface Findings {
  errors: ConfigIssue[];
  warnings: ConfigIssue[];
  interpolator: Interpolator;
}

export function error(f: Findings, path: readonly PathSegment[], message: string, fix: string): void {
  f.errors.push({ path: formatPath(path), message, fix });
}

/** Interpolates a string, or the strings directly inside an array or object. */
export function interpolateField(f: Findings, value: unknown, path: readonly PathSegment[]): unknown {
  const one = (v: unknown, p: PathSegment[]) =>
    typeof v === 'string' ? f.interpolator.string(v, formatPath(p)) : v;
  if (typeof value === 'string') return one(value, [...path]);
  if (Array.isArray(value)) return value.map((v, i) => one(v, [...path, i]));
  // fromEntries defines own properties, so a "__proto__" key cannot touch the prototype.
  if (isObject(value)) return Object.fromEntries(keysOf(value).map((k) => [k, one(value[k], [...path, k])]));
  return value;
}

/** True when some issue sits at `path` or below it. */
export function hasIssueUnder(issues: readonly ConfigIssue[], path: readonly PathSegment[]): boolean {
  const p = formatPath(path);
  return issues.some((i) => i.path === p || i.path.startsWith(`${p}.`) || i.path.startsWith(`${p}[`));
}

export function isTainted(f: Findings, path: readonly PathSegment[]): boolean {
  return f.interpolator.tainted.has(formatPath(path));
}

/** Picks the known keys of a nested object (`gateway.drift`, a server's `tools`), warning about the rest. */
export function readNested(
  f: Findings,
  raw: unknown,
  base: PathSegment[],
  known: readonly string[],
): unknown {
  if (!isObject(raw)) return raw;
  const picked: JsonObject = {};
  for (const key of keysOf(raw)) {
    if (known.includes(key)) picked[key] = interpolateField(f, raw[key], [...base, key]);
    else f.warnings.push(unknownKeyWarning([...base, key], known));
  }
  return picked;
}

/**
 * An object section (`gateway.store`, `gateway.tracing`): its known keys read one by one, then
 * checked against its shape. Returns the keys as written, or undefined when anything was wrong
 * (every problem recorded with its path).
 */
export function readSection(
  f: Findings,
  raw: unknown,
  base: PathSegment[],
  section: {
    keys: readonly string[];
    schema: z.ZodMiniType;
    table: FieldTable;
    shape: { expected: string; fix: string };
  },
): JsonObject | undefined {
  if (!isObject(raw)) {
    error(f, base, `expected ${section.shape.expected}, got ${describeKind(raw)}`, section.shape.fix);
    return undefined;
  }
  const picked = readNested(f, raw, base, section.keys) as JsonObject;
  const issues = validateShape(section.schema, picked, {
    table: section.table,
    base,
    tainted: f.interpolator.tainted,
  });
  f.errors.push(...issues);
  return issues.length > 0 ? undefined : picked;
}
