import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureChromium, launchChromium } from '../helpers/browser.js';
import { type AnyHandle, connectLegacy, DRIFT } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { EVERYTHING, eventually, MEMORY, startTestGateway, type TestGateway } from '../helpers/harness.js';

/**
 * #52: the console in a real browser (Debian's Chromium driven by playwright-core), every flow with
 * real clicks: the catalog searched and a tool tried from a form built from its schema, the
 * approvals inbox, drift review then Accept, and servers added (with each config error shown by
 * path), edited and removed with confirmation. A hostile tool name and description stay inert
 * (I5), a tenant sees only its own view, and the page's CSP stays as strict as the status page's.
 */
const ISS = 'https://issuer.console';
const AUD = 'manifold-console';
const HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">';
const HOSTILE = 'Reads <script>window.__pwned=2</script><img src=x onerror="window.__pwned=3"> \u202etxt.exe';
type Obj = Record<string, unknown>;
const tool = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
});

describe('the console in Chromium (#52)', () => {
  let browser: Browser;
  let page: Page;
  let gw: TestGateway;
  let dir: string;
  let toolsFile: string;
  let admin: string;
  let tenant: string;
  let agent: AnyHandle;
  const pwned = (p: Page) => p.evaluate(() => (window as unknown as { __pwned?: number }).__pwned);

  beforeAll(async () => {
    ensureChromium();
    dir = mkdtempSync(join(tmpdir(), 'mf-console-'));
    toolsFile = join(dir, 'tools.json');
    writeFileSync(toolsFile, JSON.stringify([tool(HOSTILE_NAME, HOSTILE), tool('alpha', 'Alpha v1.')]));
    const issuer = await testIssuer(ISS, AUD);
    gw = await startTestGateway({
      mcpServers: {
        fx: { command: process.execPath, args: [DRIFT], env: { DRIFT_TOOLS_FILE: toolsFile } },
        ev: {
          command: process.execPath,
          args: [EVERYTHING, 'stdio'],
          risk: { 'get-sum': 'read' },
          approval: { ask: ['echo'], via: 'queue', timeoutSeconds: 1 },
        },
      },
      gateway: { drift: { recheckSeconds: 1 }, auth: { ...issuer.auth } },
    });
    admin = await issuer.mint({ scope: 'manifold:admin tools:*' }, 'ops');
    tenant = await issuer.mint({ scope: 'tools:ev__get-sum' }, 'acme');
    agent = await connectLegacy(gw.url, tenant);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.setDefaultTimeout(10_000);
    await page.goto(`${gw.url.replace(/\/mcp$/, '/')}#token=${admin}`);
    await page.locator('#catalog li.tool').first().waitFor();
  }, 120_000);

  afterAll(async () => {
    await agent?.close().catch(() => {});
    await browser?.close();
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('I5: a hostile tool name and description stay text, under a CSP as strict as the status page', async () => {
    const hostile = page.locator('#catalog li.tool', { hasText: 'Reads <script>' });
    await hostile.waitFor();
    const name = (await hostile.locator('.tool-name').textContent()) ?? '';
    expect(name).toMatch(/^fx__[A-Za-z0-9_-]+$/);
    expect(await hostile.locator('.tool-description').textContent()).toContain('<img src=x onerror=');
    // The gateway strips the bidi override from upstream text before any client sees it (C6).
    expect(await hostile.locator('.tool-description').textContent()).not.toContain('\u202e');
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('#catalog script').count()).toBe(0);
    expect(await pwned(page)).toBeUndefined();
    const res = await page.request.get(`${gw.url.replace(/\/mcp$/, '/')}console.js`);
    expect(res.headers()['content-security-policy']).toContain("script-src 'self'");
    const shell = await page.request.get(gw.url.replace(/\/mcp$/, '/'));
    expect(shell.headers()['content-security-policy']).toContain("default-src 'none'");
    expect(await shell.text()).not.toMatch(/<script>(?!<\/script>)/);
  });

  it('searches the catalog with the ranking of search mode, and tries a tool from a form built from its schema', async () => {
    await page.locator('#catalog-q').fill('sum two numbers');
    await page.locator('#catalog-search button').click();
    await eventually(
      async () => (await page.locator('#catalog li.tool .tool-name').first().textContent()) === 'ev__get-sum',
      'get-sum ranks first',
    );
    const row = page.locator('#catalog li.tool[data-tool="ev__get-sum"]');
    expect(await row.textContent()).toContain('risk read');
    await row.getByRole('button', { name: 'Try it' }).click();
    await page.locator('#try-fields [data-arg="a"]').fill('20');
    await page.locator('#try-fields [data-arg="b"]').fill('22');
    await page.locator('#try-run').click();
    await page.locator('#try-result').filter({ hasText: '42' }).waitFor();
    // Through the normal path: the call has its audit line, as the signed-in admin.
    await eventually(
      () =>
        gw.logs.some(
          (l) => l.event === 'audit.tools_call' && l.tool === 'ev__get-sum' && l.subject === 'ops',
        ),
      'the audit line',
    );
  });

  it("the approvals inbox: a queued call approved with a click runs on the agent's next call", async () => {
    const first = (await agent.client.callTool({ name: 'ev__get-sum', arguments: { a: 1, b: 1 } })) as Obj;
    expect(first.isError).not.toBe(true);
    const admins = await connectLegacy(gw.url, admin);
    try {
      const queued = (await admins.client.callTool({
        name: 'ev__echo',
        arguments: { message: 'from the agent' },
      })) as Obj;
      const id = String((queued._meta as Obj)['manifold/approvalId']);
      const item = page.locator(`#approvals li[data-approval="${id}"]`);
      await item.waitFor();
      expect(await item.locator('pre').textContent()).toContain('from the agent');
      await item.getByRole('button', { name: 'Approve' }).click();
      await item.waitFor({ state: 'detached' });
      const ran = (await admins.client.callTool({
        name: 'ev__echo',
        arguments: { message: 'from the agent' },
      })) as Obj;
      expect(JSON.stringify(ran.content)).toContain('Echo: from the agent');
    } finally {
      await admins.close();
    }
  });

  it('drift review: the diff, then Accept, and the tool is served again', async () => {
    writeFileSync(
      toolsFile,
      JSON.stringify([tool(HOSTILE_NAME, HOSTILE), tool('alpha', 'Alpha v2, changed.')]),
    );
    await page.getByRole('button', { name: 'Review fx' }).click();
    await eventually(
      async () => {
        await page.getByRole('button', { name: 'Review fx' }).click();
        return ((await page.locator('#review-diff').textContent()) ?? '').includes('Alpha v2, changed.');
      },
      'the diff shows the change',
      20_000,
    );
    await page.locator('#review-accept').click();
    await page.locator('#review-result').filter({ hasText: 'Accepted' }).waitFor();
    await eventually(async () => {
      await page.locator('#catalog-q').fill('');
      await page.locator('#catalog-search button').click();
      const text = (await page.locator('#catalog li.tool[data-tool="fx__alpha"]').textContent()) ?? '';
      return text.includes('Alpha v2, changed.') && !text.includes('held back by drift');
    }, 'the accepted definition is served');
    expect(await pwned(page)).toBeUndefined();
  });

  it('servers: errors shown by path, then added, edited, and removed after a confirming click', async () => {
    await page.locator('#server-name').fill('mem');
    await page
      .locator('#server-config')
      .fill(JSON.stringify({ command: process.execPath, args: [MEMORY], retry: 9 }));
    await page.locator('#server-check').click();
    await page.locator('#server-errors li[data-path="mcpServers.mem.retry"]').waitFor();
    await page.locator('#server-config').fill(JSON.stringify({ command: process.execPath, args: [MEMORY] }));
    await page.locator('#server-check').click();
    await page.locator('#server-result').filter({ hasText: 'Would be added' }).waitFor();
    expect(await page.locator('#server-errors li').count()).toBe(0);
    await page.locator('#server-save').click();
    await page.locator('#servers li[data-server="mem"]').waitFor();
    await page.locator('#servers li[data-server="mem"]').getByRole('button', { name: 'Edit' }).click();
    // The loaded config is pretty-printed; what the test typed before was not.
    await eventually(
      async () => ((await page.locator('#server-config').inputValue()) ?? '').includes('\n "command"'),
      'the config loads',
    );
    // As written through the API, not the gateway's normalized form, so it saves back unchanged.
    expect(JSON.parse(await page.locator('#server-config').inputValue())).toEqual({
      command: process.execPath,
      args: [MEMORY],
    });
    await page
      .locator('#server-config')
      .fill(JSON.stringify({ command: process.execPath, args: [MEMORY], retry: 2 }));
    await page.locator('#server-save').click();
    await page.locator('#server-result').filter({ hasText: 'Saved: retuned' }).waitFor();
    const remove = page.locator('#servers li[data-server="mem"]').getByRole('button', { name: 'Remove' });
    await remove.click();
    // One click only asks: the server is still there until the confirming click.
    await page
      .locator('#servers li[data-server="mem"]')
      .getByRole('button', { name: 'Confirm remove' })
      .waitFor();
    expect(
      (
        await page.request.get(`${gw.url.replace(/\/mcp$/, '')}/admin/servers/mem`, {
          headers: { authorization: `Bearer ${admin}` },
        })
      ).status(),
    ).toBe(200);
    await page
      .locator('#servers li[data-server="mem"]')
      .getByRole('button', { name: 'Confirm remove' })
      .click();
    await page.locator('#servers li[data-server="mem"]').waitFor({ state: 'detached' });
  });

  it('a tenant sees only its own catalog, and none of the admin sections', async () => {
    const theirs = await browser.newPage();
    try {
      await theirs.goto(`${gw.url.replace(/\/mcp$/, '/')}#token=${tenant}`);
      await theirs.locator('#catalog li.tool').first().waitFor();
      const names = await theirs.locator('#catalog li.tool .tool-name').allTextContents();
      expect(names).toEqual(['ev__get-sum']);
      expect(await theirs.locator('#approvals-section').isHidden()).toBe(true);
      expect(await theirs.locator('#servers-section').isHidden()).toBe(true);
    } finally {
      await theirs.close();
    }
  });
});
