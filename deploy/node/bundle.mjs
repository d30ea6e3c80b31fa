// The Node CLI as one ES module and its lazily loaded chunks (#18, start time): `dist/manifold.js`
// is what `npm start`, the `manifold` bin and the tests run. Resolving and reading ~300 modules
// cost more than running them; the session layer (the SDK client, its transports) and undici are
// split off, and load when the first upstream connects or the first egress request is made.
// The entry is a launcher (deploy/node/cli/launch.ts) that turns on Node's compile cache where Node
// has one, then imports the CLI, which is a chunk of its own.
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
  minify: true,
  // No keepNames: its __name() call runs each time a closure is created, which on the call path
  // is several times per request (17% of B2's and 32% of S2's CPU per call, measured A/B). Our
  // errors set `name` themselves; the SDK's McpError is recognised by shape.
  sourcemap: 'linked',
  // Bundled CommonJS packages call require() for Node's built-ins; an ES module has none.
  banner: {
    js: "import { createRequire as __manifoldRequire } from 'node:module'; const require = __manifoldRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
chmodSync('dist/manifold.js', 0o755);
