import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFERENCE, startReferenceHttp } from '../helpers/clients.js';
import { startTestGateway, type TestGateway } from '../helpers/harness.js';
import { legacySession, sseMessages } from '../helpers/legacy.js';
import { modernMeta, modernRequest } from '../helpers/modern.js';

/**
 * Logging through the gateway (spec 2025-11-25 and 2026-07-28: server/utilities/logging): an
 * upstream's `notifications/message` reaches the client on the stream of the request it belongs
 * to, tagged with the server's name, at the level the client asked for, and never reaches a
 * request that did not ask.
 */
async function sessionAt(url: string, level?: string): Promise<Record<string, string>> {
  const headers = await legacySession(url);
  if (level) {
    const r = await fetch(url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'logging/setLevel', params: { level } }),
    });
    expect((await r.json()).result).toEqual({});
  }
  return headers;
}

describe('log messages follow the request that asked for them', () => {
  let gw: TestGateway;
  let refHttp: Awaited<ReturnType<typeof startReferenceHttp>>;

  beforeAll(async () => {
    refHttp = await startReferenceHttp();
    gw = await startTestGateway({
      mcpServers: {
        rs: { command: process.execPath, args: [REFERENCE, 'stdio'] },
        rh: { url: refHttp.url },
        // The same fixture spoken to in its legacy era, over stdio and HTTP.
        ls: { command: process.execPath, args: [REFERENCE, 'stdio'], protocol: '2025-11-25' },
        lh: { url: refHttp.url, protocol: '2025-11-25' },
      },
      gateway: { allowedHosts: [`127.0.0.1:${refHttp.port}`] },
    });
  });
  afterAll(async () => {
    await gw?.stop();
    await refHttp?.stop();
  });

  const kinds: Record<string, string> = {
    rs: 'modern stdio',
    rh: 'modern HTTP',
    ls: 'legacy stdio',
    lh: 'legacy HTTP',
  };
  it('the upstreams speak the eras the test means', () => {
    const eras = Object.fromEntries(gw.gateway.health().upstreams.map((u) => [u.name, u.era]));
    expect(eras).toEqual({ rs: 'modern', rh: 'modern', ls: 'legacy', lh: 'legacy' });
  });

  for (const server of Object.keys(kinds)) {
    it(`modern client, ${kinds[server]} upstream: logLevel in _meta brings the messages on the request's stream, tagged with the server`, async () => {
      const r = await modernRequest(gw.url, 'tools/call', {
        name: `${server}__test_tool_with_logging`,
        arguments: {},
        _meta: { ...modernMeta(), 'io.modelcontextprotocol/logLevel': 'info' },
      });
      const logs = r.messages.filter((m) => m.method === 'notifications/message');
      expect(logs.map((m) => (m.params as { data: unknown }).data)).toEqual([
        'Tool execution started',
        'Tool processing data',
        'Tool execution completed',
      ]);
      for (const m of logs) expect((m.params as { logger: string }).logger).toBe(server);
      expect(JSON.stringify(r.body.result)).toContain('sent 3 info messages');
    });

    it(`modern client, ${kinds[server]} upstream: without logLevel, no message, and a plain JSON answer`, async () => {
      const r = await modernRequest(gw.url, 'tools/call', {
        name: `${server}__test_tool_with_logging`,
        arguments: {},
      });
      expect(r.headers.get('content-type')).toContain('application/json');
      expect(r.messages.filter((m) => m.method === 'notifications/message')).toEqual([]);
    });

    it(`legacy client, ${kinds[server]} upstream: logging/setLevel on the session brings them; a higher level filters them out`, async () => {
      const call = async (headers: Record<string, string>) => {
        const r = await fetch(gw.url, {
          method: 'POST',
          headers,
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 9,
            method: 'tools/call',
            params: { name: `${server}__test_tool_with_logging`, arguments: {} },
          }),
        });
        const text = await r.text();
        return r.headers.get('content-type')?.includes('event-stream')
          ? sseMessages(text)
          : [JSON.parse(text)];
      };
      const info = (await call(await sessionAt(gw.url, 'info'))).filter(
        (m) => m.method === 'notifications/message',
      );
      expect(info).toHaveLength(3);
      expect((info[0]!.params as { logger: string }).logger).toBe(server);
      const errorOnly = await call(await sessionAt(gw.url, 'error'));
      expect(errorOnly.filter((m) => m.method === 'notifications/message')).toEqual([]);
      const none = await call(await sessionAt(gw.url));
      expect(none.filter((m) => m.method === 'notifications/message')).toEqual([]);
    });
  }

  it('two calls in flight on one stdio upstream: a message that cannot be attributed reaches neither', async () => {
    const asks = { ...modernMeta(), 'io.modelcontextprotocol/logLevel': 'debug' };
    const [a, b] = await Promise.all([
      modernRequest(gw.url, 'tools/call', { name: 'rs__test_tool_with_logging', arguments: {}, _meta: asks }),
      modernRequest(gw.url, 'tools/call', { name: 'rs__test_tool_with_logging', arguments: {}, _meta: asks }),
    ]);
    const logs = (r: typeof a) => r.messages.filter((m) => m.method === 'notifications/message').length;
    // While both run, neither gets the other's lines; each may get those sent while it ran alone.
    expect(logs(a) + logs(b)).toBeLessThan(6);
    expect(a.body.result).toBeDefined();
    expect(b.body.result).toBeDefined();
  });
});
