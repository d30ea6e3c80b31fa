import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Debian's Chromium: the browser the status page is tested in (#16). */
export const CHROMIUM = '/usr/bin/chromium';

/** Fails loudly when Chromium is missing: a browser test that is skipped proves nothing. */
export function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  throw new Error(`${CHROMIUM} is missing: run \`node test/services.mjs\` (npm test runs it first)`);
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
