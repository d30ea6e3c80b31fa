import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureChromium, launchChromium } from '../helpers/browser.js';
import { type AnyHandle, connectLegacy, connectModern, DRIFT } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import {
  eventually,
  ROOT,
  type Spawned,
  startEverythingHttp,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

/**
 * The status page (#16) in a real browser (Debian's Chromium driven by playwright-core): it
 * loads with a token from the URL fragment, shows a quarantined tool's diff inert and escaped,
 * and shows an upstream down once it goes down. The screenshot is kept as a test artifact.
 */
const ISS = 'https://issuer.status-page';
const AUD = 'manifold-status-page';
const ARTIFACT = join(ROOT, '.manifold/artifacts/status-page.png');
const HOSTILE = 'Alpha v2: <img src=x onerror="window.__pwned=1"> also reads \u202etxt.exe';

const tool = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
});
type Obj = Record<string, unknown>;
const call = (h: AnyHandle, name: string, args: Obj) =>
  (h.client as unknown as { callTool(p: Obj): Promise<Obj> }).callTool({ name, arguments: args });

describe('status page in Chromium', () => {
  let browser: Browser;
  let page: Page;
  let gw: TestGateway;
  let web: Spawned;
  let dir: string;
  let toolsFile: string;
  let admin: string;
  const open: AnyHandle[] = [];

  beforeAll(async () => {
    ensureChromium();
    dir = mkdtempSync(join(tmpdir(), 'mf-status-page-'));
    toolsFile = join(dir, 'tools.json');
    writeFileSync(
      toolsFile,
      JSON.stringify([tool('alpha', 'Alpha v1: reads one file.'), tool('beta', 'Beta v1.')]),
    );
    web = await startEverythingHttp('streamableHttp');
    const issuer = await testIssuer(ISS, AUD);
    gw = await startTestGateway({
      mcpServers: {
        fx: { command: process.execPath, args: [DRIFT], env: { DRIFT_TOOLS_FILE: toolsFile } },
        web: { url: web.url, headers: { 'X-Api-Key': 'not-shown-anywhere-7b2c' } },
      },
      gateway: {
        allowedHosts: [`127.0.0.1:${web.port}`],
        drift: { recheckSeconds: 0 },
        auth: { ...issuer.auth },
      },
    });
    admin = await issuer.mint({ scope: 'manifold:admin tools:*' }, 'ops');
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  }, 900_000);

  afterAll(async () => {
    for (const h of open) await h.close().catch(() => {});
    await browser?.close();
    await gw?.stop();
    await web?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('asks for a token when it has none, refuses a bad one, and shows the view for a pasted one', async () => {
    await page.goto(gw.url.replace(/\/mcp$/, '/'));
    await page.locator('#login').waitFor({ state: 'visible' });
    expect(await page.locator('#content').isHidden()).toBe(true);
    // Its own context (own sessionStorage), so the fragment test below starts from nothing.
    const pasted = await browser.newPage();
    try {
      await pasted.goto(gw.url.replace(/\/mcp$/, '/'));
      await pasted.locator('#token').fill('not-a-token');
      await pasted.locator('#login button').click();
      await pasted.locator('#problem').filter({ hasText: 'The token was not accepted.' }).waitFor();
      await pasted.locator('#token').fill(admin);
      await pasted.locator('#login button').click();
      await pasted.locator('#upstreams tr[data-server="fx"]').waitFor();
      expect(await pasted.locator('#login').isHidden()).toBe(true);
      expect(await pasted.locator('#problem').isHidden()).toBe(true);
    } finally {
      await pasted.close();
    }
  });

  it('loads with a token from the fragment, which then leaves the address bar', async () => {
    const legacy = await connectLegacy(gw.url, admin);
    const modern = await connectModern(gw.url, admin);
    open.push(legacy, modern);
    await call(legacy, 'fx__beta', {});
    await call(modern, 'web__echo', { message: 'hello' });
    await page.goto(`${gw.url.replace(/\/mcp$/, '/')}#token=${admin}`);
    await page.locator('#upstreams tr[data-server="web"] .state').filter({ hasText: 'ready' }).waitFor();
    expect(await page.locator('#upstreams tr[data-server="fx"] .state').textContent()).toBe('ready');
    expect(new URL(page.url()).hash).toBe('');
    await page.locator('#calls tr[data-server="web"]').waitFor();
    expect(await page.locator('#config').textContent()).toContain('"X-Api-Key": "***"');
    expect(await page.content()).not.toContain('not-shown-anywhere-7b2c');
  });

  it("C6: shows a quarantined tool's diff, inert and with the bidi override escaped", async () => {
    writeFileSync(toolsFile, JSON.stringify([tool('alpha', HOSTILE), tool('beta', 'Beta v1.')]));
    const diff = page.locator('[data-drift-server="fx"] details[data-tool="alpha"] pre');
    await diff.waitFor({ timeout: 20_000 });
    const text = (await diff.textContent()) ?? '';
    expect(text).toContain('- Alpha v1: reads one file.');
    expect(text).toContain('+ Alpha v2: <img src=x onerror="window.__pwned=1"> also reads <U+202E>txt.exe');
    expect(text).not.toContain('\u202e');
    // Shown as text, never parsed as markup: no image element, and its handler never ran.
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('#drift-none').isHidden()).toBe(true);
    // And the commands that show and accept the change in a terminal.
    const how = (await page.locator('[data-drift-server="fx"] .how').textContent()) ?? '';
    expect(how).toContain('manifold drift fx');
    expect(how).toContain('manifold retrust fx');
  });

  it('F1: shows an upstream down once it goes down, on its next poll', async () => {
    await web.stop();
    // The gateway learns of it the way it does in service: the next request to it fails.
    await expect(call(open[0]!, 'web__echo', { message: 'anyone?' })).rejects.toThrow();
    const state = page.locator('#upstreams tr[data-server="web"] .state');
    await eventually(
      async () => !['ready', ''].includes(((await state.textContent()) ?? '').trim()),
      'the page shows web no longer ready',
      20_000,
    );
    expect(['backoff', 'failed', 'connecting']).toContain((await state.textContent())?.trim());
    expect(await page.locator('#upstreams tr[data-server="fx"] .state').textContent()).toBe('ready');
    expect(await page.locator('#overall').textContent()).toBe('degraded');
    mkdirSync(join(ROOT, '.manifold/artifacts'), { recursive: true });
    await page.screenshot({ path: ARTIFACT, fullPage: true });
  });
});
