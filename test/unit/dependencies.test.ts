import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { NODE24 } from '../helpers/conformance.js';
import { ROOT } from '../helpers/harness.js';

// dependency-cruiser needs Node 22+, so it lives in test/tools and runs on that Node 24; it finds
// the project's typescript by walking up to the root's node_modules.
const CRUISER = join(ROOT, 'test/tools/node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
  cycle?: { name: string }[];
}

interface Cruised {
  source: string;
  dependencies: { resolved: string }[];
}

function cruise(): { violations: Violation[]; modules: number; packages: Set<string> } {
  if (!existsSync(NODE24) || !existsSync(CRUISER))
    throw new Error('test/tools is not installed: run `node test/services.mjs` (npm test runs it first)');
  let out: string;
  try {
    out = execFileSync(
      NODE24,
      [CRUISER, '--config', '.dependency-cruiser.cjs', '--output-type', 'json', 'src', 'deploy'],
      { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] },
    );
  } catch (e) {
    // It exits non-zero when it finds violations; the JSON on stdout still lists them.
    out = (e as { stdout?: string }).stdout ?? '';
    if (!out.startsWith('{')) throw e;
  }
  const result = JSON.parse(out) as {
    modules: Cruised[];
    summary: { violations: Violation[]; totalCruised: number };
  };
  // The packages src/ imports, as the rules see them (node_modules/<name>/...).
  const packages = new Set(
    result.modules
      .filter((m) => m.source.startsWith('src/'))
      .flatMap((m) =>
        m.dependencies.map((d) => /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(d.resolved)?.[1] ?? []),
      )
      .flat(),
  );
  return { violations: result.summary.violations, modules: result.summary.totalCruised, packages };
}

function show(v: Violation): string {
  const path = v.cycle ? [v.from, ...v.cycle.map((c) => c.name)].join(' -> ') : `${v.from} -> ${v.to}`;
  return `${v.rule.name}: ${path}`;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('dependency rules (.dependency-cruiser.cjs)', () => {
  it('src/ and deploy/ keep the layers, reach no Node from src/, and have no import cycle', () => {
    const { violations, modules, packages } = cruise();
    expect(modules).toBeGreaterThan(200);
    expect(violations.map(show)).toEqual([]);
    // The rules see the packages src/ imports (an `exclude` of node_modules once hid them all).
    expect([...packages]).toEqual(expect.arrayContaining(['hono', 'jose', 'jsonc-parser']));
  });

  // Globals are no import, so the graph cannot see them; the Worker has none of these.
  it('no module under src/ uses a Node global', () => {
    const offenders = files(join(ROOT, 'src')).filter((f) =>
      /\bprocess\.(env|argv|exit)|\bBuffer\.|\brequire\(/.test(readFileSync(f, 'utf8')),
    );
    expect(offenders).toEqual([]);
  });
});
