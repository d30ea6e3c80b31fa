/**
 * Turns the text of a config file into a validated `Config`, reporting every problem at once.
 * Pure: no file system, no process, so it runs on Node and on Workers alike. The caller reads the
 * file and passes the environment.
 */

import { isObject } from '../lib/json.js';
import { error, type Findings } from './findings.js';
import { readGateway } from './gateway.js';
import { type Env, Interpolator } from './interpolate.js';
import { describeKind } from './issues.js';
import { keysOf, readJson } from './json-parse.js';
import { formatPath } from './paths.js';
import { readProfiles } from './profiles.js';
import { TOP_LEVEL_KEYS } from './schema.js';
import { checkAlwaysLoad, readServers } from './servers.js';
import type { Config, ConfigIssue, ConfigResult } from './types.js';
import { unknownKeyWarning } from './unknown-keys.js';

// ---------------------------------------------------------------------------------------------
// Validation

function validate(raw: unknown, env: Env, initial: ConfigIssue[]): ConfigResult {
  const errors = [...initial];
  const f: Findings = { errors, warnings: [], interpolator: new Interpolator(env, errors) };
  if (!isObject(raw)) {
    error(
      f,
      [],
      `expected a JSON object at the top level, got ${describeKind(raw)}`,
      'wrap the configuration in { } with an "mcpServers" map inside',
    );
    return { ok: false, errors: f.errors, warnings: f.warnings };
  }
  for (const key of keysOf(raw)) {
    if (!(TOP_LEVEL_KEYS as readonly string[]).includes(key))
      f.warnings.push(unknownKeyWarning([key], TOP_LEVEL_KEYS));
  }
  const gateway = readGateway(f, raw.gateway);
  const servers = readServers(f, raw, gateway);
  checkAlwaysLoad(f, raw, gateway);
  const declared = ['mcpServers', 'servers'].flatMap((k) => (isObject(raw[k]) ? keysOf(raw[k]) : []));
  const profiles = readProfiles(f, raw.profiles, gateway, declared);
  if (f.errors.length > 0) return { ok: false, errors: f.errors, warnings: f.warnings };
  const config: Config = { gateway: gateway.config, servers, profiles };
  const secrets = f.interpolator.secrets;
  // Shared secrets are redacted from logs even when they were written literally.
  for (const secret of [
    config.gateway.auth ? config.gateway.auth.secret : undefined,
    config.gateway.cursorSecret,
    config.gateway.oauth?.secret,
    ...servers.map((s) => s.auth?.clientSecret),
  ]) {
    if (secret !== undefined && !secrets.includes(secret)) secrets.push(secret);
  }
  return { ok: true, config, warnings: f.warnings, secrets };
}

// ---------------------------------------------------------------------------------------------
// Public API

/**
 * Parses and validates the text of a config file. `env` supplies `${VAR}` values; `source` names
 * the file in the fix for a JSON syntax error.
 */
export function parseConfig(
  text: string,
  env: Record<string, string | undefined>,
  source?: string,
): ConfigResult {
  const read = readJson(text, source);
  if (!read.ok) return { ok: false, errors: [read.error], warnings: [] };
  const duplicates = read.duplicates.map(
    (path): ConfigIssue => ({
      path: formatPath(path),
      message: `duplicate key ${JSON.stringify(String(path[path.length - 1]))}; JSON keeps only the last one`,
      fix: 'remove or rename one of the two entries',
    }),
  );
  return validate(read.value, env, duplicates);
}

/** Validates an already-parsed config value (for example one built in code or by a test). */
export function parseConfigObject(raw: unknown, env: Record<string, string | undefined>): ConfigResult {
  return validate(raw, env, []);
}

const oneLine = (s: string) => s.replace(/[\r\n]+/g, ' ');

/** Human text, one problem per line: `path: message (fix: ...)`, prefixed by `source: ` if given. */
export function formatIssues(issues: ConfigIssue[], source?: string): string {
  return issues
    .map((issue) => {
      const where = `${source ? `${source}: ` : ''}${issue.path ? `${issue.path}: ` : ''}`;
      const fix = issue.fix ? ` (fix: ${oneLine(issue.fix)})` : '';
      return `${where}${oneLine(issue.message)}${fix}`;
    })
    .join('\n');
}

/**
 * Only the `gateway` section of a config file's text (#54): what `manifold add` needs to reach a
 * registry (its URL, the egress rules) before the file has any server, or while it has none.
 */
export function parseGatewayText(
  text: string,
  env: Record<string, string | undefined>,
  source?: string,
): { ok: true; gateway: Config['gateway'] } | { ok: false; errors: ConfigIssue[] } {
  const read = readJson(text, source);
  if (!read.ok) return { ok: false, errors: [read.error] };
  const errors: ConfigIssue[] = [];
  const f: Findings = { errors, warnings: [], interpolator: new Interpolator(env, errors) };
  const raw = isObject(read.value) ? read.value.gateway : undefined;
  const gateway = readGateway(f, raw);
  return errors.length > 0 ? { ok: false, errors } : { ok: true, gateway: gateway.config };
}
