/**
 * Reads a server's `overrides` (tools) and `promptOverrides` (#54): every problem at once, each
 * with its JSON path and the fix. Whether the named tool exists is only known once the server
 * lists it: the catalog warns then (aggregate/overrides.ts), never the loader.
 */
import { isObject } from '../lib/json.js';
import { error, type Findings } from './findings.js';
import { describeKind } from './issues.js';
import { keysOf } from './json-parse.js';
import { formatPath, type PathSegment } from './paths.js';
import type { ArgOverride, PromptOverride, ToolOverride } from './types.js';
import { unknownKeyWarning } from './unknown-keys.js';

export const TOOL_KEYS = ['name', 'title', 'description', 'annotations', 'args'];
export const PROMPT_KEYS = ['name', 'title', 'description'];
export const ARG_KEYS = ['fixed', 'default', 'hide', 'value', 'rename', 'description'];
/** Exposed names' alphabet and length (aggregate/names.ts EXPOSED_NAME): checked here, at load. */
const EXPOSED_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** An argument name a client can send: a JSON Schema property name most model APIs accept. */
const ARG_NAME = /^[a-zA-Z0-9_.-]{1,64}$/;

function text(f: Findings, raw: unknown, path: PathSegment[], what: string): string | undefined {
  if (typeof raw === 'string' && raw.length > 0) return f.interpolator.string(raw, formatPath(path));
  error(f, path, `expected a non-empty string, got ${describeKind(raw)}`, `write the ${what} as a string`);
  return undefined;
}

/** A value set by the operator: strings are interpolated (a `${VAR}` secret stays out of logs). */
function value(f: Findings, raw: unknown, path: PathSegment[]): unknown {
  return typeof raw === 'string' ? f.interpolator.string(raw, formatPath(path)) : raw;
}

/** The exposed name an overridden `name` gives, checked like every exposed name. */
function checkName(f: Findings, name: string, prefix: string | false, path: PathSegment[]): void {
  const exposed = prefix === false ? name : `${prefix}__${name}`;
  if (EXPOSED_NAME.test(exposed)) return;
  const why =
    exposed.length > 64
      ? `gives the exposed name ${JSON.stringify(exposed.slice(0, 80))}, ${exposed.length} characters long; the limit is 64`
      : `gives the exposed name ${JSON.stringify(exposed.slice(0, 80))}, which has characters outside letters, digits, "_" and "-"`;
  error(
    f,
    path,
    why,
    'choose a shorter name of letters, digits, "_" and "-" (the server prefix and "__" count too)',
  );
}

function readArg(f: Findings, raw: unknown, path: PathSegment[]): ArgOverride | undefined {
  if (!isObject(raw)) {
    error(
      f,
      path,
      `expected an object, got ${describeKind(raw)}`,
      'write one of {"fixed": value}, {"default": value}, {"hide": true, "value": value}, {"rename": "newName"} or {"description": "..."}',
    );
    return undefined;
  }
  for (const key of keysOf(raw))
    if (!ARG_KEYS.includes(key)) f.warnings.push(unknownKeyWarning([...path, key], ARG_KEYS));
  const has = (k: string) => raw[k] !== undefined;
  const kinds = ['fixed', 'default', 'hide', 'rename'].filter(has);
  if (kinds.length > 1) {
    error(
      f,
      path,
      `sets ${kinds.map((k) => `"${k}"`).join(' and ')}; an argument is either fixed, defaulted, hidden or renamed`,
      'keep one of them',
    );
    return undefined;
  }
  if (has('value') && !has('hide')) {
    error(
      f,
      [...path, 'value'],
      'is only read with "hide": true',
      'write {"hide": true, "value": ...}, or use {"fixed": ...}',
    );
    return undefined;
  }
  const description = has('description')
    ? text(f, raw.description, [...path, 'description'], 'description')
    : undefined;
  if (has('description') && description === undefined) return undefined;
  if ((has('fixed') || has('hide')) && has('description')) {
    error(
      f,
      [...path, 'description'],
      'describes an argument the client never sees (it is fixed or hidden)',
      'remove description, or use {"default": ...} to keep the argument visible',
    );
    return undefined;
  }
  if (has('fixed')) return { kind: 'fixed', value: value(f, raw.fixed, [...path, 'fixed']) };
  if (has('hide')) {
    if (raw.hide !== true) {
      error(
        f,
        [...path, 'hide'],
        `expected true, got ${describeKind(raw.hide)}`,
        'write "hide": true, or remove the override',
      );
      return undefined;
    }
    return has('value')
      ? { kind: 'hidden', value: value(f, raw.value, [...path, 'value']) }
      : { kind: 'hidden' };
  }
  if (has('default')) {
    return {
      kind: 'default',
      value: value(f, raw.default, [...path, 'default']),
      ...(description !== undefined ? { description } : {}),
    };
  }
  if (has('rename')) {
    const to = raw.rename;
    if (typeof to !== 'string' || !ARG_NAME.test(to)) {
      error(
        f,
        [...path, 'rename'],
        `expected an argument name of 1 to 64 letters, digits, "_", "." or "-", got ${typeof to === 'string' ? JSON.stringify(to.slice(0, 80)) : describeKind(to)}`,
        'write the new name, e.g. "repository"',
      );
      return undefined;
    }
    return { kind: 'rename', to, ...(description !== undefined ? { description } : {}) };
  }
  if (description !== undefined) return { kind: 'describe', description };
  error(
    f,
    path,
    'says nothing to do',
    'write one of {"fixed": value}, {"default": value}, {"hide": true, "value": value}, {"rename": "newName"} or {"description": "..."}',
  );
  return undefined;
}

function readTool(
  f: Findings,
  raw: unknown,
  path: PathSegment[],
  prefix: string | false,
): ToolOverride | undefined {
  if (!isObject(raw)) {
    error(
      f,
      path,
      `expected an object, got ${describeKind(raw)}`,
      'write {"name": "...", "description": "...", "args": {"<param>": {"fixed": value}}}',
    );
    return undefined;
  }
  const before = f.errors.length;
  const out: ToolOverride = { args: {} };
  for (const key of keysOf(raw))
    if (!TOOL_KEYS.includes(key)) f.warnings.push(unknownKeyWarning([...path, key], TOOL_KEYS));
  if (raw.name !== undefined) {
    const name = text(f, raw.name, [...path, 'name'], 'tool name');
    if (name !== undefined) {
      checkName(f, name, prefix, [...path, 'name']);
      out.name = name;
    }
  }
  if (raw.title !== undefined) {
    const title = text(f, raw.title, [...path, 'title'], 'title');
    if (title !== undefined) out.title = title;
  }
  if (raw.description !== undefined) {
    const description = text(f, raw.description, [...path, 'description'], 'description');
    if (description !== undefined) out.description = description;
  }
  if (raw.annotations !== undefined) {
    if (isObject(raw.annotations))
      out.annotations = Object.fromEntries(
        keysOf(raw.annotations).map((k) => [k, (raw.annotations as Record<string, unknown>)[k]]),
      );
    else
      error(
        f,
        [...path, 'annotations'],
        `expected an object, got ${describeKind(raw.annotations)}`,
        'write annotations as {"readOnlyHint": true}',
      );
  }
  if (raw.args !== undefined) {
    if (!isObject(raw.args)) {
      error(
        f,
        [...path, 'args'],
        `expected an object, got ${describeKind(raw.args)}`,
        'write args as {"<param>": {"fixed": value}}',
      );
    } else {
      const shown = new Map<string, string>();
      for (const param of keysOf(raw.args)) {
        const arg = readArg(f, raw.args[param], [...path, 'args', param]);
        if (!arg) continue;
        out.args[param] = arg;
        if (arg.kind === 'rename') {
          const other = shown.get(arg.to);
          if (other !== undefined) {
            error(
              f,
              [...path, 'args', param, 'rename'],
              `renames to "${arg.to}", as "${other}" does`,
              'give each renamed argument its own name',
            );
          }
          shown.set(arg.to, param);
        }
      }
      for (const [to, from] of shown) {
        if (
          Object.hasOwn(raw.args, to) &&
          out.args[to]?.kind !== 'rename' &&
          out.args[to]?.kind !== 'fixed' &&
          out.args[to]?.kind !== 'hidden'
        ) {
          error(
            f,
            [...path, 'args', from, 'rename'],
            `renames to "${to}", which is another argument the client still sees`,
            `choose another name, or fix, hide or rename "${to}" too`,
          );
        }
      }
    }
  }
  return f.errors.length > before ? undefined : out;
}

/** `overrides`: per upstream tool name. Undefined when absent or wrong (the errors say why). */
export function readToolOverrides(
  f: Findings,
  raw: unknown,
  base: PathSegment[],
  prefix: string | false,
): Record<string, ToolOverride> | undefined {
  if (raw === undefined) return undefined;
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object keyed by the upstream's tool names, got ${describeKind(raw)}`,
      'write overrides as {"<upstream tool>": {"name": "...", "description": "..."}}',
    );
    return undefined;
  }
  const out: Record<string, ToolOverride> = {};
  const names = new Map<string, string>();
  for (const tool of keysOf(raw)) {
    const o = readTool(f, raw[tool], [...base, tool], prefix);
    if (!o) continue;
    out[tool] = o;
    if (o.name !== undefined) {
      const other = names.get(o.name);
      if (other !== undefined) {
        error(
          f,
          [...base, tool, 'name'],
          `renames to "${o.name}", as the override of "${other}" does`,
          'give each tool its own name',
        );
      }
      names.set(o.name, tool);
    }
  }
  return out;
}

/** `promptOverrides`: per upstream prompt name (names, titles and descriptions only). */
export function readPromptOverrides(
  f: Findings,
  raw: unknown,
  base: PathSegment[],
  prefix: string | false,
): Record<string, PromptOverride> | undefined {
  if (raw === undefined) return undefined;
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object keyed by the upstream's prompt names, got ${describeKind(raw)}`,
      'write promptOverrides as {"<upstream prompt>": {"name": "...", "description": "..."}}',
    );
    return undefined;
  }
  const out: Record<string, PromptOverride> = {};
  for (const prompt of keysOf(raw)) {
    const path = [...base, prompt];
    const entry = raw[prompt];
    if (!isObject(entry)) {
      error(
        f,
        path,
        `expected an object, got ${describeKind(entry)}`,
        'write {"name": "...", "description": "..."}',
      );
      continue;
    }
    for (const key of keysOf(entry))
      if (!PROMPT_KEYS.includes(key)) f.warnings.push(unknownKeyWarning([...path, key], PROMPT_KEYS));
    const o: PromptOverride = {};
    for (const key of PROMPT_KEYS as (keyof PromptOverride)[]) {
      if (entry[key] === undefined) continue;
      const v = text(f, entry[key], [...path, key], key);
      if (v === undefined) continue;
      if (key === 'name') checkName(f, v, prefix, [...path, key]);
      o[key] = v;
    }
    out[prompt] = o;
  }
  return out;
}
