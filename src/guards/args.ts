import {
  dereference,
  type OutputUnit,
  type Schema,
  type SchemaDraft,
  Validator,
} from '@cfworker/json-schema';
import { isObject } from '../lib/json.js';
import { paramHeaderPlan } from '../protocol/headers.js';
import { quickAccept } from './args-quick.js';
import { stripUnsafe } from './text.js';

/**
 * The outcome of checking one call's arguments. `skipped` (with `valid: true`) says the validator
 * failed on these arguments in a way the compile-time probe did not foresee: the call goes
 * ahead, since the upstream validates its own input, and the caller should log the reason.
 */
export type ArgsCheck = { valid: true; skipped?: string } | { valid: false; problems: string[] };

export type ArgsValidator =
  | { ok: true; validate: (args: unknown) => ArgsCheck }
  | { ok: false; reason: string };

/** At most this many problem lines; a model needs the first few, not a wall of text. */
export const MAX_PROBLEMS = 20;
/** One problem line stays readable even when it quotes a hostile key or a long enum. */
const MAX_LINE = 300;

/**
 * `$schema` URIs we can honour (MCP 2025-11-25, basic/index "JSON Schema Usage": no `$schema`
 * means 2020-12; an unsupported dialect must be handled gracefully, here by not validating).
 * Draft 6 is validated as draft 7, which only adds keywords a draft-6 schema does not use.
 */
const DIALECT = /^https?:\/\/json-schema\.org\/(?:draft\/(2020-12|2019-09)|draft-0([4-7]))\/schema#?$/;

/** Wrapper errors: each is always followed by the errors of the subschema it points into. */
const WRAPPERS = new Set([
  '$ref',
  '$recursiveRef',
  'allOf',
  'properties',
  'patternProperties',
  'additionalProperties',
  'unevaluatedProperties',
  'items',
  'prefixItems',
  'additionalItems',
  'unevaluatedItems',
  'dependentSchemas',
]);

/**
 * Compiles an input schema into an argument check, once per schema (the caller caches it per
 * catalog version). Uses @cfworker/json-schema because it never calls `eval` or `new Function`,
 * which Workers forbid. All problems are listed, not just the first, so a model can fix a call in
 * one retry. A schema the validator cannot handle (an unsupported dialect, a `$ref` it cannot
 * resolve, a pattern that is not a valid regex, anything that throws on a probe) gives
 * `ok: false` with a reason: the caller skips validation and logs it, and never blocks the tool.
 *
 * @example
 * const compiled = compileArgsValidator(tool.inputSchema);
 * if (compiled.ok) {
 *   const check = compiled.validate({ query: 42 });
 *   // { valid: false, problems: ['/query: expected type string, got number'] }
 * }
 */
export function compileArgsValidator(schema: unknown): ArgsValidator {
  return compileValidator(schema, ARGUMENTS, headerNullsAsAbsent);
}

/**
 * A null given for an argument mirrored into a header (`x-mcp-header`) means "no value". Spec
 * 2026-07-28, basic/transports/streamable-http, "Server Behavior for Custom Headers": when the
 * parameter value is null the client MUST omit the `Mcp-Param-*` header and the server MUST NOT
 * expect it, exactly as when the parameter is not in the arguments; and such a property must be
 * of one primitive type ("Schema Extension"), so its schema can never list null itself. The
 * argument check therefore reads that null as an absent property: an optional one passes, a
 * required one is missing. Only for these properties: anywhere else the schema decides about
 * null. The arguments are relayed as given, null included (never rewritten: the approval digest
 * and the audit line cover what the client sent), and the upstream gets no header for it
 * (protocol/headers.ts `paramValue`).
 *
 * Returns the step that gives the arguments to check, or undefined when the schema mirrors none.
 */
function headerNullsAsAbsent(schema: Schema | boolean): ((args: unknown) => unknown) | undefined {
  const plan = paramHeaderPlan(schema);
  if (!plan.ok || plan.params.length === 0) return undefined;
  const paths = plan.params.map((p) => p.path);
  return (args) => {
    let out = args;
    for (const path of paths) out = withoutNullAt(out, path, 0);
    return out;
  };
}

/** `node` without the null at `path` (a copy along the path), or `node` itself when none is there. */
function withoutNullAt(node: unknown, path: readonly string[], i: number): unknown {
  const key = path[i];
  if (key === undefined || !isObject(node) || !Object.hasOwn(node, key)) return node;
  const value = node[key];
  if (i === path.length - 1) {
    if (value !== null) return node;
    // Object.entries and fromEntries define own properties only, so a "__proto__" key stays data.
    return Object.fromEntries(Object.entries(node).filter(([k]) => k !== key));
  }
  const inner = withoutNullAt(value, path, i + 1);
  return inner === value ? node : Object.fromEntries([...Object.entries(node), [key, inner]]);
}

/**
 * The same check for a tool's `structuredContent` against its output schema: compiled, bounded
 * and eval-free exactly as for arguments, with problem lines worded for a result.
 *
 * @example
 * const compiled = compileOutputValidator(tool.outputSchema);
 * if (compiled.ok) {
 *   const check = compiled.validate({ count: 'three' });
 *   // { valid: false, problems: ['/count: expected type number, got string'] }
 * }
 */
export function compileOutputValidator(schema: unknown): ArgsValidator {
  return compileValidator(schema, OUTPUT);
}

const VALID: ArgsCheck = Object.freeze({ valid: true });

/** What a check is about, for the few lines that name it. */
interface Subject {
  /** "the validator failed on <these>". */
  these: string;
  /** The line for a failure the validator reported only through wrapper errors. */
  mismatch: string;
}

const ARGUMENTS: Subject = { these: 'these arguments', mismatch: 'arguments do not match the input schema' };
const OUTPUT: Subject = {
  these: 'this structured content',
  mismatch: 'structured content does not match the output schema',
};

/**
 * `prepareFor`, given the schema (a JSON copy), returns what to do to a value before it is checked,
 * if anything.
 */
function compileValidator(
  schema: unknown,
  subject: Subject,
  prepareFor?: (schema: Schema | boolean) => ((value: unknown) => unknown) | undefined,
): ArgsValidator {
  let copy: Schema | boolean;
  try {
    // The validator writes bookkeeping properties into the schema; the catalog's stays untouched.
    copy = JSON.parse(JSON.stringify(schema)) as Schema | boolean;
  } catch (e) {
    return { ok: false, reason: `schema is not JSON: ${message(e)}` };
  }
  if (typeof copy !== 'boolean' && (copy === null || typeof copy !== 'object' || Array.isArray(copy))) {
    return { ok: false, reason: 'schema is not an object' };
  }
  // Before the validator writes its bookkeeping into the copy.
  const prepare = prepareFor?.(copy);
  const draft = dialect(copy);
  if (typeof draft === 'object') return { ok: false, reason: draft.unsupported };

  let validator: Validator;
  try {
    validator = new Validator(copy, draft, false);
    const problem = unresolvable(copy) ?? badPattern(copy);
    if (problem) return { ok: false, reason: problem };
    validator.validate({});
  } catch (e) {
    return { ok: false, reason: `the validator cannot handle this schema: ${message(e)}` };
  }

  // Most schemas are a flat object of primitives: arguments that pass the quick check pass the
  // validator too, which then runs only when the answer may be no (args-quick.ts).
  const quick = quickAccept(schema);
  return {
    ok: true,
    validate(given: unknown): ArgsCheck {
      const args = prepare ? prepare(given) : given;
      if (quick?.(args)) return VALID;
      let result: ReturnType<Validator['validate']>;
      try {
        result = validator.validate(args);
      } catch (e) {
        return { valid: true, skipped: `the validator failed on ${subject.these}: ${message(e)}` };
      }
      return result.valid ? VALID : { valid: false, problems: problems(result.errors, args, subject) };
    },
  };
}

function dialect(schema: Schema | boolean): SchemaDraft | { unsupported: string } {
  const declared = typeof schema === 'object' ? schema.$schema : undefined;
  if (declared === undefined) return '2020-12';
  const m = typeof declared === 'string' ? DIALECT.exec(declared) : null;
  if (!m) return { unsupported: `unsupported JSON Schema dialect ${clip(String(declared), 100)}` };
  if (m[1] === '2020-12' || m[1] === '2019-09') return m[1];
  return m[2] === '4' ? '4' : '7';
}

/**
 * The validator only notices an unknown `$ref` when a value reaches it, by throwing. Looking
 * every `$ref` up now turns that into a compile-time "cannot handle" instead of a surprise later.
 * `dereference` (the same resolution the Validator does) stamps every node it treats as a schema
 * with `__absolute_uri__`, and each ref with its resolved `__absolute_ref__`; a `$ref` inside
 * data (`const`, `enum`, `default`) is not a schema and is left alone.
 */
function unresolvable(schema: Schema | boolean): string | undefined {
  const lookup = dereference(schema);
  let missing: string | undefined;
  visit(schema, (node) => {
    if (missing !== undefined || node.__absolute_uri__ === undefined || typeof node.$ref !== 'string') return;
    if (lookup[node.__absolute_ref__ ?? node.$ref] === undefined) missing = node.$ref;
  });
  return missing === undefined ? undefined : `$ref ${clip(missing, 100)} cannot be resolved`;
}

/** Patterns are compiled (with the `u` flag) only when a string reaches them; compile them now. */
function badPattern(schema: Schema | boolean): string | undefined {
  let bad: string | undefined;
  visit(schema, (node) => {
    const patterns = [
      ...(typeof node.pattern === 'string' ? [node.pattern] : []),
      ...(isObject(node.patternProperties) ? Object.keys(node.patternProperties) : []),
    ];
    for (const p of patterns) {
      try {
        new RegExp(p, 'u');
      } catch {
        bad ??= `pattern ${clip(p, 100)} is not a valid regular expression`;
      }
    }
  });
  return bad;
}

/** Every object in the schema, subschema or not: cheap, and nothing can hide from it. */
function visit(node: unknown, fn: (node: Schema) => void, depth = 0): void {
  // The catalog bounds schema depth already; this guard only keeps recursion finite.
  if (depth > 256 || node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const item of node) visit(item, fn, depth + 1);
    return;
  }
  fn(node as Schema);
  for (const value of Object.values(node)) visit(value, fn, depth + 1);
}

/** Readable, deduplicated lines: `/query: expected type string, got number`. */
function problems(errors: readonly OutputUnit[], args: unknown, subject: Subject): string[] {
  const lines = new Set<string>();
  let previous: OutputUnit | undefined;
  for (const e of errors) {
    // A `false` subschema reports its own location as its keyword location, so what it came
    // from is told by the wrapper error just before it.
    const unlisted =
      e.keyword === 'false' && /^(?:additional|unevaluated)Properties$/.test(previous?.keyword ?? '');
    previous = e;
    if (WRAPPERS.has(e.keyword)) continue;
    lines.add(clip(unlisted ? `${location(e)}: property is not allowed` : describe(e, args), MAX_LINE));
  }
  // Only wrappers (cannot happen with this validator, but never return an empty list).
  if (lines.size === 0) lines.add(`(root): ${subject.mismatch}`);
  const all = [...lines];
  if (all.length <= MAX_PROBLEMS) return all;
  return [...all.slice(0, MAX_PROBLEMS - 1), `… and ${all.length - MAX_PROBLEMS + 1} more problems`];
}

function location(e: OutputUnit): string {
  return pointer(e.instanceLocation) || '(root)';
}

function describe(e: OutputUnit, args: unknown): string {
  const at = pointer(e.instanceLocation);
  const where = location(e);
  switch (e.keyword) {
    case 'type': {
      // The error text carries the expected types; the actual type comes from the value itself.
      const expected = /Expected "(.*)"\.$/.exec(e.error)?.[1]?.split('", "').join(' or ');
      const got = typeName(valueAt(args, at));
      return expected ? `${where}: expected type ${expected}, got ${got}` : `${where}: ${e.error}`;
    }
    case 'required': {
      const key = /required property "(.*)"\.$/.exec(e.error)?.[1];
      return key === undefined
        ? `${where}: ${e.error}`
        : `${at}/${escapePointer(key)}: required property is missing`;
    }
    case 'false':
      return `${where}: no value is allowed here`;
    default:
      return `${where}: ${e.error.replace(/\.$/, '')}`;
  }
}

/** cfworker reports locations as `#/a/b`, percent-encoded; shown as a plain JSON pointer. */
function pointer(location: string): string {
  const raw = location.startsWith('#') ? location.slice(1) : location;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

function valueAt(root: unknown, at: string): unknown {
  if (at === '') return root;
  let node = root;
  for (const token of at.slice(1).split('/')) {
    const key = token.replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Bounded and inert: reasons and problem lines quote upstream schema text and client keys. */
function clip(raw: string, max: number): string {
  const text = stripUnsafe(raw);
  if (text.length <= max) return text;
  // Step back off a high surrogate so the cut never leaves half a character.
  const end = /[\ud800-\udbff]/.test(text.charAt(max - 2)) ? max - 2 : max - 1;
  return `${text.slice(0, end)}…`;
}

function message(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return clip(text.split('\n')[0] ?? '', 200);
}
