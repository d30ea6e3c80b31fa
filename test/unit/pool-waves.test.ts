import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/load.js';
import { silentLogger } from '../../src/lib/log.js';
import type { Platform } from '../../src/platform.js';
import { UpstreamPool } from '../../src/upstream/pool.js';

// Workers allow six simultaneous subrequests: the pool connects in waves of platform.maxConcurrentConnects.
describe('connect fan-out', () => {
  async function run(maxConcurrentConnects: number | undefined) {
    let open = 0;
    let peak = 0;
    const platform: Platform = {
      fetch,
      runtime: 'test',
      now: Date.now,
      log: silentLogger,
      ...(maxConcurrentConnects ? { maxConcurrentConnects } : {}),
      connectStdio: (spec): Transport => {
        const [client, server] = InMemoryTransport.createLinkedPair();
        const mcp = new McpServer({ name: spec.server, version: '1' });
        mcp.registerTool('t', { description: 't' }, async () => ({ content: [] }));
        const start = client.start.bind(client);
        client.start = async () => {
          open++;
          peak = Math.max(peak, open);
          await mcp.connect(server);
          await new Promise((r) => setTimeout(r, 30));
          await start();
        };
        const close = client.close.bind(client);
        client.close = async () => close();
        // The connection counts as open until its first listing is done.
        const send = client.send.bind(client);
        client.send = async (m, o) => {
          if ('method' in m && m.method === 'tools/list') open--;
          return send(m, o);
        };
        return client;
      },
    };
    const servers = Object.fromEntries(Array.from({ length: 14 }, (_, i) => [`s${i}`, { command: 'x' }]));
    const parsed = parseConfigObject({ mcpServers: servers }, {});
    if (!parsed.ok) throw new Error('config');
    const pool = new UpstreamPool(parsed.config, { platform, log: silentLogger, clientVersion: 't' });
    await pool.start();
    const ready = pool.status().filter((s) => s.state === 'ready').length;
    await pool.close();
    return { peak, ready };
  }

  it('connects at most maxConcurrentConnects upstreams at once, in waves, and all of them', async () => {
    const { peak, ready } = await run(6);
    expect(ready).toBe(14);
    expect(peak).toBeLessThanOrEqual(6);
    expect(peak).toBeGreaterThan(1);
  });

  it('connects everything at once where the runtime sets no limit', async () => {
    const { peak, ready } = await run(undefined);
    expect(ready).toBe(14);
    expect(peak).toBe(14);
  });
});
