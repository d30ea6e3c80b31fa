import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  AUTH_DEFAULTS,
  GATEWAY_DEFAULTS,
  OAUTH_DEFAULTS,
  SERVER_AUTH_DEFAULTS,
} from '../../src/config/defaults.js';
import { SANDBOX_LIMIT_DEFAULTS } from '../../src/config/sandbox.js';
import { DEFAULT_APPROVAL_SECONDS, DEFAULT_QUEUE_TTL_SECONDS } from '../../src/config/server-checks.js';
import { CONFIG_KEY_LISTS } from '../helpers/config-keys.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** `{a: {b: 1}}` as `[['a.b', 1]]`: every default that is not itself an object, by its dotted key. */
function leaves(o: object, prefix = ''): [string, unknown][] {
  return Object.entries(o).flatMap(([k, v]): [string, unknown][] =>
    v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0
      ? leaves(v, `${prefix}${k}.`)
      : [[`${prefix}${k}`, v]],
  );
}

/** A value as the docs' tables write it in backticks: JSON without spaces, or a bare string. */
function written(v: unknown): string[] {
  const json = JSON.stringify(v);
  return typeof v === 'string' ? [json, v] : [json];
}

function ignored(path: string): boolean {
  try {
    execFileSync('git', ['check-ignore', '-q', path], { cwd: ROOT, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('repository hygiene (#16)', () => {
  it('wrangler dev secrets and local state are never committed', () => {
    // `wrangler dev --config deploy/workers/wrangler.jsonc` reads deploy/workers/.dev.vars.
    expect(ignored('deploy/workers/.dev.vars')).toBe(true);
    expect(ignored('deploy/workers/.dev.vars.staging')).toBe(true);
    expect(ignored('.dev.vars')).toBe(true);
    expect(ignored('.wrangler/state/v3/do/x.sqlite')).toBe(true);
    expect(ignored('deploy/workers/.wrangler/tmp/x.js')).toBe(true);
    // ...while the sources next to them are not ignored.
    expect(ignored('deploy/workers/wrangler.jsonc')).toBe(false);
    expect(ignored('deploy/workers/worker.ts')).toBe(false);
  });

  it('every relative link in the committed Markdown resolves to a file inside the repository', () => {
    const files = execFileSync('git', ['ls-files', '*.md'], { cwd: ROOT }).toString().trim().split('\n');
    expect(files.length).toBeGreaterThan(5);
    const broken: string[] = [];
    for (const file of files) {
      const text = readFileSync(resolve(ROOT, file), 'utf8');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^(https?:|mailto:|#)/.test(target)) continue;
        const full = resolve(dirname(resolve(ROOT, file)), target.split('#')[0]!);
        if (!full.startsWith(`${ROOT}/`) || !existsSync(full)) broken.push(`${file} -> ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('docs/configuration.md names every config key the loader knows', () => {
    const doc = readFileSync(resolve(ROOT, 'docs/configuration.md'), 'utf8');
    // Every span in backticks, split into its words: `gateway.code.cpuMs` names code and cpuMs.
    const named = new Set([...doc.matchAll(/`([^`\n]+)`/g)].flatMap((m) => m[1]!.split(/[^\w$]+/)));
    expect(CONFIG_KEY_LISTS.size).toBeGreaterThanOrEqual(25);
    const missing = [...CONFIG_KEY_LISTS].flatMap(([name, keys]) =>
      keys.filter((k) => !named.has(k)).map((k) => `${name}: ${k}`),
    );
    expect(missing).toEqual([]);
  });

  it('docs/configuration.md gives every default the loader applies, as the code has it', () => {
    const doc = readFileSync(resolve(ROOT, 'docs/configuration.md'), 'utf8');
    // Each table row by the key in its first cell, with the backticked values of its Default cell.
    const rows = new Map<string, Set<string>>();
    const lines = doc.split('\n');
    let column = -1;
    for (const [i, line] of lines.entries()) {
      const cells = line.split('|').map((c) => c.trim());
      if (lines[i + 1]?.startsWith('| -')) column = cells.indexOf('Default');
      const key = /^`([^`]+)`$/.exec(cells[1] ?? '')?.[1];
      if (!line.startsWith('| ') || !key || column < 0) continue;
      const values = rows.get(key) ?? new Set<string>();
      for (const v of (cells[column] ?? '').matchAll(/`([^`]+)`/g)) {
        values.add(v[1]!.replace(/([,:])\s+/g, '$1'));
      }
      rows.set(key, values);
    }
    const defaults: [string, unknown][] = [
      ...leaves(GATEWAY_DEFAULTS),
      ...leaves(AUTH_DEFAULTS),
      ...leaves(SERVER_AUTH_DEFAULTS),
      ...leaves(OAUTH_DEFAULTS),
      ...leaves(SANDBOX_LIMIT_DEFAULTS, 'sandbox.limits.'),
      ['approval.timeoutSeconds', DEFAULT_APPROVAL_SECONDS],
      ['approval.queueTtlSeconds', DEFAULT_QUEUE_TTL_SECONDS],
    ];
    expect(defaults.length).toBeGreaterThan(60);
    const wrong = defaults.flatMap(([key, value]) => {
      // A key with no row of its own is documented in its parent's (`store`: `{"path": …}`).
      let row = key;
      while (!rows.has(row) && row.includes('.')) row = row.slice(0, row.lastIndexOf('.'));
      const values = [...(rows.get(row) ?? [])];
      const leaf = key.slice(key.lastIndexOf('.') + 1);
      const ok = written(value).some((w) =>
        row === key ? values.includes(w) : values.some((v) => v.includes(`"${leaf}":${w}`)),
      );
      return ok ? [] : [`${key}: the code's default is ${JSON.stringify(value)}`];
    });
    expect(wrong).toEqual([]);
  });

  it('docs/configuration.md names the variables a stdio server inherits, as stdio.ts passes them', () => {
    const doc = readFileSync(resolve(ROOT, 'docs/configuration.md'), 'utf8');
    const code = readFileSync(resolve(ROOT, 'deploy/node/runtime/stdio.ts'), 'utf8');
    const posix = /: \[([^\]]+)\];/
      .exec(code)![1]!
      .match(/'([A-Z_]+)'/g)!
      .map((v) => v.slice(1, -1));
    expect(posix).toContain('PATH');
    for (const v of posix) expect(doc).toContain(`\`${v}\``);
  });
});
