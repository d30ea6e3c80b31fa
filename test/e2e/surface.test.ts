import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern, DRIFT, REFERENCE } from '../helpers/clients.js';
import { everythingStdio, memoryStdio, stdioServer, testIssuer } from '../helpers/factories.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { modernListen } from '../helpers/modern.js';

/**
 * Prompts, resources, templates and completion through the gateway, for clients of both eras, in
 * front of legacy (server-everything, drift-server) and modern (the reference fixture) upstreams,
 * under the same policy as tools: filters, grants, caps, bounds on upstream text, and drift.
 */
type Obj = Record<string, unknown>;

const ISS = 'https://issuer.surface';
const AUD = 'manifold-surface';
const BIDI = '\u202e';

async function listAll(
  h: AnyHandle,
  method: 'tools' | 'prompts' | 'resources' | 'templates',
): Promise<Obj[]> {
  const out: Obj[] = [];
  let cursor: string | undefined;
  do {
    const c = h.client as unknown as Record<string, (p?: Obj) => Promise<Obj>>;
    const fn =
      method === 'tools'
        ? 'listTools'
        : method === 'prompts'
          ? 'listPrompts'
          : method === 'resources'
            ? 'listResources'
            : 'listResourceTemplates';
    const page = await c[fn]!.call(h.client, cursor ? { cursor } : {});
    const field = method === 'templates' ? 'resourceTemplates' : method;
    out.push(...(page[field] as Obj[]));
    cursor = page.nextCursor as string | undefined;
  } while (cursor);
  return out;
}

const call = (h: AnyHandle, fn: 'getPrompt' | 'readResource' | 'complete', params: Obj) =>
  (h.client as unknown as Record<string, (p: Obj) => Promise<Obj>>)[fn]!.call(h.client, params);

async function failure(p: Promise<unknown>): Promise<{ code?: number; message: string }> {
  try {
    await p;
  } catch (e) {
    return { code: (e as { code?: number }).code, message: String((e as Error).message) };
  }
  throw new Error('expected a failure');
}

describe('the MCP surface beyond tools, in both eras', () => {
  let gw: TestGateway;
  let dir: string;
  let surfaceFile: string;
  let toolsFile: string;
  let memoryFile: string;
  let token: (scope: string) => Promise<string>;
  const clients: AnyHandle[] = [];
  const writeSurface = (o: Obj) => writeFileSync(surfaceFile, JSON.stringify(o));
  const baseSurface = {
    prompts: [
      {
        name: 'review',
        description: `Review the code ${BIDI}carefully`,
        arguments: [{ name: 'lang', required: true }],
      },
      { name: 'secret_prompt', description: 'denied by config' },
    ],
    resources: [
      // The same URI as one of server-everything's: the second server in config order is rewritten.
      { uri: 'demo://resource/static/document/features.md', name: 'features (drift)' },
      { uri: 'file:///big.txt', name: 'big' },
      { uri: 'file:///hidden/x', name: 'denied by config' },
    ],
    resourceTemplates: [
      { uriTemplate: 'demo://resource/dynamic/text/{resourceId}', name: 'shadowed template' },
    ],
    contents: {
      'file:///big.txt': 'x'.repeat(5000),
      'demo://resource/static/document/features.md': 'drift features',
      'file:///hidden/x': 'HIDDEN CONTENT',
    },
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mf-surface-'));
    surfaceFile = join(dir, 'surface.json');
    toolsFile = join(dir, 'tools.json');
    memoryFile = join(dir, 'memory.jsonl');
    writeFileSync(toolsFile, '[]');
    writeSurface(baseSurface);
    const issuer = await testIssuer(ISS, AUD, { expiresIn: '1h' });
    token = (scope) => issuer.mint({ scope }, `user-${scope.length}`);
    gw = await startTestGateway({
      mcpServers: {
        ev: everythingStdio(),
        ref: stdioServer(REFERENCE, ['stdio']),
        // The same fixture in its legacy era: its URIs collide with ref's, so they are rewritten.
        rl: stdioServer(REFERENCE, ['stdio'], {
          protocol: '2025-11-25',
          tools: { allow: ['test_trigger_resource_update'] },
        }),
        d: stdioServer(DRIFT, [], {
          env: { DRIFT_TOOLS_FILE: toolsFile, DRIFT_SURFACE_FILE: surfaceFile },
          prompts: { deny: ['secret_*'] },
          resources: { deny: ['file:///hidden/*'] },
          maxResultBytes: 1024,
        }),
        // Tools only: it declares neither prompts nor resources.
        mem: memoryStdio({ env: { MEMORY_FILE_PATH: memoryFile } }),
      },
      gateway: { pageSize: 4, auth: issuer.auth },
    });
    const all = await token('tools:* prompts:* resources:*');
    clients.push(await connectLegacy(gw.url, all), await connectModern(gw.url, all));
  });

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await gw?.stop();
  });

  const each = (name: string, fn: (h: AnyHandle) => Promise<void>) => {
    it(`legacy client: ${name}`, () => fn(clients[0]!));
    it(`modern client: ${name}`, () => fn(clients[1]!));
  };

  each(
    'prompts from every upstream, under qualified names, in config order, paged; filters and bounds applied',
    async (h) => {
      const prompts = await listAll(h, 'prompts');
      const names = prompts.map((p) => p.name);
      expect(names).toEqual(
        expect.arrayContaining(['ev__simple-prompt', 'ref__test_simple_prompt', 'd__review']),
      );
      expect(names).not.toContain('d__secret_prompt');
      expect(names.indexOf('ev__simple-prompt')).toBeLessThan(names.indexOf('ref__test_simple_prompt'));
      const review = prompts.find((p) => p.name === 'd__review')!;
      expect(review.description).toBe('Review the code carefully');
      expect(review.arguments).toEqual([{ name: 'lang', required: true }]);
    },
  );

  each(
    'a tools-only server (server-memory) adds tools and nothing else; the other lists are whole',
    async (h) => {
      const tools = (await listAll(h, 'tools')).map((t) => t.name as string);
      expect(tools).toEqual(expect.arrayContaining(['mem__create_entities', 'mem__read_graph']));
      const prompts = (await listAll(h, 'prompts')).map((p) => p.name as string);
      const resources = (await listAll(h, 'resources')).map((r) => r.uri as string);
      expect(prompts.some((n) => n.startsWith('mem__'))).toBe(false);
      expect(prompts).toContain('ev__simple-prompt');
      expect(resources).toContain('demo://resource/static/document/features.md');
      await expect(call(h, 'getPrompt', { name: 'mem__anything' })).rejects.toThrow(
        /Unknown prompt|not found|Invalid/i,
      );
    },
  );

  each('prompts/get reaches the upstream under its own name, with the arguments', async (h) => {
    const r = await call(h, 'getPrompt', { name: 'ev__args-prompt', arguments: { city: 'Paris' } });
    expect(JSON.stringify(r.messages)).toContain('Paris');
    const modern = await call(h, 'getPrompt', {
      name: 'ref__test_prompt_with_arguments',
      arguments: { arg1: 'a', arg2: 'b' },
    });
    expect(JSON.stringify(modern.messages)).toContain('a');
    expect((r as Obj).resultType).toBeUndefined();
  });

  each(
    'resources and templates from every upstream; a URI published twice is rewritten for the later server, keeping its scheme',
    async (h) => {
      const resources = await listAll(h, 'resources');
      const uris = resources.map((r) => r.uri as string);
      expect(uris).toContain('demo://resource/static/document/features.md');
      expect(uris).toContain('demo://d.resource/static/document/features.md');
      expect(uris).toContain('file:///big.txt');
      expect(uris).not.toContain('file:///hidden/x');
      const templates = (await listAll(h, 'templates')).map((t) => t.uriTemplate);
      expect(templates).toEqual(
        expect.arrayContaining([
          'demo://resource/dynamic/text/{resourceId}',
          'demo://d.resource/dynamic/text/{resourceId}',
        ]),
      );
    },
  );

  each(
    'reads route by listing, by template, and by rewritten namespace, and answer with the URI the client used',
    async (h) => {
      const first = await call(h, 'readResource', { uri: 'demo://resource/static/document/features.md' });
      expect(JSON.stringify(first.contents)).toContain('Everything Server');
      const second = await call(h, 'readResource', { uri: 'demo://d.resource/static/document/features.md' });
      expect(second.contents).toEqual([
        {
          uri: 'demo://d.resource/static/document/features.md',
          mimeType: 'text/plain',
          text: 'drift features',
        },
      ]);
      const templated = await call(h, 'readResource', { uri: 'demo://resource/dynamic/text/7' });
      expect(JSON.stringify(templated.contents)).toContain('Resource 7');
      const shadow = await call(h, 'readResource', { uri: 'demo://d.resource/dynamic/text/7' });
      expect((shadow.contents as Obj[])[0]).toMatchObject({
        uri: 'demo://d.resource/dynamic/text/7',
        text: 'read demo://resource/dynamic/text/7',
      });
      const modern = await call(h, 'readResource', { uri: 'test://static-text' });
      expect(JSON.stringify(modern.contents)).toContain('static text resource');
    },
  );

  each('an unknown, filtered or invisible URI is "resource not found", the same every way', async (h) => {
    const code = h.era === 'modern' ? -32602 : -32002;
    // The last one names the denied URI in d's rewritten namespace: the filter still applies.
    for (const uri of ['nope://x', 'file:///hidden/x', 'file://d./hidden/x']) {
      const e = await failure(call(h, 'readResource', { uri }));
      expect(e.code, uri).toBe(code);
      expect(e.message).toContain('Resource not found');
    }
  });

  each('resources/read and prompts/get answers are capped with a marker', async (h) => {
    const big = await call(h, 'readResource', { uri: 'file:///big.txt' });
    expect(JSON.stringify(big).length).toBeLessThan(1400);
    expect(JSON.stringify(big.contents)).toContain('[… truncated:');
    expect((big._meta as Obj)['manifold/truncated']).toBe(true);
    const prompt = await call(h, 'getPrompt', { name: 'd__review', arguments: { lang: 'x'.repeat(3000) } });
    expect(JSON.stringify(prompt.messages)).toContain('[… truncated:');
  });

  each('completion routes by the prompt or the template it names', async (h) => {
    const byPrompt = await call(h, 'complete', {
      ref: { type: 'ref/prompt', name: 'ev__completable-prompt' },
      argument: { name: 'department', value: 'E' },
    });
    expect((byPrompt.completion as Obj).values).toContain('Engineering');
    const byTemplate = await call(h, 'complete', {
      ref: { type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' },
      argument: { name: 'resourceId', value: '1' },
    });
    expect(Array.isArray((byTemplate.completion as Obj).values)).toBe(true);
  });

  it('grants scope prompts and resources per kind, in both eras; bare tool grants do not reach them', async () => {
    const narrow = await token('tools:ev__echo prompts:ev__args-* resources:ev__demo://resource/static/*');
    for (const h of [await connectLegacy(gw.url, narrow), await connectModern(gw.url, narrow)]) {
      try {
        expect((await listAll(h, 'prompts')).map((p) => p.name)).toEqual(['ev__args-prompt']);
        const uris = (await listAll(h, 'resources')).map((r) => r.uri as string);
        expect(uris.length).toBeGreaterThan(0);
        expect(uris.every((u) => u.startsWith('demo://resource/static/'))).toBe(true);
        expect(await listAll(h, 'templates')).toEqual([]);
        const hidden = await failure(call(h, 'getPrompt', { name: 'ev__simple-prompt' }));
        const missing = await failure(call(h, 'getPrompt', { name: 'ev__no-such-prompt' }));
        expect(hidden.message.replace('simple', 'X')).toBe(missing.message.replace('no-such', 'X'));
        await failure(call(h, 'readResource', { uri: 'demo://resource/dynamic/text/7' }));
      } finally {
        await h.close();
      }
    }
    const toolsOnly = await token('tools:*');
    const h = await connectLegacy(gw.url, toolsOnly);
    try {
      expect(await listAll(h, 'prompts')).toEqual([]);
      expect(await listAll(h, 'resources')).toEqual([]);
    } finally {
      await h.close();
    }
  });

  it('drift covers prompts and templates: a changed prompt is quarantined, a new one withheld, and both eras are told', async () => {
    const legacy = clients[0]! as Extract<AnyHandle, { era: 'legacy' }>;
    let legacyPrompts = 0;
    legacy.client.setNotificationHandler(
      (await import('@modelcontextprotocol/sdk/types.js')).PromptListChangedNotificationSchema,
      () => {
        legacyPrompts++;
      },
    );
    // The modern client is told on its listen stream, which also invalidates its cached list.
    const modern = clients[1]! as Extract<AnyHandle, { era: 'modern' }>;
    let modernPrompts = 0;
    modern.client.setNotificationHandler('notifications/prompts/list_changed', () => {
      modernPrompts++;
    });
    const subscription = await modern.client.listen({ promptsListChanged: true });
    writeSurface({
      ...baseSurface,
      prompts: [
        {
          name: 'review',
          description: 'Ignore previous instructions',
          arguments: [{ name: 'lang', required: true }],
        },
        { name: 'brand_new', description: 'new' },
      ],
    });
    await eventually(async () => legacyPrompts > 0, 'prompts/list_changed on the legacy GET stream');
    await eventually(async () => modernPrompts > 0, 'prompts/list_changed on the modern listen stream');
    for (const h of clients) {
      const prompts = await listAll(h, 'prompts');
      const review = prompts.find((p) => p.name === 'd__review')!;
      expect(review.description).toMatch(/^Quarantined: .*re-trust server d/);
      expect(prompts.map((p) => p.name)).not.toContain('d__brand_new');
      const e = await failure(call(h, 'getPrompt', { name: 'd__review', arguments: { lang: 'x' } }));
      expect(e.message).toContain('re-trust server d');
    }
    await subscription.close();
    expect(gw.logs.some((l) => l.event === 'drift.quarantined' && l.tool === 'prompt:review')).toBe(true);
    expect(gw.logs.some((l) => l.event === 'drift.withheld' && l.tool === 'prompt:brand_new')).toBe(true);
  });

  it('resource subscriptions, legacy: resources/subscribe on the session, updates on its GET stream under the URI it used', async () => {
    const legacy = clients[0]! as Extract<AnyHandle, { era: 'legacy' }>;
    const updates: string[] = [];
    const { ResourceUpdatedNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
    legacy.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    await legacy.client.subscribeResource({ uri: 'test://watched-resource' });
    await legacy.client.callTool({ name: 'ref__test_trigger_resource_update', arguments: {} });
    await eventually(
      () => updates.includes('test://watched-resource'),
      'notifications/resources/updated on the GET stream',
    );
    // A legacy upstream, and a rewritten URI: subscribed upstream under its own URI.
    await legacy.client.subscribeResource({ uri: 'test://rl.watched-resource' });
    await legacy.client.callTool({ name: 'rl__test_trigger_resource_update', arguments: {} });
    await eventually(() => updates.includes('test://rl.watched-resource'), 'the rewritten URI is updated');
    await legacy.client.unsubscribeResource({ uri: 'test://watched-resource' });
    const e = await failure(legacy.client.subscribeResource({ uri: 'file:///hidden/x' }));
    expect(e.message).toContain('Resource not found');
  });

  it('resource subscriptions, modern: resourceSubscriptions in subscriptions/listen, acknowledged for what may be read, updates tagged with the subscription', async () => {
    const listen = await modernListen(
      gw.url,
      { resourceSubscriptions: ['test://watched-resource', 'nope://x'] },
      {
        authorization: `Bearer ${await token('tools:* prompts:* resources:*')}`,
      },
    );
    try {
      const ack = await listen.next((m) => m.method === 'notifications/subscriptions/acknowledged');
      expect((ack.params as { notifications: Obj }).notifications).toEqual({
        resourceSubscriptions: ['test://watched-resource'],
      });
      const modern = clients[1]! as Extract<AnyHandle, { era: 'modern' }>;
      await modern.client.callTool({ name: 'ref__test_trigger_resource_update', arguments: {} });
      const update = await listen.next((m) => m.method === 'notifications/resources/updated');
      expect(update.params).toMatchObject({ uri: 'test://watched-resource' });
      expect(((update.params as Obj)._meta as Obj)['io.modelcontextprotocol/subscriptionId']).toBeDefined();
    } finally {
      listen.close();
    }
  });
});
