import * as fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/index.js';
import { Gateway } from '../../src/gateway.js';
import { silentLogger } from '../../src/log.js';
import { createApp } from '../../src/server/app.js';

// E6: fuzzed JSON-RPC through the real HTTP app (in memory, no upstreams needed).
describe('E6: fuzzed input', () => {
  let gateway: Gateway;
  let app: ReturnType<typeof createApp>;
  let session = '';

  beforeAll(async () => {
    const parsed = parseConfigObject({ mcpServers: { off: { command: 'x', disabled: true } } }, {});
    if (!parsed.ok) throw new Error('config');
    gateway = new Gateway({
      config: parsed.config,
      platform: { fetch, runtime: 'test', now: Date.now, log: silentLogger },
      version: 'test',
    });
    await gateway.start();
    app = createApp(gateway);
    const r = await app.fetch(
      new Request('http://127.0.0.1/mcp', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: {
            protocolVersion: '2025-11-25',
            capabilities: {},
            clientInfo: { name: 'f', version: '1' },
          },
        }),
      }),
    );
    session = r.headers.get('mcp-session-id') ?? '';
  });
  afterAll(async () => gateway?.close(0));

  const post = (body: string, withSession: boolean) =>
    app.fetch(
      new Request('http://127.0.0.1/mcp', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(withSession ? { 'mcp-session-id': session } : {}),
        },
        body,
      }),
    );

  const message = fc.record(
    {
      jsonrpc: fc.oneof(fc.constant('2.0'), fc.string()),
      id: fc.oneof(fc.integer(), fc.string(), fc.constant(null), fc.object()),
      method: fc.oneof(
        fc.constantFrom(
          'initialize',
          'ping',
          'tools/list',
          'tools/call',
          'notifications/cancelled',
          'resources/read',
        ),
        fc.string(),
      ),
      params: fc.oneof(
        fc.record(
          { name: fc.oneof(fc.string(), fc.integer()), arguments: fc.jsonValue(), cursor: fc.jsonValue() },
          {
            requiredKeys: [],
          },
        ),
        fc.jsonValue(),
      ),
    },
    { requiredKeys: [] },
  );

  it('never answers 5xx to structured garbage', async () => {
    await fc.assert(
      fc.asyncProperty(message, fc.boolean(), async (m, withSession) => {
        const r = await post(JSON.stringify(m), withSession);
        expect(r.status).toBeLessThan(500);
        await r.text();
      }),
      { numRuns: 300 },
    );
  });

  it('never answers 5xx to arbitrary bytes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 2000 }), fc.boolean(), async (s, withSession) => {
        const r = await post(s, withSession);
        expect(r.status).toBeLessThan(500);
        await r.text();
      }),
      { numRuns: 300 },
    );
  });
});
