import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Debian's Chromium: the browser the status page is tested in (#16). */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Installs Debian's `chromium` when it is missing, as root (or through passwordless sudo), and
 * throws a loud error when that cannot be done: a browser test that is skipped proves nothing.
 */
export function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  const root = process.getuid?.() === 0;
  const run = (args: string[]) =>
    root
      ? spawnSync(args[0]!, args.slice(1), { encoding: 'utf8', timeout: 600_000 })
      : spawnSync('sudo', ['-n', ...args], { encoding: 'utf8', timeout: 600_000 });
  const env = ['env', 'DEBIAN_FRONTEND=noninteractive'];
  const update = run([...env, 'apt-get', 'update']);
  const install = run([...env, 'apt-get', 'install', '-y', '--no-install-recommends', 'chromium']);
  if (!existsSync(CHROMIUM)) {
    const tail = (s: string | null | undefined) => (s ?? '').split('\n').slice(-15).join('\n');
    throw new Error(
      `${CHROMIUM} is missing and could not be installed (run as root, or allow sudo -n): ` +
        `apt-get update exited ${update.status}, apt-get install exited ${install.status}\n` +
        `${tail(install.stderr) || tail(update.stderr) || String(install.error ?? update.error ?? '')}`,
    );
  }
}

/** Headless Chromium with nothing that phones home; launch's own fresh profile directory. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
