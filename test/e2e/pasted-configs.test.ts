import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectLegacy, connectModern } from '../helpers/clients.js';
import { type Spawned, startEverythingHttp, startTestGateway, type TestGateway } from '../helpers/harness.js';

interface UpstreamHealth {
  name: string;
  state: string;
  transport: string;
  era?: string;
}

// Server entries pasted as other MCP clients write them (#16), against real server-everything
// processes on loopback: Cursor's {"url": ".../sse"} without a type (an HTTP+SSE server, reached
// after its streamable-HTTP initialize is refused), Windsurf's serverUrl and Cline's
// "streamableHttp" (a streamable-HTTP server).
describe('pasted configs: Cursor, Windsurf and Cline server entries', () => {
  let sse: Spawned;
  let http: Spawned;
  let gw: TestGateway;

  beforeAll(async () => {
    [sse, http] = await Promise.all([startEverythingHttp('sse'), startEverythingHttp('streamableHttp')]);
    gw = await startTestGateway({
      mcpServers: {
        cursor: { url: sse.url },
        windsurf: { serverUrl: http.url },
        cline: { type: 'streamableHttp', url: http.url },
      },
      gateway: { allowedHosts: ['127.0.0.1'] },
    });
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
    await Promise.all([sse?.stop(), http?.stop()]);
  });

  it('each entry connects over the transport its server speaks, and says which in /healthz', async () => {
    const health = await (await fetch(gw.url.replace('/mcp', '/healthz'))).json();
    const by = Object.fromEntries(health.upstreams.map((u: UpstreamHealth) => [u.name, u]));
    expect(by.cursor).toMatchObject({ state: 'ready', transport: 'sse', era: 'legacy' });
    expect(by.windsurf).toMatchObject({ state: 'ready', transport: 'streamable-http' });
    expect(by.cline).toMatchObject({ state: 'ready', transport: 'streamable-http' });
    const fallback = gw.logs.filter((l) => l.event === 'upstream.sse_fallback');
    expect(fallback.map((l) => l.server)).toEqual(['cursor']);
    expect(fallback[0]).toMatchObject({ status: expect.any(Number) });
    expect([400, 404, 405]).toContain(fallback[0]!.status);
  });

  it('a 2025-11-25 client lists and calls the SSE server found by fallback', async () => {
    const legacy = await connectLegacy(gw.url);
    try {
      const names = (await legacy.client.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['cursor__echo', 'windsurf__echo', 'cline__echo']));
      const r = await legacy.client.callTool({ name: 'cursor__echo', arguments: { message: 'from cursor' } });
      expect(JSON.stringify(r.content)).toContain('from cursor');
    } finally {
      await legacy.close();
    }
  });

  it('a 2026-07-28 client lists and calls the SSE server found by fallback', async () => {
    const modern = await connectModern(gw.url);
    try {
      const names = (await modern.client.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['cursor__echo', 'windsurf__echo', 'cline__echo']));
      const r = await modern.client.callTool({ name: 'cursor__echo', arguments: { message: 'modern here' } });
      expect(JSON.stringify(r.content)).toContain('modern here');
      const w = await modern.client.callTool({ name: 'windsurf__echo', arguments: { message: 'windsurf' } });
      expect(JSON.stringify(w.content)).toContain('windsurf');
    } finally {
      await modern.close();
    }
  });
});
