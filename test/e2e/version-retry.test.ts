import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectLegacy } from '../helpers/clients.js';
import { startTestGateway, type TestGateway } from '../helpers/harness.js';

// SEP-2575: a server that refuses the first MCP-Protocol-Version with UnsupportedProtocolVersion
// (-32022, HTTP 400) naming versions it serves gets the probe again with one of them, and the
// session uses what that second server/discover says (its capabilities), not a guess.
describe('server/discover retried with the version a refusal names', () => {
  let upstream: Server;
  let gw: TestGateway;
  const seen: { method: string; header: string | undefined; meta: unknown }[] = [];

  beforeAll(async () => {
    let refused = false;
    upstream = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => {
        body += d;
      });
      req.on('end', () => {
        const m = JSON.parse(body) as {
          id?: unknown;
          method: string;
          params?: { _meta?: Record<string, unknown> };
        };
        const header = req.headers['mcp-protocol-version'] as string | undefined;
        seen.push({
          method: m.method,
          header,
          meta: m.params?._meta?.['io.modelcontextprotocol/protocolVersion'],
        });
        const send = (status: number, payload: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(payload));
        };
        if (m.id === undefined) return void res.writeHead(202).end();
        if (!refused) {
          refused = true;
          return send(400, {
            jsonrpc: '2.0',
            id: m.id,
            error: {
              code: -32022,
              message: 'Unsupported protocol version',
              data: { supported: ['2026-07-28'], requested: header },
            },
          });
        }
        const result =
          m.method === 'server/discover'
            ? {
                supportedVersions: ['2026-07-28'],
                capabilities: { tools: {} },
                serverInfo: { name: 'picky', version: '1' },
              }
            : m.method === 'tools/list'
              ? { tools: [{ name: 'hello', inputSchema: { type: 'object' } }] }
              : m.method === 'tools/call'
                ? { content: [{ type: 'text', text: 'hi' }] }
                : {};
        send(200, { jsonrpc: '2.0', id: m.id, result: { resultType: 'complete', ...result } });
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    gw = await startTestGateway({
      mcpServers: { picky: { url: `http://127.0.0.1:${port}/mcp` } },
      gateway: { allowedHosts: [`127.0.0.1:${port}`] },
    });
  });
  afterAll(async () => {
    await gw?.stop();
    upstream?.close();
  });

  it('probes twice, then lists and calls the tool the discovered capabilities announce', async () => {
    const client = await connectLegacy(gw.url);
    try {
      const { tools } = await client.client.listTools();
      expect(tools.map((t) => t.name)).toEqual(['picky__hello']);
      const r = (await client.client.callTool({ name: 'picky__hello', arguments: {} })) as {
        content: { text: string }[];
      };
      expect(r.content[0]!.text).toBe('hi');
    } finally {
      await client.close();
    }
    const discovers = seen.filter((s) => s.method === 'server/discover');
    expect(discovers.length).toBeGreaterThanOrEqual(2);
    expect(discovers[1]).toEqual({ method: 'server/discover', header: '2026-07-28', meta: '2026-07-28' });
    // Never fell back to the 2025 handshake.
    expect(seen.some((s) => s.method === 'initialize')).toBe(false);
  });
});
