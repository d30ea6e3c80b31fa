import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { buildCatalog, narrowCatalog } from '../../src/aggregate/catalog.js';
import { ProfileSet } from '../../src/aggregate/profiles.js';
import { nameWords, ToolIndex } from '../../src/aggregate/search.js';
import { ToolViews } from '../../src/aggregate/tool-views.js';
import { principalFromClaims } from '../../src/auth/grants.js';
import { formatIssues, parseConfigObject } from '../../src/config/load.js';
import type { AuthConfig } from '../../src/config/types.js';
import { silentLogger } from '../../src/lib/log.js';

const stdio = { command: 'x' };

describe('profiles and catalog settings in the config (#17)', () => {
  it('reads profiles with their defaults from gateway.catalog', () => {
    const r = parseConfigObject(
      {
        mcpServers: { github: stdio, fs: stdio },
        gateway: { catalog: { mode: 'search', pin: ['github__get_me'] } },
        profiles: {
          coding: { servers: ['github'], tools: ['github__*'], budgetTokens: 500 },
          support: { catalog: { mode: 'full', maxTools: 40 } },
        },
      },
      {},
    );
    if (!r.ok) throw new Error(formatIssues(r.errors));
    expect(r.config.gateway.catalog).toEqual({
      mode: 'search',
      maxTools: 128,
      pin: ['github__get_me'],
      searchLimit: 10,
    });
    expect(r.config.profiles).toEqual([
      {
        name: 'coding',
        servers: ['github'],
        tools: ['github__*'],
        budgetTokens: 500,
        catalog: { mode: 'search', maxTools: 128, pin: ['github__get_me'], searchLimit: 10 },
      },
      { name: 'support', catalog: { mode: 'full', maxTools: 40, pin: ['github__get_me'], searchLimit: 10 } },
    ]);
  });

  it('every problem at once, with its path and a fix', () => {
    const r = parseConfigObject(
      {
        mcpServers: { github: stdio, filesystem: stdio },
        gateway: { catalog: { mode: 'lazy', searchLimit: 500 } },
        profiles: {
          'bad name!': {},
          ok: { servers: ['githb'], catalog: { mode: 'fuzzy' }, budgetTokens: -1, extra: true },
        },
      },
      {},
    );
    expect(r.ok).toBe(false);
    const text = r.ok ? '' : formatIssues(r.errors);
    expect(text).toContain('gateway.catalog.mode');
    expect(text).toContain('gateway.catalog.searchLimit');
    expect(text).toContain('profiles["bad name!"]');
    expect(text).toContain('profiles.ok.servers[0]');
    expect(text).toContain('did you mean "github"?');
    expect(text).toContain('profiles.ok.catalog.mode');
    expect(text).toContain('profiles.ok.budgetTokens');
    const warnings = r.ok ? [] : r.warnings;
    expect(warnings.some((w) => w.path === 'profiles.ok.extra')).toBe(true);
  });
});

describe('the search index', () => {
  const tool = (name: string, description: string, props: string[] = []): Tool => ({
    name,
    description,
    inputSchema: {
      type: 'object',
      properties: Object.fromEntries(props.map((p) => [p, { type: 'string' }])),
    },
  });
  const server = (name: string) =>
    ({
      name,
      prefix: name,
      tools: { deny: [] },
      budgetTokens: 'off',
      risk: [],
      trustAnnotations: false,
      approval: { preset: 'off', ask: [], deny: [], allow: [], timeoutSeconds: 120 },
    }) as unknown as Parameters<typeof buildCatalog>[0][number]['server'];

  const catalog = buildCatalog(
    [
      {
        server: server('gh'),
        tools: [
          tool('createIssue', 'Open a ticket in a repository.', ['repoName']),
          tool('list_pull_requests', 'Lists PRs.'),
        ],
      },
      { server: server('mail'), tools: [tool('send', 'Send an email to someone.')] },
    ],
    1,
  );

  it('splits names into words (camelCase, underscores, the server prefix)', () => {
    expect(nameWords('gh__createIssue')).toBe('gh create issue');
    expect(nameWords('list_pull-requests.v2')).toBe('list pull requests v2');
  });

  it('ranks by name, description and parameter names, within what the caller may see', () => {
    const index = new ToolIndex(catalog.entries);
    expect(index.search('create issue', 5, () => true)[0]?.name).toBe('gh__createIssue');
    expect(index.search('repo name', 5, () => true)[0]?.name).toBe('gh__createIssue');
    expect(index.search('pull request', 5, () => true)[0]?.name).toBe('gh__list_pull_requests');
    expect(index.search('email', 5, (n) => n !== 'mail__send')).toEqual([]);
    expect(index.search('send', 1, () => true)).toHaveLength(1);
  });

  it('a profile narrowed to tools without shortened schemas has no describe_tool', () => {
    const [issue, pulls, send] = catalog.entries;
    const describe = { ...send!, name: 'manifold__describe_tool', meta: 'describe_tool' as const };
    const full = { ...catalog, entries: [{ ...issue!, deferred: true }, pulls!, send!, describe] };
    const keepsDeferred = narrowCatalog(full, (n) => n.startsWith('gh__'));
    expect(keepsDeferred.byName.has('manifold__describe_tool')).toBe(true);
    const none = narrowCatalog(full, (n) => n === 'mail__send');
    expect(none.entries.map((e) => e.name)).toEqual(['mail__send']);
    expect(none.digest).not.toBe(full.digest);
  });
});

describe('49.9: each view ranks over its own tools', () => {
  const auth = { tenantClaim: 'org', tenants: {} } as unknown as AuthConfig;
  const who = (org: string, scope: string) => principalFromClaims({ sub: 'u', org, scope }, auth);
  const parsed = parseConfigObject(
    { mcpServers: { a: { command: 'x' }, b: { command: 'x' } }, gateway: { catalog: { mode: 'search' } } },
    {},
  );
  if (!parsed.ok) throw new Error(formatIssues(parsed.errors));
  const config = parsed.config;
  const tool = (name: string, description: string): Tool => ({
    name,
    description,
    inputSchema: { type: 'object', properties: {} },
  });
  const mine = [tool('one', 'Alpha widget.'), tool('two', 'Beta widget gadget.')];
  const theirs = (word: string) =>
    Array.from({ length: 20 }, (_, i) => tool(`r${i}`, `${word} report ${i}.`));
  const order = (hidden: Tool[], maxIndexed?: number) => {
    const catalog = buildCatalog(
      [
        { server: config.servers[0]!, tools: mine },
        { server: config.servers[1]!, tools: hidden },
      ],
      1,
    );
    const views = new ToolViews(() => catalog, new ProfileSet(config, silentLogger), undefined, maxIndexed);
    const acme = who('acme', 'tools:a__*');
    // The other tenant searches too, so an index of its own exists beside acme's.
    views.search(who('bolt', 'tools:b__*'), 'report');
    return views.search(acme, 'alpha beta').map((e) => e.name);
  };

  it('49.9: tools only another tenant sees never move a tenant’s order, cached or rebuilt', () => {
    const alone = order([]);
    expect(alone).toEqual(['a__one', 'a__two']);
    for (const maxIndexed of [undefined, 1]) {
      expect(order(theirs('Alpha'), maxIndexed)).toEqual(alone);
      expect(order(theirs('Beta'), maxIndexed)).toEqual(alone);
    }
  });
});
