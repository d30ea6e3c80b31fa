import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { buildCatalog } from '../../src/aggregate/catalog.js';
import type { ServerConfig } from '../../src/config/types.js';

function server(name: string, over: Partial<ServerConfig> = {}): ServerConfig {
  return {
    name,
    type: 'stdio',
    command: 'x',
    args: [],
    env: {},
    headers: {},
    prefix: name,
    tools: { deny: [] },
    prompts: { deny: [] },
    resources: { deny: [] },
    timeoutMs: 1000,
    disabled: false,
    maxResultBytes: 65536,
    budgetTokens: 'off',
    protocol: 'auto',
    isolation: 'shared',
    maxInstances: 16,
    instanceIdleSeconds: 300,
    clientFeatures: { elicitation: true, sampling: false, roots: false },
    risk: [],
    trustAnnotations: false,
    approval: { preset: 'off', ask: [], deny: [], allow: [], timeoutSeconds: 120 },
    retry: 1,
    ...over,
  };
}
const tool = (name: string, description = name): Tool => ({
  name,
  description,
  inputSchema: { type: 'object' },
});

describe('buildCatalog', () => {
  it('orders by config, then upstream name, whatever order upstreams answer in', () => {
    const a = buildCatalog(
      [
        { server: server('b'), tools: [tool('z'), tool('a')] },
        { server: server('a'), tools: [tool('m')] },
      ],
      1,
    );
    expect(a.entries.map((e) => e.name)).toEqual(['b__a', 'b__z', 'a__m']);
    const again = buildCatalog(
      [
        { server: server('b'), tools: [tool('a'), tool('z')] },
        { server: server('a'), tools: [tool('m')] },
      ],
      2,
    );
    expect(again.signature).toBe(a.signature);
  });

  it('resolves an exposed name back to its server and original name exactly', () => {
    const c = buildCatalog([{ server: server('gh'), tools: [tool('create.issue'), tool('list')] }], 1);
    for (const e of c.entries) {
      expect(c.byName.get(e.name)).toBe(e);
      expect(e.server).toBe('gh');
      expect(e.tool.name).toBe(e.name);
    }
    expect(c.entries.map((e) => e.original).sort()).toEqual(['create.issue', 'list']);
  });

  it('applies tools.allow and tools.deny on upstream names; deny wins', () => {
    const c = buildCatalog(
      [
        {
          server: server('s', { tools: { allow: ['get_*', 'put'], deny: ['get_secret'] } }),
          tools: ['get_a', 'get_secret', 'put', 'drop'].map((n) => tool(n)),
        },
      ],
      1,
    );
    expect(c.entries.map((e) => e.original)).toEqual(['get_a', 'put']);
  });

  it('prefix overrides the server name, and prefix:false mounts unprefixed', () => {
    const c = buildCatalog(
      [
        { server: server('github', { prefix: 'gh' }), tools: [tool('issues')] },
        { server: server('local', { prefix: false }), tools: [tool('search')] },
      ],
      1,
    );
    expect(c.entries.map((e) => e.name)).toEqual(['gh__issues', 'search']);
  });

  it('an unprefixed collision keeps the first server and reports both', () => {
    const c = buildCatalog(
      [
        { server: server('one', { prefix: false }), tools: [tool('search')] },
        { server: server('two', { prefix: false }), tools: [tool('search')] },
      ],
      1,
    );
    expect(c.entries).toHaveLength(1);
    expect(c.entries[0]!.server).toBe('one');
    expect(c.collisions[0]).toMatchObject({
      name: 'search',
      kept: { server: 'one' },
      dropped: { server: 'two' },
    });
  });
});
