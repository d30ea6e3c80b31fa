import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { buildCatalog, type Catalog } from '../../src/aggregate/catalog.js';
import { CursorSealer } from '../../src/aggregate/cursor.js';
import { ListPages, type PageSource } from '../../src/aggregate/pages.js';
import { ProfileSet } from '../../src/aggregate/profiles.js';
import { ToolViews } from '../../src/aggregate/tool-views.js';
import { principalFromClaims } from '../../src/auth/grants.js';
import { parseConfigObject } from '../../src/config/load.js';
import type { AuthConfig } from '../../src/config/types.js';
import { silentLogger } from '../../src/lib/log.js';

/**
 * #18: tool views and first tools/list pages are shared by everyone who sees the same (tenant,
 * grants, cap, admin), whoever they are; cursors stay sealed to the caller. Pages are built from
 * each tool's JSON, serialized once, and read exactly as JSON.stringify of the page would.
 */
const auth = {
  issuer: 'https://issuer.example',
  audience: 'https://gateway.example/mcp',
  clockToleranceSeconds: 30,
  maxTokenLifetimeSeconds: 86_400,
  tokenTypes: ['JWT'],
  tenantClaim: 'org',
  tenants: {},
  authorizationServers: [],
  jwksCooldownSeconds: 30,
  jwksTimeoutMs: 5000,
  secret: 'x'.repeat(32),
} as unknown as AuthConfig;
const who = (sub: string, org: string, scope: string) => principalFromClaims({ sub, org, scope }, auth);

function setup(pageSize: number, maxChars?: number, maxNames?: number) {
  const parsed = parseConfigObject(
    { mcpServers: { a: { command: 'x' }, b: { command: 'x' } }, gateway: { pageSize } },
    {},
  );
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const config = parsed.config;
  const tool = (name: string): Tool => ({
    name,
    description: `the "${name}" tool \u2014 with text to escape\n`,
    inputSchema: { type: 'object', properties: { q: { type: 'string', description: 'ü' } } },
  });
  const catalog: Catalog = buildCatalog(
    [
      { server: config.servers[0]!, tools: ['one', 'two', 'three', 'four', 'five'].map(tool) },
      { server: config.servers[1]!, tools: ['six', 'seven'].map(tool) },
    ],
    1,
  );
  const tools = new ToolViews(() => catalog, new ProfileSet(config, silentLogger), maxNames);
  const source = {
    ready: Promise.resolve(),
    catalog,
    config,
    pool: { upstreams: [] },
  } as unknown as PageSource;
  const pages = new ListPages(source, tools, CursorSealer.create(), maxChars);
  return { catalog, tools, pages };
}

describe('shared views and pages (#18)', () => {
  it('two subjects with the same grants get one view; another tenant or grant set gets its own', () => {
    const { tools } = setup(100);
    const u1 = who('u1', 'acme', 'tools:a__* tools:b__six');
    const u2 = who('u2', 'acme', 'tools:b__six tools:a__*');
    expect(tools.entries(u1)).toBe(tools.entries(u2));
    const names = tools.entries(u1).map((e) => e.name);
    expect(names.filter((n) => !n.startsWith('manifold__')).sort()).toEqual([
      'a__five',
      'a__four',
      'a__one',
      'a__three',
      'a__two',
      'b__six',
    ]);
    const otherTenant = who('u1', 'globex', 'tools:a__* tools:b__six');
    expect(tools.entries(otherTenant)).not.toBe(tools.entries(u1));
    const fewer = who('u3', 'acme', 'tools:a__one');
    expect(tools.entries(fewer).map((e) => e.name)).not.toContain('a__two');
    // The narrower view did not replace the shared one.
    expect(tools.entries(u2).map((e) => e.name)).toEqual(names);
  });

  it('a page is byte for byte JSON.stringify of its tools and cursor', async () => {
    const { pages, tools } = setup(3);
    const u = who('u1', 'acme', 'tools:*');
    const visible = tools.entries(u).map((e) => e.tool);
    const first = await pages.listToolsJson(u, undefined);
    const parsed = JSON.parse(first) as { tools: unknown[]; nextCursor: string };
    expect(first).toBe(JSON.stringify({ tools: visible.slice(0, 3), nextCursor: parsed.nextCursor }));
    let cursor: string | undefined = parsed.nextCursor;
    let last = '';
    while (cursor) {
      last = await pages.listToolsJson(u, cursor);
      cursor = (JSON.parse(last) as { nextCursor?: string }).nextCursor;
    }
    const tail = visible.slice(Math.floor((visible.length - 1) / 3) * 3);
    expect(last).toBe(JSON.stringify({ tools: tail }));
  });

  it('a first page that ends in a cursor is never shared: each caller gets a cursor of its own', async () => {
    const { pages } = setup(3);
    const u1 = who('u1', 'acme', 'tools:*');
    const u2 = who('u2', 'acme', 'tools:*');
    const c1 = (JSON.parse(await pages.listToolsJson(u1, undefined)) as { nextCursor: string }).nextCursor;
    const c2 = (JSON.parse(await pages.listToolsJson(u2, undefined)) as { nextCursor: string }).nextCursor;
    expect(c1).not.toBe(c2);
    await expect(pages.listToolsJson(u2, c1)).rejects.toThrow(/cursor/);
    const toolsOf = async (u: typeof u1, c: string) =>
      (JSON.parse(await pages.listToolsJson(u, c)) as { tools: unknown[] }).tools;
    expect(await toolsOf(u2, c2)).toEqual(await toolsOf(u1, c1));
    // Asked again, each still gets its own (the cache kept them apart).
    const again = (JSON.parse(await pages.listToolsJson(u2, undefined)) as { nextCursor: string }).nextCursor;
    expect(again).toBe(c2);
  });

  it('a single-page list is the same for every subject with the same grants, and per grant set otherwise', async () => {
    const { pages } = setup(100);
    const a = await pages.listToolsJson(who('u1', 'acme', 'tools:a__*'), undefined);
    expect(await pages.listToolsJson(who('u2', 'acme', 'tools:a__*'), undefined)).toBe(a);
    const b = await pages.listToolsJson(who('u3', 'acme', 'tools:b__*'), undefined);
    const names = (json: string) =>
      (JSON.parse(json) as { tools: { name: string }[] }).tools.map((t) => t.name);
    const own = (json: string) =>
      names(json)
        .filter((n) => !n.startsWith('manifold__'))
        .sort();
    expect(own(a)).toEqual(['a__five', 'a__four', 'a__one', 'a__three', 'a__two']);
    expect(own(b)).toEqual(['b__seven', 'b__six']);
  });

  it('the page cache is bounded by its text, not only by its count: distinct grant sets cannot grow it past maxChars', async () => {
    const one = (await setup(100).pages.listToolsJson(who('u', 'acme', 'tools:*'), undefined)).length;
    const maxChars = one * 5;
    const { pages } = setup(100, maxChars);
    let most = 0;
    for (let i = 0; i < 12; i++) {
      const json = await pages.listToolsJson(who(`u${i}`, 'acme', `tools:* tools:none-${i}`), undefined);
      expect(json.length).toBe(one);
      const size = pages.cacheSize();
      expect(size.chars).toBeLessThanOrEqual(maxChars);
      expect(size.chars).toBe(size.pages * one);
      most = Math.max(most, size.pages);
    }
    expect(most).toBe(5);
    // A page over a quarter of the budget is served, not kept.
    const small = setup(100, one * 3);
    await small.pages.listToolsJson(who('u', 'acme', 'tools:*'), undefined);
    expect(small.pages.cacheSize()).toEqual({ pages: 0, chars: 0 });
  });

  it('the view cache is bounded by the names its views hold, not only by its count', () => {
    const all = setup(100).tools.entries(who('u', 'acme', 'tools:*')).length;
    const { tools } = setup(100, undefined, all * 3);
    let most = 0;
    for (let i = 0; i < 10; i++) {
      expect(tools.entries(who(`u${i}`, 'acme', `tools:* tools:none-${i}`))).toHaveLength(all);
      const size = tools.cacheSize();
      expect(size.names).toBeLessThanOrEqual(all * 3);
      expect(size.names).toBe(size.views * all);
      most = Math.max(most, size.views);
    }
    expect(most).toBe(3);
    // A view still in the cache is the same view.
    const last = who('u9', 'acme', 'tools:* tools:none-9');
    expect(tools.entries(last)).toBe(tools.entries(who('other', 'acme', 'tools:* tools:none-9')));
  });
});
