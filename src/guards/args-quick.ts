/**
 * A quick yes for the argument schemas most tools have: an object of named primitive properties,
 * some required, maybe closed with `additionalProperties: false`. For such a schema, arguments
 * that pass this check pass the full validator too, so the full validator (most of a call's
 * argument check) runs only when the answer might be no. Anything outside that shape,
 * any constraint on a property (a pattern, a length, an enum, a format), or any keyword not
 * known to be an annotation, compiles to undefined: no quick path at all.
 *
 * Never a quick no: a false here only means "ask the full validator", which also writes the
 * problem lines.
 */

import { isObject } from '../lib/json.js';

/** Keywords that never change whether a value is valid. `x-` extensions are annotations too. */
const ANNOTATIONS = new Set([
  '$schema',
  '$id',
  '$comment',
  'title',
  'description',
  'default',
  'examples',
  'deprecated',
  'readOnly',
  'writeOnly',
]);

const isAnnotation = (key: string) => ANNOTATIONS.has(key) || key.startsWith('x-');

type Check = (value: unknown) => boolean;

const PRIMITIVES: Record<string, Check> = {
  string: (v) => typeof v === 'string',
  number: (v) => typeof v === 'number',
  integer: (v) => typeof v === 'number' && Number.isInteger(v),
  boolean: (v) => typeof v === 'boolean',
  null: (v) => v === null,
};
const ANY: Check = () => true;

/** A property's check: one primitive type, or any value; undefined for anything else. */
function propertyCheck(schema: unknown): Check | undefined {
  if (schema === true) return ANY;
  if (!isObject(schema)) return undefined;
  let check: Check = ANY;
  for (const key of Object.keys(schema)) {
    if (key === 'type') {
      const t = schema.type;
      const primitive = typeof t === 'string' && Object.hasOwn(PRIMITIVES, t) ? PRIMITIVES[t] : undefined;
      if (!primitive) return undefined;
      check = primitive;
    } else if (!isAnnotation(key)) {
      return undefined;
    }
  }
  return check;
}

/**
 * The quick check for `schema`, or undefined when the schema is not of the simple shape.
 *
 * @example quickAccept({ type: 'object', properties: { q: { type: 'string' } }, required: ['q'] })?.({ q: 'x' }) // true
 */
export function quickAccept(schema: unknown): ((args: unknown) => boolean) | undefined {
  if (!isObject(schema) || schema.type !== 'object') return undefined;
  let closed = false;
  let required: string[] = [];
  const checks: [string, Check][] = [];
  for (const key of Object.keys(schema)) {
    const value = schema[key];
    if (key === 'type') continue;
    if (key === 'properties') {
      if (!isObject(value)) return undefined;
      for (const name of Object.keys(value)) {
        const check = propertyCheck(value[name]);
        if (!check) return undefined;
        checks.push([name, check]);
      }
    } else if (key === 'required') {
      if (!Array.isArray(value) || !value.every((r) => typeof r === 'string')) return undefined;
      required = value as string[];
    } else if (key === 'additionalProperties') {
      if (typeof value !== 'boolean') return undefined;
      closed = !value;
    } else if (!isAnnotation(key)) {
      return undefined;
    }
  }
  const known = new Set(checks.map(([name]) => name));
  return (args) => {
    if (!isObject(args)) return false;
    for (const name of required) if (!Object.hasOwn(args, name)) return false;
    for (const [name, check] of checks) if (Object.hasOwn(args, name) && !check(args[name])) return false;
    if (closed) for (const key of Object.keys(args)) if (!known.has(key)) return false;
    return true;
  };
}
