import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import {
  type AnyHandle,
  connectLegacy,
  connectModern,
  type LegacyHandle,
  type ModernHandle,
} from '../helpers/clients.js';
import { EVERYTHING, eventually, FIXTURE, startTestGateway, type TestGateway } from '../helpers/harness.js';

// A config reload applied to a running gateway in this process (src/reload.ts), with real stdio
// servers and a client of each era listening for list_changed.
const ev = { command: process.execPath, args: [EVERYTHING, 'stdio'] };
const fx = { command: process.execPath, args: [FIXTURE] };

/** A config as the test gateway runs it (its port and in-memory store), from the raw file shape. */
function configOf(
  mcpServers: Record<string, unknown>,
  gateway: Record<string, unknown> = {},
  profiles?: Record<string, unknown>,
): Config {
  const result = parseConfigObject({ mcpServers, gateway, ...(profiles ? { profiles } : {}) }, process.env);
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  result.config.gateway.port = 0;
  result.config.gateway.store = false;
  return result.config;
}

async function names(h: AnyHandle): Promise<string[]> {
  const list = await h.client.listTools();
  return list.tools.map((t) => t.name).sort();
}

describe('reload: a new config applied to a running gateway', () => {
  let gw: TestGateway;
  let legacy: LegacyHandle;
  let modern: ModernHandle;
  const counts = () => [legacy.listChanged.count, modern.listChanged.count];

  beforeAll(async () => {
    gw = await startTestGateway({ mcpServers: { ev, fx } });
    [legacy, modern] = await Promise.all([
      connectLegacy(gw.url),
      connectModern(gw.url, undefined, { listen: true }),
    ]);
    await eventually(() => gw.gateway.health().status === 'ok', 'both upstreams ready');
    // The legacy client's GET stream (where its list_changed comes) is open once it is answered.
    await eventually(() => legacy.wire.some((r) => r.method === 'GET' && r.status === 200), 'the GET stream');
  }, 60_000);

  afterAll(async () => {
    await legacy?.close().catch(() => {});
    await modern?.close().catch(() => {});
    await gw?.stop();
  });

  it('the same config again changes nothing and announces nothing; an added server is announced once', async () => {
    const evBefore = gw.gateway.pool.get('ev')!;
    const fxBefore = gw.gateway.pool.get('fx')!;
    const same = await gw.gateway.reloader.apply(configOf({ ev, fx }));
    expect(same.plan).toMatchObject({
      added: [],
      removed: [],
      replaced: [],
      retuned: [],
      unchanged: ['ev', 'fx'],
    });
    expect(gw.gateway.pool.get('ev')).toBe(evBefore);
    expect(gw.gateway.pool.get('fx')).toBe(fxBefore);

    const added = await gw.gateway.reloader.apply(configOf({ ev, fx, fy: fx }));
    expect(added.plan.added).toEqual(['fy']);
    // Both clients hear of it, once: the reload before it was not announced (it would have come
    // first on the same streams).
    await eventually(() => counts().every((n) => n === 1), 'list_changed on both clients');
    expect(counts()).toEqual([1, 1]);
    for (const h of [legacy, modern]) expect(await names(h)).toContain('fy__sleep');
    // Unchanged servers kept their Upstream, so their connection and their stdio child.
    expect(gw.gateway.pool.get('ev')).toBe(evBefore);
    expect(gw.gateway.pool.get('fx')).toBe(fxBefore);
    const spawned = gw.logs.filter((l) => l.event === 'upstream.spawned');
    expect(spawned.filter((l) => l.server === 'ev')).toHaveLength(1);
    expect(spawned.filter((l) => l.server === 'fy')).toHaveLength(1);
  });

  it('a removed server leaves the catalog and closes; a retuned one keeps its connection', async () => {
    const fxBefore = gw.gateway.pool.get('fx')!;
    const fyBefore = gw.gateway.pool.get('fy')!;
    const before = counts();
    // A call in flight on the server about to be removed: it ends normally, then the server closes.
    const slow = modern.client.callTool({ name: 'fx__sleep', arguments: { ms: 800 } });
    await eventually(() => fxBefore.inflight === 1, 'the call reached fx');
    const out = await gw.gateway.reloader.apply(configOf({ ev, fy: { ...fx, tools: { deny: ['grow'] } } }));
    expect(fxBefore.state).toBe('ready');
    expect(out.plan).toMatchObject({ removed: ['fx'], retuned: ['fy'], unchanged: ['ev'] });
    await eventually(() => counts().every((n, i) => n === before[i]! + 1), 'list_changed on both clients');
    for (const h of [legacy, modern]) {
      const listed = await names(h);
      expect(listed.some((n) => n.startsWith('fx__'))).toBe(false);
      expect(listed).toContain('fy__sleep');
      expect(listed).not.toContain('fy__grow');
    }
    expect(gw.gateway.pool.get('fy')).toBe(fyBefore);
    expect(fyBefore.config.tools.deny).toEqual(['grow']);
    expect(((await slow).content as { text: string }[])[0]!.text).toBe('slept 800');
    await out.retired;
    expect(fxBefore.state).toBe('closed');
    expect(gw.logs.some((l) => l.event === 'config.reloaded' && (l.removed as string[]).includes('fx'))).toBe(
      true,
    );
  });

  it('a changed command replaces the upstream; a restart-only key keeps its running value and is named', async () => {
    const fyBefore = gw.gateway.pool.get('fy')!;
    const port = gw.gateway.config.gateway.port;
    const out = await gw.gateway.reloader.apply(
      configOf({ ev, fy: { ...fx, env: { FIXTURE_MODE: 'normal' } } }, { maxSessions: 5, pageSize: 7 }),
    );
    expect(out.plan).toMatchObject({ replaced: ['fy'], restart: ['maxSessions'], live: ['pageSize'] });
    const fyAfter = gw.gateway.pool.get('fy')!;
    expect(fyAfter).not.toBe(fyBefore);
    expect(fyAfter.state).toBe('ready');
    await out.retired;
    expect(fyBefore.state).toBe('closed');
    // The new one answers calls.
    const r = await legacy.client.callTool({ name: 'fy__sleep', arguments: { ms: 1 } });
    expect(r.isError).toBeFalsy();
    expect(gw.gateway.config.gateway.maxSessions).toBe(10_000);
    expect(gw.gateway.config.gateway.pageSize).toBe(7);
    expect(gw.gateway.config.gateway.port).toBe(port);
    const warned = gw.logs.find((l) => l.event === 'config.reload_restart_needed');
    expect(warned?.keys).toEqual(['maxSessions']);
  });

  it('profiles and the call limit follow the new config; a profile-only change is not announced on /mcp', async () => {
    const servers = { ev, fy: { ...fx, env: { FIXTURE_MODE: 'normal' } } };
    const before = counts();
    const limited = await gw.gateway.reloader.apply(
      configOf(servers, { callsPerMinute: 1 }, { p: { servers: ['ev'] } }),
    );
    expect(limited.plan).toMatchObject({ unchanged: ['ev', 'fy'], restart: [] });
    // pageSize: back to its default from the test before.
    expect(limited.plan.live.sort()).toEqual(['callsPerMinute', 'pageSize', 'profiles']);
    const inProfile = await connectLegacy(gw.url.replace(/\/mcp$/, '/mcp/p'));
    try {
      const listed = await names(inProfile);
      expect(listed.length).toBeGreaterThan(0);
      expect(listed.every((n) => n.startsWith('ev__'))).toBe(true);
    } finally {
      await inProfile.close();
    }
    // One call per minute now: the second is refused.
    await modern.client.callTool({ name: 'fy__sleep', arguments: { ms: 1 } });
    await expect(modern.client.callTool({ name: 'fy__sleep', arguments: { ms: 1 } })).rejects.toThrow(
      /rate limit/,
    );
    // And no limit again.
    await gw.gateway.reloader.apply(configOf(servers));
    await modern.client.callTool({ name: 'fy__sleep', arguments: { ms: 1 } });
    await modern.client.callTool({ name: 'fy__sleep', arguments: { ms: 1 } });
    // Neither reload changed what /mcp shows: the next announcement is the only one.
    await gw.gateway.reloader.apply(configOf({ ...servers, fz: fx }));
    await eventually(() => counts().every((n, i) => n === before[i]! + 1), 'list_changed for fz');
    expect(counts()).toEqual(before.map((n) => n + 1));
  });

  it("a replaced server takes its clients' resource subscriptions to its new connection", async () => {
    const servers = { ev, fy: { ...fx, env: { FIXTURE_MODE: 'normal' } }, fz: fx };
    const { resources } = await legacy.client.listResources();
    const uri = resources.find((r) => r.uri.includes('ev'))?.uri ?? resources[0]!.uri;
    await legacy.client.subscribeResource({ uri });
    const old = gw.gateway.pool.get('ev')!;
    await eventually(() => old.watched.size === 1, 'the subscription reached ev');
    const out = await gw.gateway.reloader.apply(
      configOf({ ...servers, ev: { ...ev, env: { RELOADED: '1' } } }),
    );
    expect(out.plan.replaced).toEqual(['ev']);
    const now = gw.gateway.pool.get('ev')!;
    expect(now).not.toBe(old);
    expect([...now.watched]).toEqual([...old.watched]);
    await out.retired;
  });
});

/**
 * 49.11: a reload that changes only `profiles` or catalog settings recuts every view, and the
 * first tools/list page a client was already served must not outlive the view it was cut from.
 */
describe('49.11: a reload that narrows a profile or changes catalog settings', () => {
  let gw: TestGateway;
  const servers = { fx };
  /** Every tool name a client is listed now (a modern client would answer from its cache). */
  const listed = async (h: AnyHandle): Promise<string[]> =>
    (h.era === 'legacy'
      ? (await h.client.listTools()).tools
      : (await h.client.listTools(undefined, { cacheMode: 'bypass' })).tools
    )
      .map((t) => t.name)
      .sort();

  beforeAll(async () => {
    gw = await startTestGateway({ mcpServers: servers, profiles: { p: { tools: ['fx__*'] } } });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
  });

  it('49.11: clients of both eras that listed before are served the narrowed profile at once', async () => {
    const at = gw.url.replace(/\/mcp$/, '/mcp/p');
    const clients = [await connectLegacy(at), await connectModern(at)];
    try {
      for (const h of clients) expect(await listed(h)).toContain('fx__tick');
      const out = await gw.gateway.reloader.apply(configOf(servers, {}, { p: { tools: ['fx__sleep'] } }));
      expect(out.plan).toMatchObject({ unchanged: ['fx'], live: ['profiles'] });
      for (const h of clients) {
        expect(await listed(h), h.era).toEqual(['fx__sleep']);
        await expect(h.client.callTool({ name: 'fx__tick', arguments: {} })).rejects.toThrow(/Unknown tool/);
      }
      // A client that connects only now is served the same.
      const late = await connectModern(at);
      try {
        expect(await listed(late)).toEqual(['fx__sleep']);
      } finally {
        await late.close();
      }
    } finally {
      for (const h of clients) await h.close();
    }
  });

  it('49.11: a change of gateway.catalog alone switches listed clients of both eras to search mode', async () => {
    const clients = [await connectLegacy(gw.url), await connectModern(gw.url)];
    try {
      for (const h of clients) expect(await listed(h)).toContain('fx__tick');
      const out = await gw.gateway.reloader.apply(
        configOf(servers, { catalog: { mode: 'search' } }, { p: { tools: ['fx__sleep'] } }),
      );
      // Profiles take their catalog settings from gateway.catalog, so they change with it.
      expect(out.plan).toMatchObject({ unchanged: ['fx'], restart: [] });
      expect(out.plan.live).toContain('catalog');
      for (const h of clients) {
        const now = await listed(h);
        expect(now, h.era).toContain('manifold__search_tools');
        expect(now, h.era).not.toContain('fx__tick');
      }
    } finally {
      for (const h of clients) await h.close();
    }
  });
});
