import * as fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { silentLogger } from '../../src/lib/log.js';
import { createApp } from '../../src/server/http/app.js';

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

  // The 2026-07-28 edge: headers and per-request `_meta` fuzzed together, since the era, the
  // header/body agreement and the metadata checks all run before dispatch.
  const modernVersion = fc.oneof(
    fc.constantFrom('2026-07-28', '2025-11-25', '2025-03-26', 'v999.0.0', ''),
    fc.string({ maxLength: 20 }),
  );
  const modernMessage = fc.record(
    {
      jsonrpc: fc.constant('2.0'),
      id: fc.oneof(fc.integer(), fc.string({ maxLength: 10 })),
      method: fc.oneof(
        fc.constantFrom(
          'server/discover',
          'tools/list',
          'tools/call',
          'subscriptions/listen',
          'initialize',
          'ping',
        ),
        fc.string({ maxLength: 20 }),
      ),
      params: fc.record(
        {
          name: fc.oneof(fc.string({ maxLength: 20 }), fc.integer()),
          arguments: fc.jsonValue({ maxDepth: 3 }),
          cursor: fc.oneof(fc.string({ maxLength: 40 }), fc.integer()),
          notifications: fc.jsonValue({ maxDepth: 2 }),
          _meta: fc.oneof(
            fc.record(
              {
                'io.modelcontextprotocol/protocolVersion': modernVersion,
                'io.modelcontextprotocol/clientCapabilities': fc.jsonValue({ maxDepth: 2 }),
                'io.modelcontextprotocol/clientInfo': fc.jsonValue({ maxDepth: 2 }),
                'io.modelcontextprotocol/logLevel': fc.oneof(
                  fc.constantFrom('info', 'debug'),
                  fc.jsonValue({ maxDepth: 1 }),
                ),
                progressToken: fc.jsonValue({ maxDepth: 1 }),
              },
              { requiredKeys: [] },
            ),
            fc.jsonValue({ maxDepth: 2 }),
          ),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: [] },
  );
  const headerValue = fc.oneof(
    fc.string({ maxLength: 30 }).filter((v) => /^[\x20-\x7e]*$/.test(v)),
    fc.constantFrom(
      '=?base64?dG9vbHMvbGlzdA==?=',
      '=?base64?!!?=',
      '=?base64??=',
      'tools/list',
      'tools/call',
    ),
  );
  const modernHeaders = fc.record(
    {
      'mcp-protocol-version': modernVersion.filter((v) => /^[\x20-\x7e]*$/.test(v)),
      'mcp-method': headerValue,
      'mcp-name': headerValue,
      'mcp-param-region': headerValue,
      'mcp-session-id': headerValue,
      accept: fc.constantFrom(
        'application/json, text/event-stream',
        'application/json',
        'text/event-stream',
        '*/*',
      ),
    },
    { requiredKeys: [] },
  );

  it('never answers 5xx to fuzzed 2026-07-28 messages and headers, and always answers a JSON-RPC body or 202/405', async () => {
    await fc.assert(
      fc.asyncProperty(modernMessage, modernHeaders, async (m, headers) => {
        const r = await app.fetch(
          new Request('http://127.0.0.1/mcp', {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...headers },
            body: JSON.stringify(m),
          }),
        );
        expect(r.status).toBeLessThan(500);
        const type = r.headers.get('content-type') ?? '';
        if (type.includes('text/event-stream')) {
          // A listen stream stays open: read its first event (the acknowledgement), then close it.
          const reader = r.body!.getReader();
          const first = await reader.read();
          expect(new TextDecoder().decode(first.value)).toContain('"jsonrpc":"2.0"');
          await reader.cancel();
          return;
        }
        const text = await r.text();
        if (r.status !== 202 && r.status !== 405 && r.status !== 406)
          expect(JSON.parse(text).jsonrpc).toBe('2.0');
      }),
      { numRuns: 400 },
    );
  });
});
