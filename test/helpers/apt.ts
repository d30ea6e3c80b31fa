import { spawnSync } from 'node:child_process';

/**
 * Installs Debian packages for a test that needs them (Chromium, Postgres) on a machine without
 * them. Test files run in parallel and dpkg allows one install at a time, so every install here
 * waits for the others behind one lock file (`flock`); a second waiter then finds the package
 * installed and apt-get returns at once. Root runs apt-get itself, anyone else through `sudo -n`.
 * Returns a failure's text, or undefined when both steps succeeded.
 */
export function aptInstall(packages: string[]): string | undefined {
  const root = process.getuid?.() === 0;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update'], ['install', '-y', '--no-install-recommends', ...packages]]) {
    const command = ['flock', '/tmp/manifold-test-apt.lock', 'apt-get', ...args];
    const [bin, ...rest] = root ? command : ['sudo', '-n', ...command];
    const r = spawnSync(bin!, rest, { encoding: 'utf8', env, timeout: 900_000 });
    if (r.status !== 0) {
      const tail = (r.stderr || r.stdout || String(r.error ?? '')).slice(-2000);
      return `apt-get ${args.join(' ')} exited ${r.status}: ${tail}`;
    }
  }
  return undefined;
}
