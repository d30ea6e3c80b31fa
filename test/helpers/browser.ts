import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { aptInstall } from './apt.js';

/** Debian's Chromium: the browser the status page is tested in (#16). */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Installs Debian's `chromium` when it is missing, as root (or through passwordless sudo), and
 * throws a loud error when that cannot be done: a browser test that is skipped proves nothing.
 */
export function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  const failed = aptInstall(['chromium']);
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing and could not be installed (run as root, or allow sudo -n): ${failed ?? 'apt-get succeeded, but the binary did not appear'}`,
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
