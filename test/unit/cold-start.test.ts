import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/aggregate/catalog.js';
import { parseConfigObject } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { createJsonLogger, silentLogger } from '../../src/lib/log.js';
import type { Platform } from '../../src/platform.js';

// Upstreams over in-memory transports that answer one after another, 20 ms apart.
function staggeredPlatform(): Platform {
  let n = 0;
  return {
    fetch,
    runtime: 'test',
    now: Date.now,
    log: silentLogger,
    connectStdio: (spec): Transport => {
      const [client, server] = InMemoryTransport.createLinkedPair();
      const mcp = new McpServer({ name: spec.server, version: '1' });
      mcp.registerTool('t', { description: `tool of ${spec.server}` }, async () => ({ content: [] }));
      const delay = 20 * n++;
      const start = client.start.bind(client);
      client.start = async () => {
        await mcp.connect(server);
        await new Promise((r) => setTimeout(r, delay));
        await start();
      };
      return client;
    },
  };
}

describe('cold start', () => {
  it('a slow upstream does not hold the first tools/list past coldStartMs; it joins later with a catalog change', async () => {
    const parsed = parseConfigObject(
      {
        // Pinned to the handshake: no 3 s server/discover probe of a silent in-memory server.
        mcpServers: {
          fast: { command: 'x', protocol: '2025-11-25' },
          slow: { command: 'x', protocol: '2025-11-25' },
        },
        gateway: { coldStartMs: 200 },
      },
      {},
    );
    if (!parsed.ok) throw new Error('bad config');
    const lines: Record<string, unknown>[] = [];
    const log = createJsonLogger({ level: 'info', write: (l) => lines.push(JSON.parse(l)) });
    const platform: Platform = {
      fetch,
      runtime: 'test',
      now: Date.now,
      log,
      connectStdio: (spec): Transport => {
        const [client, server] = InMemoryTransport.createLinkedPair();
        const mcp = new McpServer({ name: spec.server, version: '1' });
        mcp.registerTool('t', { description: `tool of ${spec.server}` }, async () => ({ content: [] }));
        const start = client.start.bind(client);
        client.start = async () => {
          await mcp.connect(server);
          if (spec.server === 'slow') await new Promise((r) => setTimeout(r, 1200));
          await start();
        };
        return client;
      },
    };
    // The session layer is loaded on first use; loaded here, so the deadline measures connecting.
    await import('../../src/upstream/probe.js');
    const gateway = new Gateway({ config: parsed.config, platform, version: 't' });
    const published: Catalog[] = [];
    gateway.onCatalogChange((c) => published.push(c));
    try {
      const t0 = Date.now();
      await gateway.start();
      const waited = Date.now() - t0;
      expect(waited).toBeLessThan(1000);
      expect(gateway.catalog.entries.map((e) => e.name)).toEqual(['fast__t']);
      const partial = lines.find((l) => l.event === 'gateway.cold_start_partial');
      expect(partial).toMatchObject({ waitedMs: 200, waiting: ['slow'] });
      await gateway.settled();
      expect(gateway.catalog.entries.map((e) => e.name).sort()).toEqual(['fast__t', 'slow__t']);
      // The slow one's arrival changed the published catalog (what list_changed announces).
      expect(
        published
          .at(-1)!
          .entries.map((e) => e.name)
          .sort(),
      ).toEqual(['fast__t', 'slow__t']);
      expect(published.length).toBeGreaterThanOrEqual(2);
    } finally {
      await gateway.close(0);
    }
  });

  it('a gateway closed while it is still starting starts nothing afterwards (no spawn, no retry)', async () => {
    const servers = Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`s${i}`, { command: 'x' }]));
    const parsed = parseConfigObject({ mcpServers: servers }, {});
    if (!parsed.ok) throw new Error('bad config');
    let spawned = 0;
    const platform = staggeredPlatform();
    const connect = platform.connectStdio!;
    platform.connectStdio = (spec, ...rest) => {
      spawned++;
      return connect(spec, ...rest);
    };
    const gateway = new Gateway({ config: parsed.config, platform, version: 't' });
    // SIGTERM right after the port opened: close() runs before the first connection attempts.
    const started = gateway.start();
    await gateway.close();
    await started;
    // Waiting to see that nothing happens: no connection attempt starts after close().
    await new Promise((r) => setTimeout(r, 300));
    expect(spawned).toBe(0);
    expect(gateway.health().upstreams.map((u) => u.state)).toEqual(['closed', 'closed', 'closed']);
  });
  it('builds the catalog once, when every first attempt has settled, not once per upstream', async () => {
    const servers = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`s${i}`, { command: 'x' }]));
    const parsed = parseConfigObject({ mcpServers: servers }, {});
    if (!parsed.ok) throw new Error('config');
    const gateway = new Gateway({ config: parsed.config, platform: staggeredPlatform(), version: 't' });
    const published: Catalog[] = [];
    gateway.onCatalogChange((c) => published.push(c));
    try {
      await gateway.start();
      expect(published).toHaveLength(1);
      expect(published[0]!.entries.map((e) => e.name).sort()).toEqual([
        's0__t',
        's1__t',
        's2__t',
        's3__t',
        's4__t',
      ]);
      expect(gateway.catalog).toBe(published[0]);
      // After the start, a change is published at once again.
      await gateway.pool.get('s2')!.close();
      gateway.pool.get('s2')!.onChange();
      expect(published).toHaveLength(2);
      expect(published[1]!.entries.map((e) => e.name)).not.toContain('s2__t');
    } finally {
      await gateway.close();
    }
  });
});
