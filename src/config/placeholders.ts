/**
 * The identity placeholders of an isolated server (#13): `{{tenant}}` and `{{subject}}` in `args`,
 * `env` values, `cwd`, `url` and `headers` values are replaced, per instance, with the caller's
 * identity (upstream/isolation.ts). A placeholder is only honest where each value it can take has
 * an instance of its own; anywhere else it is a config error, reported with the others:
 * - under `per-tenant`, the subjects of a tenant share one instance, so `{{subject}}` would be
 *   whoever started it, and every other subject of the tenant would reach the server as them;
 * - under `shared`, one instance serves everyone and nothing is replaced, so a `{{tenant}}` file
 *   path would be one literal file for every tenant;
 * - `command` is never filled in, whatever the isolation.
 */

import { isObject, type JsonObject } from '../lib/json.js';
import { error, type Findings } from './findings.js';
import { keysOf } from './json-parse.js';
import type { PathSegment } from './paths.js';
import type { ServerConfig } from './types.js';

export const TENANT_PLACEHOLDER = '{{tenant}}';
export const SUBJECT_PLACEHOLDER = '{{subject}}';

type Isolation = ServerConfig['isolation'];

/** The placeholders an isolation replaces with the caller's own identity. */
function filledBy(isolation: Isolation): readonly string[] {
  if (isolation === 'per-subject') return [TENANT_PLACEHOLDER, SUBJECT_PLACEHOLDER];
  if (isolation === 'per-tenant') return [TENANT_PLACEHOLDER];
  return [];
}

function placeholdersIn(value: unknown): string[] {
  if (typeof value !== 'string') return [];
  return [TENANT_PLACEHOLDER, SUBJECT_PLACEHOLDER].filter((p) => value.includes(p));
}

/** `a`, `a and b`. */
function both(names: readonly string[]): string {
  return names.join(' and ');
}

/**
 * Every string of the entry that holds a placeholder its isolation cannot fill with the caller,
 * each reported at its own path. `picked` holds the entry's keys after `${VAR}` substitution (a
 * variable's value is filled in like the rest); `keys` are those whose shape is valid; values are
 * never shown.
 */
export function checkPlaceholders(
  f: Findings,
  picked: JsonObject,
  base: PathSegment[],
  keys: { valid: (key: string) => boolean; isolation: Isolation; isolationGiven: boolean },
): void {
  const { isolation } = keys;
  const filled = filledBy(isolation);
  const setting = keys.isolationGiven
    ? `isolation is "${isolation}"`
    : `isolation is "${isolation}" (the default)`;
  const check = (value: unknown, path: PathSegment[]) => {
    const found = placeholdersIn(value).filter((p) => !filled.includes(p));
    if (found.length === 0) return;
    const subject = found.includes(SUBJECT_PLACEHOLDER);
    const why =
      isolation === 'per-tenant'
        ? `the subjects of a tenant share one instance, so ${SUBJECT_PLACEHOLDER} would be whichever subject started it, and every other subject of the tenant would reach the server as them`
        : `one instance serves every caller and nothing is replaced, so every ${subject ? 'caller' : 'tenant'} would share the literal value`;
    error(
      f,
      path,
      `contains ${both(found)}, but ${setting}: ${why}`,
      subject
        ? `set "isolation": "per-subject" for an instance per tenant and subject, or remove ${both(found)}`
        : `set "isolation": "per-tenant" for an instance per tenant, or remove ${both(found)}`,
    );
  };

  if (keys.valid('command')) {
    const found = placeholdersIn(picked.command);
    if (found.length > 0) {
      error(
        f,
        [...base, 'command'],
        `contains ${both(found)}, which is never replaced in command (only in args, env values, cwd, url and headers values)`,
        `move ${both(found)} into args or env, or remove it`,
      );
    }
  }
  if (keys.valid('args') && Array.isArray(picked.args)) {
    for (const [i, a] of picked.args.entries()) check(a, [...base, 'args', i]);
  }
  for (const map of ['env', 'headers'] as const) {
    const values = picked[map];
    if (!keys.valid(map) || !isObject(values)) continue;
    for (const key of keysOf(values)) check(values[key], [...base, map, key]);
  }
  for (const key of ['cwd', 'url'] as const) {
    if (keys.valid(key)) check(picked[key], [...base, key]);
  }
}
