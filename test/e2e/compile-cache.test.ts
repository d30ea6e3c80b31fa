import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import nodeModule from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRunner, NODE24 } from '../helpers/conformance.js';
import { ensureDist } from '../helpers/dist.js';
import { FIXTURE, ROOT } from '../helpers/harness.js';

// The CLI's entry turns on Node's module compile cache where Node has one (22.1+; the Node 24
// here is test/tools') and loads as before on Node 20 (deploy/node/launch.ts).
// Each test runs a copy of the built CLI, so that the cache it writes is its own. The copies sit
// in the checkout's .manifold/ (git-ignored), where the CLI's external packages resolve.

let dir: string;
let config: string;

beforeAll(() => {
  ensureDist();
  ensureRunner();
  mkdirSync(join(ROOT, '.manifold'), { recursive: true });
  dir = mkdtempSync(join(ROOT, '.manifold', 'compile-cache-'));
  // No store: better-sqlite3 is built for the Node that runs the suite, and the CLI loads it only for one.
  config = join(dir, 'config.json');
  writeFileSync(
    config,
    JSON.stringify({
      mcpServers: { fixture: { command: process.execPath, args: [FIXTURE] } },
      gateway: { store: false },
    }),
  );
}, 600_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A fresh copy of the built CLI (entry and chunks) in its own directory. */
function copyOfCli(name: string): string {
  const to = join(dir, name);
  cpSync(join(ROOT, 'dist/manifold.js'), join(to, 'manifold.js'));
  cpSync(join(ROOT, 'dist/chunks'), join(to, 'chunks'), { recursive: true });
  return join(to, 'manifold.js');
}

/**
 * Starts `cli` with `node`, waits for it to listen, stops it with SIGTERM (Node writes the cache
 * as the process exits) and returns what it wrote to stderr and its exit code.
 */
function startAndStop(node: string, cli: string, env: Record<string, string> = {}) {
  return new Promise<{ stderr: string; code: number | null }>((resolve, reject) => {
    const child = spawn(node, [cli, 'serve', '--config', config, '--port', '0'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let stopping = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no gateway.listening within 60 s:\n${out.slice(-3000)}`));
    }, 60_000);
    const onData = (d: Buffer) => {
      out += d.toString('utf8');
      if (!stopping && out.includes('"gateway.listening"')) {
        stopping = true;
        child.kill('SIGTERM');
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (!stopping) reject(new Error(`the gateway exited before listening (${code}):\n${out.slice(-3000)}`));
      else resolve({ stderr: out, code });
    });
  });
}

/** The compiled entries Node wrote under `<cli's directory>/.cache/<its version directory>/`. */
function cached(cli: string): string[] {
  const root = join(cli, '..', '.cache');
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((version) => readdirSync(join(root, version)));
}

describe('the compile cache (Node 24)', () => {
  it('is written beside the CLI on the first start and read back on the next', async () => {
    const cli = copyOfCli('cached');
    const first = await startAndStop(NODE24, cli);
    expect(first.code).toBe(0);
    // One entry per module compiled after the launcher turned the cache on: the CLI's chunk and
    // the chunks it imports.
    expect(cached(cli).length).toBeGreaterThanOrEqual(3);

    const second = await startAndStop(NODE24, cli, { NODE_DEBUG_NATIVE: 'COMPILE_CACHE' });
    expect(second.code).toBe(0);
    expect(second.stderr).toMatch(/cache for (ESM )?file:\/\/\S+\/chunks\/main-[A-Z0-9]+\.js was accepted/);
  }, 180_000);

  it('is not written with NODE_DISABLE_COMPILE_CACHE=1', async () => {
    const cli = copyOfCli('disabled');
    const run = await startAndStop(NODE24, cli, { NODE_DISABLE_COMPILE_CACHE: '1' });
    expect(run.code).toBe(0);
    expect(existsSync(join(cli, '..', '.cache'))).toBe(false);
  }, 120_000);
});

describe('on the Node that runs the suite', () => {
  it('starts, with a cache exactly where this Node has one (none on Node 20)', async () => {
    const cli = copyOfCli('this-node');
    const run = await startAndStop(process.execPath, cli);
    expect(run.code).toBe(0);
    const hasCache =
      typeof (nodeModule as { enableCompileCache?: unknown }).enableCompileCache === 'function';
    expect(existsSync(join(cli, '..', '.cache'))).toBe(hasCache);
  }, 120_000);
});
