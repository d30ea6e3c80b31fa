import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureChromium, launchChromium } from '../helpers/browser.js';
import { DRIFT } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { freshDatabase } from '../helpers/postgres.js';

/**
 * #52: drift history in the console, in a real browser (Chromium driven by playwright-core). Two
 * instances share one Postgres store: a tool drifts, its history shows it held back, an Accept
 * clicked on one instance shows as accepted (by whom, under the digest of the review) in the
 * console, and in the other instance's history. A hostile tool name and description that drift
 * too stay text (I5).
 */
const ISS = 'https://issuer.console-drift';
const AUD = 'manifold-console-drift';
const HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">';
const HOSTILE = 'Reads <script>window.__pwned=2</script><img src=x onerror="window.__pwned=3">';
type Obj = Record<string, unknown>;
const tool = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
});

describe('drift history in the console (#52)', () => {
  let browser: Browser;
  let page: Page;
  const gateways: TestGateway[] = [];
  let dir: string;
  let toolsFile: string;
  let admin: string;
  const pwned = (p: Page) => p.evaluate(() => (window as unknown as { __pwned?: number }).__pwned);
  const origin = (gw: TestGateway) => new URL(gw.url).origin;
  const history = async (gw: TestGateway, query = '') => {
    const r = await fetch(`${origin(gw)}/admin/servers/fx/drift/history${query}`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(r.status).toBe(200);
    return ((await r.json()) as { history: Obj[] }).history;
  };
  /** Loads the console afresh, and opens fx__alpha's drift history (read when it opens). */
  const alphaHistory = async () => {
    await page.reload();
    const row = page.locator('#catalog li.tool[data-tool="fx__alpha"]');
    await row.waitFor();
    const details = row.locator('details.tool-history');
    await details.locator('summary').click();
    await details.locator('li').first().waitFor();
    return details;
  };

  beforeAll(async () => {
    ensureChromium();
    dir = mkdtempSync(join(tmpdir(), 'mf-console-drift-'));
    toolsFile = join(dir, 'tools.json');
    writeFileSync(toolsFile, JSON.stringify([tool(HOSTILE_NAME, HOSTILE), tool('alpha', 'Alpha v1.')]));
    const issuer = await testIssuer(ISS, AUD);
    const raw = {
      mcpServers: {
        fx: { command: process.execPath, args: [DRIFT], env: { DRIFT_TOOLS_FILE: toolsFile } },
      },
      gateway: {
        drift: { recheckSeconds: 1 },
        auth: { ...issuer.auth },
        store: { postgres: '${MANIFOLD_PG_URL}' },
      },
    };
    const env = { MANIFOLD_PG_URL: await freshDatabase('console_drift') };
    // One after the other, so the first records the baseline and the second finds it.
    gateways.push(await startTestGateway(raw, { env, trustPollMs: 200 }));
    gateways.push(await startTestGateway(raw, { env, trustPollMs: 200 }));
    admin = await issuer.mint({ scope: 'manifold:admin tools:*' }, 'ops');
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.setDefaultTimeout(10_000);
    await page.goto(`${origin(gateways[0]!)}/#token=${admin}`);
    await page.locator('#catalog li.tool[data-tool="fx__alpha"]').waitFor();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    for (const g of gateways) await g.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a trusted tool has no drift history', async () => {
    const details = await alphaHistory();
    await details.locator('li', { hasText: 'No drift recorded.' }).waitFor();
  });

  it('I5: a tool that drifts shows held back in its history, then accepted by the admin who clicked Accept', async () => {
    writeFileSync(
      toolsFile,
      JSON.stringify([tool(HOSTILE_NAME, `${HOSTILE} Changed.`), tool('alpha', 'Alpha v2, changed.')]),
    );
    await eventually(
      async () => {
        await page.locator('#catalog-search button').click();
        const row = page.locator('#catalog li.tool[data-tool="fx__alpha"]');
        return ((await row.textContent()) ?? '').includes('held back by drift');
      },
      'the catalog shows alpha held back',
      20_000,
    );
    const before = await alphaHistory();
    expect(await before.locator('li.drift-event[data-kind="quarantined"]').count()).toBe(1);
    const held = page.locator(
      '#catalog li.tool[data-tool="fx__alpha"] li.drift-event[data-kind="quarantined"]',
    );
    expect(await held.textContent()).toMatch(
      /held back: changed since trusted · \d{4}-\d\d-\d\dT.* · fingerprint [0-9a-f]{16}/,
    );
    // Both instances verified the same change; the store holds it once.
    await eventually(async () => (await history(gateways[1]!, '?tool=alpha')).length === 1, 'one event');

    // The review shows the server's history, the hostile name among it, as text.
    await page.getByRole('button', { name: 'Review fx' }).click();
    const hostile = page.locator('#review-history li.drift-event', { hasText: 'onerror=' });
    await hostile.waitFor();
    expect(await hostile.locator('.drift-tool').textContent()).toBe(`${HOSTILE_NAME} `);
    await eventually(
      async () => ((await page.locator('#review-diff').textContent()) ?? '').includes('Alpha v2, changed.'),
      'the diff is shown',
    );
    await page.locator('#review-accept').click();
    await page.locator('#review-result').filter({ hasText: 'Accepted' }).waitFor();
    await page
      .locator('#review-history li.drift-event[data-kind="accepted"]', { hasText: 'alpha' })
      .waitFor();

    const details = await alphaHistory();
    const accepted = details.locator('li.drift-event[data-kind="accepted"]');
    await accepted.waitFor();
    expect(await accepted.textContent()).toMatch(/accepted by ops · .* · review [0-9a-f]{16}/);
    // Newest first: the accept above the hold.
    expect(
      await details
        .locator('li.drift-event')
        .evaluateAll((els) => els.map((e) => e.getAttribute('data-kind'))),
    ).toEqual(['accepted', 'quarantined']);

    // The other instance reads the same history from the store.
    const events = await history(gateways[1]!, '?tool=alpha');
    expect(events).toEqual([
      expect.objectContaining({ tool: 'alpha', kind: 'accepted', by: 'ops', digest: expect.any(String) }),
      expect.objectContaining({ tool: 'alpha', kind: 'quarantined' }),
    ]);
    expect(events[0]!.fingerprint).toBe(events[1]!.fingerprint);
    expect(await page.locator('img').count()).toBe(0);
    expect(await pwned(page)).toBeUndefined();
  });

  it('the history route refuses a bad limit and an unknown server, as documented', async () => {
    const gw = gateways[0]!;
    const ask = (path: string) =>
      fetch(`${origin(gw)}${path}`, { headers: { authorization: `Bearer ${admin}` } }).then((r) => r.status);
    expect(await ask('/admin/servers/fx/drift/history?limit=0')).toBe(400);
    expect(await ask('/admin/servers/nope/drift/history')).toBe(404);
    expect(await history(gw, '?limit=1')).toHaveLength(1);
  });
});
