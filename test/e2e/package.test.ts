import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/harness.js';

// `manifold` as a command (#16): what `npm pack` puts in the tarball is enough to run it. The
// tarball is unpacked and its CLI run, with this checkout's node_modules standing in for what
// `npm install` of the tarball would bring (the bundle's one external, better-sqlite3, and the
// example's MCP servers). `--ignore-scripts`: dist is already built (npm test builds it first).
describe('the packed package', () => {
  const dir = mkdtempSync(join(tmpdir(), 'manifold-pack-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('npm pack holds the CLI and its chunks, not the sources or tests; the unpacked CLI runs', () => {
    // Node's compile cache, as a Node 24 run of the CLI leaves it (deploy/node/launch.ts): this
    // machine's compiled code, never packed.
    const cache = join(ROOT, 'dist/.cache/v0-test');
    mkdirSync(cache, { recursive: true });
    writeFileSync(join(cache, 'entry'), 'compiled');
    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], {
        cwd: ROOT,
        encoding: 'utf8',
      }),
    ) as { filename: string; files: { path: string }[] }[];
    rmSync(join(ROOT, 'dist/.cache'), { recursive: true, force: true });
    const files = packed[0]!.files.map((f) => f.path);
    expect(files).toContain('dist/manifold.js');
    expect(files.some((f) => /^dist\/chunks\/.+\.js$/.test(f))).toBe(true);
    expect(files).toContain('examples/manifold.json');
    expect(files.filter((f) => f.startsWith('test/') || f.startsWith('src/') || f.startsWith('.'))).toEqual(
      [],
    );
    expect(files.filter((f) => f.startsWith('dist/.cache'))).toEqual([]);

    execFileSync('tar', ['-xzf', join(dir, packed[0]!.filename), '-C', dir]);
    const pkg = join(dir, 'package');
    symlinkSync(resolve(ROOT, 'node_modules'), join(pkg, 'node_modules'));
    const version = spawnSync(process.execPath, [join(pkg, 'dist/manifold.js'), '--version'], {
      encoding: 'utf8',
    });
    expect(version.status).toBe(0);
    expect(version.stdout.trim()).toBe(
      JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')).version,
    );
    // The embedded example, from the unpacked package: both real servers come up.
    const check = spawnSync(
      process.execPath,
      [join(pkg, 'dist/manifold.js'), 'check', '--config', 'examples/manifold.json'],
      {
        cwd: pkg,
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    expect(check.status, check.stderr).toBe(0);
    expect(check.stdout).toMatch(/^everything\s+stdio\s+ready/m);
    expect(check.stdout).toMatch(/^memory\s+stdio\s+ready/m);
  }, 120_000);
});
