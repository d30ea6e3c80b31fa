// The Node CLI as one ES module and its lazily loaded chunks: `dist/manifold.js` is what `npm
// start`, the `manifold` bin and the tests run. One file starts faster than the modules it is made
// of; what only some gateways need (the SDK client, undici, Postgres, OpenTelemetry) is split off
// and loads when first used. The entry is a launcher (deploy/node/cli/launch.ts) that turns on
// Node's compile cache where Node has one, then imports the CLI, which is a chunk of its own.
import { chmodSync, rmSync } from 'node:fs';
import { build } from 'esbuild';

rmSync('dist/chunks', { recursive: true, force: true });
// Node's compile cache (launch.ts) for the chunks of an earlier build: never read again.
rmSync('dist/.cache', { recursive: true, force: true });
await build({
  entryPoints: { manifold: 'deploy/node/cli/launch.ts' },
  outdir: 'dist',
  entryNames: '[name]',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // A native addon: loaded from node_modules as it is. pg-native is pg's optional native binding,
  // never installed or used (pg's pure-JS client is): left unresolved.
  external: ['better-sqlite3', 'pg-native'],
  // jsonc-parser's main build is UMD, whose require('./impl/...') calls a bundle cannot follow:
  // its ES module build instead (`manifold add` edits the config file with it).
  alias: { 'jsonc-parser': 'jsonc-parser/lib/esm/main.js' },
  minify: true,
  // No keepNames: its __name() call runs each time a closure is created, a large share of a call's
  // CPU (B2, S2). Our errors set `name` themselves; the SDK's McpError is recognised by shape.
  sourcemap: 'linked',
  // Bundled CommonJS packages call require() for Node's built-ins; an ES module has none.
  banner: {
    js: "import { createRequire as __manifoldRequire } from 'node:module'; const require = __manifoldRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
chmodSync('dist/manifold.js', 0o755);
