/**
 * The dependency direction of docs/architecture.md, checked by `npm test`
 * (test/unit/dependencies.test.ts runs dependency-cruiser from test/tools, on its Node 24):
 *
 *   server/http -> server/mcp -> gateway -> {aggregate, upstream, observe} -> code -> {auth, store}
 *     -> config -> guards -> protocol -> lib (and the root: platform.ts, errors.ts)
 *
 * deploy/* -> src/, never the reverse; nothing in src/ imports node:*, cloudflare:* or a package
 * that needs Node; no import cycle at run time anywhere, and none at all in src/server.
 * Type-only imports count for the layers: a type names a concept as surely as a call does.
 */
const LAYERS = [
  ['server-http', '^src/server/http/'],
  ['server-mcp', '^src/server/mcp/'],
  ['gateway', '^src/gateway/'],
  ['middle', '^src/(aggregate|upstream|observe|registry)/'],
  ['code', '^src/code/'],
  ['auth-store', '^src/(auth|store)/'],
  ['config', '^src/config/'],
  ['guards', '^src/guards/'],
  ['protocol', '^src/protocol/'],
  ['lib', '^src/(lib/|platform\\.ts$|errors\\.ts$)'],
];
const LAYERED = LAYERS.map(([, path]) => `(${path})`).join('|');

/** A layer may import only the layers below it (and itself). */
const upward = LAYERS.flatMap(([name, path], i) =>
  LAYERS.slice(0, i).map(([above, abovePath]) => ({
    name: `${name}-not-to-${above}`,
    comment: `${path} is below ${abovePath} (docs/architecture.md, "The map")`,
    severity: 'error',
    from: { path },
    to: { path: abovePath },
  })),
);

/**
 * The packages src/ may import: each runs on Workers as well as on Node. A new one is added here
 * only after checking that (test/workers/bundle.test.ts then proves the bundle stays Node-free).
 */
const NEUTRAL_PACKAGES = [
  // Its planner builds closures, never code from strings (test/workers/bundle.test.ts runs it in workerd).
  '@bufbuild/cel',
  '@cfworker/json-schema',
  '@jitl/quickjs-wasmfile-release-sync',
  '@modelcontextprotocol/sdk',
  '@opentelemetry/api',
  'diff',
  'eventsource-parser',
  'hono',
  'jose',
  'jsonc-parser',
  'lru-cache',
  'minisearch',
  'quickjs-emscripten-core',
  'sucrase',
  'zod',
];
const literal = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'src-in-a-layer',
      comment: 'Every folder of src/ has its place in LAYERS above (and in docs/architecture.md).',
      severity: 'error',
      from: { path: '^src/', pathNot: LAYERED },
      to: {},
    },
    {
      name: 'src-to-a-layer',
      comment: 'Every folder of src/ has its place in LAYERS above (and in docs/architecture.md).',
      severity: 'error',
      from: {},
      to: { path: '^src/', pathNot: LAYERED },
    },
    {
      name: 'no-runtime-cycle',
      comment: 'No import cycle at run time anywhere (type-only imports aside).',
      severity: 'error',
      from: { path: '^(src|deploy)/' },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'no-cycle-in-server',
      comment: 'src/server has no import cycle at all, type-only imports included.',
      severity: 'error',
      from: { path: '^src/server/' },
      to: { circular: true },
    },
    {
      name: 'src-not-to-deploy',
      comment: 'deploy/* depends on src/, never the reverse.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^deploy/' },
    },
    {
      name: 'src-no-node-builtins',
      comment: 'Nothing in src/ imports node:* (Platform is the seam).',
      severity: 'error',
      from: { path: '^src/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'src-runtime-neutral',
      comment: 'src/ imports only packages that run on Workers too (NEUTRAL_PACKAGES), never cloudflare:*.',
      severity: 'error',
      from: { path: '^src/' },
      to: {
        pathNot: ['^src/', `node_modules/(${NEUTRAL_PACKAGES.map(literal).join('|')})/`],
      },
    },
    {
      name: 'src-no-sdk-stdio',
      comment: "The SDK's stdio transports spawn processes: deploy/node/runtime/stdio.ts owns them.",
      severity: 'error',
      from: { path: '^src/' },
      to: { path: 'node_modules/@modelcontextprotocol/sdk/.*/stdio' },
    },
    {
      name: 'workers-not-to-node',
      comment: 'The Worker never reaches the Node host.',
      severity: 'error',
      from: { path: '^deploy/workers/' },
      to: { path: '^deploy/node/' },
    },
    {
      name: 'node-not-to-workers',
      comment: 'The Node host never reaches the Worker.',
      severity: 'error',
      from: { path: '^deploy/node/' },
      to: { path: '^deploy/workers/' },
    },
    {
      name: 'resolvable',
      comment:
        'Every import resolves (cloudflare:* is the Workers runtime): an unresolved one would slip past every rule above.',
      severity: 'error',
      from: { path: '^(src|deploy)/' },
      to: { couldNotResolve: true, pathNot: '^cloudflare:' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
    },
    exclude: { path: '^(dist|test)/' },
  },
};
