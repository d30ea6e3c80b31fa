import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatIssues, parseConfig } from '../../../src/config/load.js';
import type { Config, ConfigIssue, ConfigResult } from '../../../src/config/types.js';
import { isObject } from '../../../src/lib/json.js';
import { secretFileEnv } from '../runtime/secrets.js';

export class ConfigLoadError extends Error {
  constructor(
    message: string,
    readonly issues: ConfigIssue[] = [],
  ) {
    super(message);
  }
}

/** Reads and validates a config file. Every problem is reported at once, before anything starts. */
export function loadConfigFile(
  path: string,
  env: Record<string, string | undefined> = secretFileEnv(),
): { config: Config; warnings: ConfigIssue[]; secrets: string[]; path: string; text: string } {
  const full = resolve(path);
  let text: string;
  try {
    text = readFileSync(full, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ConfigLoadError(
      code === 'ENOENT'
        ? `config file not found: ${full} (create it, or pass --config PATH; see docs/configuration.md)`
        : `cannot read config file ${full}: ${code ?? String(e)}`,
    );
  }
  const result = parseConfigText(text, full, env);
  if (!result.ok) {
    // The warnings too: an unknown key is often the error's cause (`comand` is why there is no
    // command), and its "did you mean" is the fix.
    const also =
      result.warnings.length > 0
        ? `\nwarnings (a misspelt key may be the cause of an error above):\n${formatIssues(result.warnings, full)}`
        : '';
    throw new ConfigLoadError(
      `invalid config ${full}:\n${formatIssues(result.errors, full)}${also}`,
      result.errors,
    );
  }
  return { config: result.config, warnings: result.warnings, secrets: result.secrets, path: full, text };
}

/**
 * The text of the config file at `full`, validated as at start (`gateway.auth.jwksFile` read too):
 * every error with its JSON path, or the config. A reload reads the file through this as well.
 */
export function parseConfigText(
  text: string,
  full: string,
  env: Record<string, string | undefined> = secretFileEnv(),
): ConfigResult {
  const result = parseConfig(text, env, full);
  if (!result.ok) return result;
  const jwksIssue = resolveJwksFile(result.config);
  if (jwksIssue) return { ok: false, errors: [jwksIssue], warnings: result.warnings };
  return result;
}

/** JWK members that only a private or symmetric key has (RFC 7518 §6.2.2, §6.3.2, §6.4.1). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/**
 * Reads `gateway.auth.jwksFile` (relative to `cwd`) into `gateway.auth.jwks`. Returns the problem,
 * if any, at `gateway.auth.jwksFile`. Messages name the file, never its content: a file pointed
 * at by mistake may hold a private key.
 */
export function resolveJwksFile(config: Config, cwd: string = process.cwd()): ConfigIssue | undefined {
  const auth = config.gateway.auth;
  if (!auth || auth.jwksFile === undefined) return undefined;
  const full = resolve(cwd, auth.jwksFile);
  const issue = (message: string, fix: string): ConfigIssue => ({
    path: 'gateway.auth.jwksFile',
    message,
    fix,
  });
  const make =
    'create one with `manifold keys --out DIR`, or point jwksFile at a file of the form {"keys": [...]}';
  let text: string;
  try {
    text = readFileSync(full, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return issue(
      code === 'ENOENT' ? `file not found: ${full}` : `cannot read ${full}: ${code ?? 'unknown error'}`,
      `${make}; a relative path is resolved from the directory manifold runs in`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // The parser's message can quote the file's content, so it is not passed on.
    return issue(`${full} is not valid JSON`, make);
  }
  if (!isObject(parsed) || !Array.isArray(parsed.keys)) {
    if (isObject(parsed) && PRIVATE_MEMBERS.some((m) => m in parsed)) {
      return issue(
        `${full} holds a private key, not a key set`,
        'point jwksFile at jwks.json (the public keys), never at signing-key.json',
      );
    }
    return issue(`${full} is not a JWKS: expected an object with a "keys" array`, make);
  }
  if (parsed.keys.length === 0) {
    return issue(`${full} has no keys, so no token could be verified`, make);
  }
  const keys: Record<string, unknown>[] = [];
  for (const [i, key] of parsed.keys.entries()) {
    if (!isObject(key) || typeof key.kty !== 'string') {
      return issue(`${full}: keys[${i}] is not a JWK (an object with "kty")`, make);
    }
    const secret = PRIVATE_MEMBERS.filter((m) => m in key);
    if (secret.length > 0) {
      return issue(
        `${full}: keys[${i}] contains private or secret key material (${secret.map((m) => `"${m}"`).join(', ')})`,
        'publish only public keys in jwksFile; `manifold keys` writes them to jwks.json',
      );
    }
    keys.push(key);
  }
  auth.jwks = { keys };
  return undefined;
}

/** The package version, read from the nearest package.json named mcp-manifold. */
export function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const p = resolve(dir, 'package.json');
    if (existsSync(p)) {
      const pkg = JSON.parse(readFileSync(p, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'mcp-manifold' && pkg.version) return pkg.version;
    }
    dir = dirname(dir);
  }
  return '0.0.0';
}
