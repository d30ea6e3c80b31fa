import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { buildSync } from 'esbuild';
import { ROOT } from './harness.js';

/** The built CLI, run the way the docs tell a new user to run it. */
export const CLI = resolve(ROOT, 'dist/manifold.js');

export interface Ran {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * A command run to its end without blocking this process, as spawnSync would: a gateway or server
 * in this process goes on answering meanwhile, and this process's kept-alive sockets are not left
 * to time out under a frozen event loop (which showed as ECONNRESET on the next request).
 */
export function run(
  command: string,
  args: string[],
  options: { env?: Record<string, string>; input?: string; cwd?: string; timeoutMs?: number } = {},
): Promise<Ran> {
  const child = spawn(command, args, {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env, ...options.env },
    stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  if (options.input !== undefined) child.stdin?.end(options.input);
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000);
  return new Promise((res, rej) => {
    child.once('error', rej);
    child.once('close', (status, signal) => {
      clearTimeout(timer);
      res({ status, signal, stdout, stderr });
    });
  });
}

/** The built CLI run to its end (see `run`); `npm run build` first (npm test does). */
export function runCli(args: string[], options: Parameters<typeof run>[2] = {}): Promise<Ran> {
  if (!existsSync(CLI)) throw new Error('dist is missing: run npm run build (npm test does)');
  return run(process.execPath, [CLI, ...args], options);
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** True when some source under src/ or deploy/node/ is newer than its compiled file. */
function distIsStale(): boolean {
  const files = [...sources(resolve(ROOT, 'src')), ...sources(resolve(ROOT, 'deploy/node'))];
  return files.some((ts) => {
    const js = resolve(ROOT, 'dist', relative(ROOT, ts)).replace(/\.ts$/, '.js');
    return !existsSync(js) || statSync(js).mtimeMs < statSync(ts).mtimeMs;
  });
}

/**
 * Builds `dist` (`npm run build`) when a source is newer than what was built from it, so a test
 * of the built CLI never runs yesterday's code. `npm test` builds first, so there this does
 * nothing; it is for running one test file on its own after an edit.
 */
export function ensureDist(timeoutMs = 180_000): void {
  if (!distIsStale()) return;
  const build = spawnSync('npm', ['run', 'build'], { cwd: ROOT, encoding: 'utf8', timeout: timeoutMs });
  if (build.status !== 0) throw new Error(`npm run build failed:\n${build.stdout}\n${build.stderr}`);
}

/**
 * `entry` (a source file, from the checkout's root) bundled on its own as an ES module named
 * `name` in `dir`, for a child Node to import as it is: its path.
 */
export function bundleForChild(entry: string, dir: string, name: string): string {
  const outfile = join(dir, name);
  buildSync({
    entryPoints: [resolve(ROOT, entry)],
    outfile,
    bundle: true,
    format: 'esm',
    platform: 'node',
    logLevel: 'warning',
  });
  return outfile;
}
