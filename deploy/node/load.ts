import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatIssues, parseConfig } from '../../src/config/index.js';
import type { Config, ConfigIssue } from '../../src/config/types.js';

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
  env: Record<string, string | undefined> = process.env,
): { config: Config; warnings: ConfigIssue[]; secrets: string[]; path: string } {
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
  const result = parseConfig(text, env, full);
  if (!result.ok) {
    throw new ConfigLoadError(`invalid config ${full}:\n${formatIssues(result.errors, full)}`, result.errors);
  }
  return { config: result.config, warnings: result.warnings, secrets: result.secrets, path: full };
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
