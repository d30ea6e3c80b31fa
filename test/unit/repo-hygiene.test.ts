import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONFIG_KEY_LISTS } from '../helpers/config-keys.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

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
