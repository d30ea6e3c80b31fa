import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/harness.js';

const MAX_BYTES = 3 * 1024 * 1024;
const BUILTINS = new Set(builtinModules);

/** Every way the metafile shows the bundle reaching for Node. Empty means Workers-clean. */
function nodeReach(meta: Metafile): string[] {
  const found: string[] = [];
  const isNode = (p: string) => p.startsWith('node:') || BUILTINS.has(p);
  for (const [input, info] of Object.entries(meta.inputs)) {
    if (isNode(input)) found.push(`input ${input}`);
    if (input.startsWith('deploy/node/')) found.push(`input ${input} (the Node host)`);
    for (const im of info.imports) {
      // `original` catches a node: specifier however it resolved; a bare name that resolved to a
      // bundled package (a polyfill) is not Node.
      if (isNode(im.path) || im.original?.startsWith('node:'))
        found.push(`${input} imports ${im.original ?? im.path}`);
    }
  }
  for (const [output, info] of Object.entries(meta.outputs)) {
    for (const im of info.imports) {
      if (im.external && im.path !== 'cloudflare:workers') found.push(`${output} keeps external ${im.path}`);
    }
  }
  return found;
}

/**
 * `npm run build:workers`, exactly as package.json spells it, but written to a scratch directory:
 * the Workers suite bundles into dist-workers/ in parallel, and must never read a half-written file.
 */
function buildLikeTheScript(outdir: string): { outfile: string; metafile: string } {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const script = pkg.scripts['build:workers'];
  if (!script) throw new Error('package.json has no build:workers script');
  const [bin, ...args] = script.split(/\s+/);
  expect(bin).toBe('esbuild');
  const outfile = join(outdir, 'worker.js');
  const metafile = join(outdir, 'meta.json');
  const redirected = args.map((a) =>
    a.startsWith('--outfile=')
      ? `--outfile=${outfile}`
      : a.startsWith('--metafile=')
        ? `--metafile=${metafile}`
        : a,
  );
  expect(redirected).toContain(`--outfile=${outfile}`);
  expect(redirected).toContain(`--metafile=${metafile}`);
  execFileSync(join(ROOT, 'node_modules/.bin/esbuild'), redirected, { cwd: ROOT, stdio: 'inherit' });
  return { outfile, metafile };
}

describe('the Worker bundle', () => {
  let dir: string;
  let meta: Metafile;
  let outfile: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-bundle-'));
    const built = buildLikeTheScript(dir);
    outfile = built.outfile;
    meta = JSON.parse(readFileSync(built.metafile, 'utf8')) as Metafile;
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('has no node: import or Node builtin anywhere, nothing from deploy/node, and only cloudflare:workers external', () => {
    const inputs = Object.keys(meta.inputs);
    expect(inputs).toContain('deploy/workers/worker.ts');
    expect(inputs.some((i) => i.startsWith('src/'))).toBe(true);
    expect(nodeReach(meta)).toEqual([]);
    const externals = Object.values(meta.outputs).flatMap((o) =>
      o.imports.filter((im) => im.external).map((im) => im.path),
    );
    expect([...new Set(externals)]).toEqual(['cloudflare:workers']);
  });

  it('the check flags a node: import (negative control)', async () => {
    const result = await build({
      stdin: {
        contents: "import 'node:fs'; import 'path'; export {}",
        resolveDir: ROOT,
        sourcefile: 'src/bad.ts',
        loader: 'ts',
      },
      bundle: true,
      platform: 'neutral',
      format: 'esm',
      write: false,
      metafile: true,
      external: ['node:*', 'path'],
      logLevel: 'silent',
    });
    const found = nodeReach(result.metafile);
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringContaining('imports node:fs'),
        expect.stringContaining('imports path'),
        expect.stringContaining('keeps external node:fs'),
      ]),
    );
  });

  // Cloudflare limits a Worker by its compressed size (3 MB on the free plan, 10 MB on paid ones).
  it(`is under ${MAX_BYTES} bytes gzipped`, () => {
    const bytes = statSync(outfile).size;
    const gzipped = gzipSync(readFileSync(outfile)).length;
    console.log(`worker bundle: ${bytes} bytes, ${gzipped} gzipped`);
    expect(gzipped).toBeLessThan(MAX_BYTES);
  });
});
