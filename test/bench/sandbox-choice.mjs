#!/usr/bin/env node
// The measurement behind code mode's choice of sandbox on Workers (#50, docs/architecture.md):
// in real workerd (Miniflare), one Worker runs a trivial program per request either in QuickJS
// (the engine code mode uses, from src/code/sandbox.ts, bundled the way the gateway bundles it) or
// in a fresh Dynamic Worker from the Worker Loader binding, and against a request that runs
// nothing. Prints one JSON line: p50/p99 per way in µs, measured from the client.
//   node test/bench/sandbox-choice.mjs [requests]
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const N = Number(process.argv[2] ?? 300);
const dir = mkdtempSync(join(tmpdir(), 'manifold-sandbox-choice-'));
const entry = join(dir, 'entry.ts');
writeFileSync(
  entry,
  `import { newEngine, runInSandbox } from '${ROOT}/src/code/sandbox.ts';
import wasm from './quickjs.wasm';
const names = { has: () => false, list: () => [] };
const limits = { timeoutMs: 5000, cpuMs: 1000, memoryBytes: 16 << 20, maxLogBytes: 1024 };
const PROGRAM = '(async function () { return 6 * 7; })()';
export default {
  async fetch(request, env) {
    const way = new URL(request.url).pathname;
    if (way === '/none') return Response.json(42);
    if (way === '/quickjs') {
      const engine = await newEngine(limits.memoryBytes, () => Promise.resolve(wasm));
      const out = await runInSandbox(engine, PROGRAM, { names, call: async () => ({ value: null }), limits, now: 0, seed: 1, clock: () => Date.now() });
      return Response.json(out.ok ? out.value : out.error);
    }
    const worker = env.LOADER.get(crypto.randomUUID(), () => ({
      compatibilityDate: '2026-04-01',
      mainModule: 'main.js',
      modules: { 'main.js': 'export default { async fetch() { const run = async () => 6 * 7; return Response.json(await run()); } };' },
      globalOutbound: null,
    }));
    return worker.getEntrypoint().fetch('http://sandbox/');
  },
};
`,
);
const wasmPath = createRequire(import.meta.url).resolve('@jitl/quickjs-wasmfile-release-sync/wasm');
copyFileSync(wasmPath, join(dir, 'quickjs.wasm'));
await build({
  entryPoints: [entry],
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  conditions: ['workerd', 'worker', 'browser'],
  mainFields: ['browser', 'module', 'main'],
  external: ['./quickjs.wasm'],
  outfile: join(dir, 'worker.js'),
  logLevel: 'warning',
});
const mf = new Miniflare({
  modules: true,
  modulesRoot: dir,
  scriptPath: join(dir, 'worker.js'),
  modulesRules: [{ type: 'CompiledWasm', include: ['**/*.wasm'] }],
  compatibilityDate: '2026-04-01',
  workerLoaders: { LOADER: {} },
  host: '127.0.0.1',
  port: 0,
});
const base = await mf.ready;
const result = {};
try {
  for (const way of ['none', 'quickjs', 'loader']) {
    const url = new URL(`/${way}`, base);
    for (let i = 0; i < 20; i++) await (await fetch(url)).text();
    const times = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      const text = await (await fetch(url)).text();
      times.push((performance.now() - t) * 1000);
      if (text !== '42') throw new Error(`${way}: ${text.slice(0, 200)}`);
    }
    times.sort((a, b) => a - b);
    result[way] = {
      p50Us: Math.round(times[times.length >> 1]),
      p99Us: Math.round(times[Math.floor(times.length * 0.99)]),
    };
  }
} finally {
  await mf.dispose();
}
process.stdout.write(`${JSON.stringify(result)}\n`);
