import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { silentLogger } from '../../src/lib/log.js';
import { createApp } from '../../src/server/http/app.js';
import { CONFIG_KEY_LISTS } from '../helpers/config-keys.js';

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

// E6: fuzzed configs. Each run takes a config from the docs' own examples (every section appears
// in one) and changes it a few times at random places: a value replaced by anything, a key
// removed, a known key added. So the reader of every section sees a plausible config with wrong
// parts, where random JSON would rarely get past the top level.
describe('E6: fuzzed configs', () => {
  const keysOf = (name: string) => CONFIG_KEY_LISTS.get(name) ?? [];
  const keys = [...new Set([...CONFIG_KEY_LISTS.values()].flat())];

  /** The docs' JSON examples as whole configs: a fragment is put where its keys belong. */
  const seeds: unknown[] = [];
  const docs = resolve(dirname(fileURLToPath(import.meta.url)), '../../docs');
  for (const file of readdirSync(docs).filter((f) => f.endsWith('.md'))) {
    const text = readFileSync(join(docs, file), 'utf8');
    for (const [, block] of text.matchAll(/```json\n([\s\S]*?)```/g)) {
      let v: unknown;
      for (const candidate of [block!, `{${block}}`]) {
        try {
          v = JSON.parse(candidate);
          break;
        } catch {
          v = undefined;
        }
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) continue;
      const top = Object.keys(v);
      const all = (list: readonly string[]) => top.every((k) => list.includes(k));
      // A stub server where the example has none: "no servers configured" would hide the rest.
      const stub = { s: { command: 'node' } };
      if (top.some((k) => k === 'mcpServers' || k === 'gateway' || k === 'profiles')) {
        seeds.push({ mcpServers: stub, ...v });
        continue;
      }
      if (all(keysOf('SERVER_KEYS'))) {
        const http = top.some((k) => keysOf('HTTP_ONLY_KEYS').includes(k));
        seeds.push({ mcpServers: { s: { ...(http ? { url: 'https://up.example/mcp' } : stub.s), ...v } } });
      }
      if (all(keysOf('GATEWAY_KEYS'))) seeds.push({ mcpServers: stub, gateway: v });
      if (Object.values(v).every((x) => typeof x === 'object' && x !== null)) seeds.push({ mcpServers: v });
    }
  }

  const anything = fc.oneof(
    fc.constantFrom(null, true, 0, -1, 1.5, 1e308, '', '*', 'a__b', '${X}', '${', 'risk:write', '\u0000'),
    fc.jsonValue({ maxDepth: 2 }),
  );
  const change = fc.record({
    at: fc.nat(),
    op: fc.constantFrom('set', 'delete', 'add'),
    key: fc.constantFrom(...keys),
    value: anything,
  });
  type Change = typeof change extends fc.Arbitrary<infer T> ? T : never;

  /** Every object or array inside `root`, with root itself. */
  function containers(root: unknown): (Record<string, unknown> | unknown[])[] {
    const out: (Record<string, unknown> | unknown[])[] = [];
    const walk = (v: unknown) => {
      if (typeof v !== 'object' || v === null) return;
      out.push(v as Record<string, unknown>);
      for (const child of Object.values(v)) walk(child);
    };
    walk(root);
    return out;
  }

  function mutate(seed: unknown, changes: Change[]): unknown {
    const root = structuredClone(seed);
    for (const c of changes) {
      const all = containers(root);
      const target = all[c.at % all.length]!;
      const slots = Object.keys(target);
      const slot = slots.length > 0 ? slots[c.at % slots.length]! : undefined;
      if (c.op === 'add' && !Array.isArray(target)) target[c.key] = c.value;
      else if (slot === undefined) continue;
      // An array loses the element (JSON has no holes); an object loses the key.
      else if (c.op === 'delete' && Array.isArray(target)) target.splice(Number(slot), 1);
      else if (c.op === 'delete') delete (target as Record<string, unknown>)[slot];
      else (target as Record<string, unknown>)[slot] = c.value;
    }
    return root;
  }

  // Every ${VAR} the examples name is set, long enough for a secret, so they get past them.
  const env: Record<string, string> = {};
  for (const [, name] of JSON.stringify(seeds).matchAll(/\$\{([A-Z0-9_]+)\}/g)) env[name!] = 'v'.repeat(40);

  const platform = { fetch, runtime: 'test' as const, now: Date.now, log: silentLogger };

  it('every config becomes issues with a path and a message, or a gateway; never a throw', () => {
    expect(seeds.length).toBeGreaterThanOrEqual(25);
    let accepted = 0;
    fc.assert(
      fc.property(fc.nat(), fc.array(change, { minLength: 1, maxLength: 4 }), (pick, changes) => {
        const raw = mutate(seeds[pick % seeds.length], changes);
        const r = parseConfigObject(raw, env);
        if (r.ok) {
          // What the loader accepts, the gateway is built from without a surprise.
          new Gateway({ config: r.config, platform, version: 'test' });
          accepted++;
          return;
        }
        expect(r.errors.length).toBeGreaterThan(0);
        for (const e of r.errors) {
          expect(typeof e.path).toBe('string');
          expect(e.message.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 4000 },
    );
    // Some changes leave a valid config (a value the section accepts, an optional key removed).
    expect(accepted).toBeGreaterThan(100);
  });
});
