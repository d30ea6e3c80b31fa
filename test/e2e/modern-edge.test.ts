import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVERYTHING, eventually, ROOT, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { META_PV, MODERN, modernListen, modernMeta, modernRequest } from '../helpers/modern.js';

const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
const SUB = 'io.modelcontextprotocol/subscriptionId';
const DRIFT = join(ROOT, 'test/fixtures/drift-server.mjs');

// The 2026-07-28 edge at the wire level, in front of legacy upstreams: what a modern client sees.
describe('modern (2026-07-28) requests at the /mcp edge', () => {
  let gw: TestGateway;
  let toolsFile: string;
  const tools = (names: string[]) =>
    writeFileSync(
      toolsFile,
      JSON.stringify(
        names.map((name) => ({ name, description: `tool ${name}`, inputSchema: { type: 'object' } })),
      ),
    );

  beforeAll(async () => {
    toolsFile = join(mkdtempSync(join(tmpdir(), 'mf-modern-')), 'tools.json');
    tools(['alpha']);
    gw = await startTestGateway({
      mcpServers: {
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        d: { command: process.execPath, args: [DRIFT], env: { DRIFT_TOOLS_FILE: toolsFile } },
      },
      gateway: { pageSize: 5 },
    });
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('server/discover answers with every served revision, the capabilities and the gateway identity, and no instructions', async () => {
    const r = await modernRequest(gw.url, 'server/discover');
    expect(r.status).toBe(200);
    const result = r.body.result!;
    expect(result.resultType).toBe('complete');
    expect(result.supportedVersions).toEqual([MODERN, '2025-11-25', '2025-06-18', '2025-03-26']);
    expect(result.capabilities).toEqual({
      tools: { listChanged: true },
      prompts: { listChanged: true },
      resources: { listChanged: true, subscribe: true },
      completions: {},
      logging: {},
      // server-everything runs tasks (2025-11-25): bridged for 2026 clients through the extension.
      extensions: { 'io.modelcontextprotocol/tasks': {} },
    });
    expect((result._meta as Record<string, unknown>)[SERVER_INFO]).toEqual({
      name: 'manifold',
      version: 'test',
    });
    expect(result.instructions).toBeUndefined();
    expect(typeof result.ttlMs).toBe('number');
    expect(result.cacheScope).toBe('public');
    expect(r.headers.get('mcp-session-id')).toBeNull();
  });

  it('tools/list pages carry resultType, ttlMs, cacheScope and serverInfo, in a deterministic order, with no session', async () => {
    const names: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 20; i++) {
      const r = await modernRequest(gw.url, 'tools/list', cursor ? { cursor } : {});
      expect(r.status).toBe(200);
      const result = r.body.result!;
      expect(result.resultType).toBe('complete');
      expect(result.ttlMs).toBeGreaterThanOrEqual(0);
      expect(result.cacheScope).toBe('public');
      expect((result._meta as Record<string, unknown>)[SERVER_INFO]).toBeDefined();
      names.push(...(result.tools as { name: string }[]).map((t) => t.name));
      cursor = result.nextCursor as string | undefined;
      if (!cursor) break;
    }
    expect(names).toContain('everything__echo');
    expect(names).toContain('d__alpha');
    const again = (await modernRequest(gw.url, 'tools/list')).body.result!.tools as { name: string }[];
    expect(again.map((t) => t.name)).toEqual(names.slice(0, 5));
  });

  it('tools/call relays to a legacy upstream; the result is dressed for 2026-07-28', async () => {
    const r = await modernRequest(gw.url, 'tools/call', {
      name: 'everything__echo',
      arguments: { message: 'hi' },
    });
    expect(r.status).toBe(200);
    expect(r.body.result!.resultType).toBe('complete');
    expect(JSON.stringify(r.body.result!.content)).toContain('hi');
    expect((r.body.result!._meta as Record<string, unknown>)[SERVER_INFO]).toEqual({
      name: 'manifold',
      version: 'test',
    });
  });

  it('progress travels on the request’s own stream, re-keyed to the client token, with no SSE event ids', async () => {
    const r = await modernRequest(gw.url, 'tools/call', {
      name: 'everything__trigger-long-running-operation',
      arguments: { duration: 0.4, steps: 2 },
      _meta: { ...modernMeta(), progressToken: 'tok' },
    });
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    expect(r.headers.get('x-accel-buffering')).toBe('no');
    const progress = r.messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.length).toBeGreaterThan(0);
    for (const p of progress) expect((p.params as { progressToken: unknown }).progressToken).toBe('tok');
    expect(r.body.result!.resultType).toBe('complete');
    expect(r.raw).not.toMatch(/^id:/m);
  });

  it('closing a modern request cancels the call upstream (JSON answer, no progress token)', async () => {
    const ac = new AbortController();
    const pending = modernRequest(
      gw.url,
      'tools/call',
      { name: 'everything__trigger-long-running-operation', arguments: { duration: 20, steps: 2 } },
      { signal: ac.signal },
    ).catch((e: unknown) => e);
    await eventually(() => gw.gateway.inflightCalls === 1, 'the call is running upstream');
    ac.abort();
    expect(await pending).toBeInstanceOf(Error);
    // Without the cancellation, the call would run for 20 s before its audit line.
    await eventually(
      () =>
        gw.logs.some(
          (l) =>
            l.event === 'audit.tools_call' &&
            l.tool === 'everything__trigger-long-running-operation' &&
            l.verdict === 'error',
        ),
      'the cancelled call is audited as an error',
      8000,
    );
  });

  it('an unknown or removed method is 404 with -32601, echoing the request id', async () => {
    for (const method of [
      'initialize',
      'ping',
      'logging/setLevel',
      'resources/subscribe',
      'unknown/method',
      // Names of Object.prototype's members: no Mcp-Name is asked of them.
      'toString',
      'constructor',
      '__proto__',
    ]) {
      const r = await modernRequest(gw.url, method, {}, { id: 601 });
      expect(r.status, method).toBe(404);
      expect(r.body.error!.code).toBe(-32601);
      expect(r.body.id).toBe(601);
    }
  });

  it('headers that disagree with the body are HeaderMismatch (400, -32020); missing _meta is -32602 (400)', async () => {
    const wrongMethod = await modernRequest(
      gw.url,
      'tools/list',
      {},
      { headers: { 'mcp-method': 'tools/call' }, id: 9 },
    );
    expect([wrongMethod.status, wrongMethod.body.error!.code, wrongMethod.body.id]).toEqual([400, -32020, 9]);
    const noName = await modernRequest(
      gw.url,
      'tools/call',
      { name: 'everything__echo', arguments: {} },
      { headers: { 'mcp-name': '' } },
    );
    expect([noName.status, noName.body.error!.code]).toEqual([400, -32020]);
    const wrongName = await modernRequest(
      gw.url,
      'tools/call',
      { name: 'everything__echo', arguments: { message: 'x' } },
      { headers: { 'mcp-name': '=?base64?ZXZlcnl0aGluZ19fZ2V0LXN1bQ==?=' } },
    );
    expect(wrongName.body.error!.code).toBe(-32020);
    const encoded = await modernRequest(
      gw.url,
      'tools/call',
      { name: 'everything__echo', arguments: { message: 'x' } },
      { headers: { 'mcp-name': '=?base64?ZXZlcnl0aGluZ19fZWNobw==?=' } },
    );
    expect(encoded.status).toBe(200);
    const noMeta = await modernRequest(gw.url, 'tools/list', {}, { meta: null });
    expect([noMeta.status, noMeta.body.error!.code]).toEqual([400, -32602]);
    const versions = await modernRequest(gw.url, 'tools/list', {}, { meta: { [META_PV]: '2025-11-25' } });
    expect([versions.status, versions.body.error!.code]).toEqual([400, -32020]);
  });

  it('mixed eras get the spec’s code and a message saying what to change, never a 500', async () => {
    const withSession = await modernRequest(
      gw.url,
      'tools/list',
      {},
      { headers: { 'mcp-session-id': 'abc' } },
    );
    expect(withSession.status).toBe(400);
    expect(withSession.body.error!.message).toContain('Mcp-Session-Id');
    const legacyWithMeta = await fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: modernMeta() } }),
    });
    expect(legacyWithMeta.status).toBe(400);
    const body = await legacyWithMeta.json();
    expect(body.error.code).toBe(-32020);
    expect(body.error.message).toContain('MCP-Protocol-Version: 2026-07-28');
    const unsupported = await modernRequest(
      gw.url,
      'tools/list',
      {},
      { headers: { 'mcp-protocol-version': 'v9' }, meta: { [META_PV]: 'v9' } },
    );
    expect([unsupported.status, unsupported.body.error!.code]).toEqual([400, -32022]);
    expect(unsupported.body.error!.data!.supported).toContain(MODERN);
    const batch = await fetch(gw.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        'mcp-protocol-version': MODERN,
      },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: modernMeta() } },
      ]),
    });
    expect(batch.status).toBe(400);
  });

  it('GET and DELETE are 405 for a modern client', async () => {
    const get = await fetch(gw.url, {
      headers: { accept: 'text/event-stream', 'mcp-protocol-version': MODERN },
    });
    expect(get.status).toBe(405);
    const del = await fetch(gw.url, { method: 'DELETE', headers: { 'mcp-protocol-version': MODERN } });
    expect(del.status).toBe(405);
  });

  it('subscriptions/listen: acknowledgement first, keep-alive headers, and tools/list_changed only after the verified change', async () => {
    const narrow = await modernListen(gw.url, { promptsListChanged: true });
    const listen = await modernListen(gw.url, { toolsListChanged: true, resourceSubscriptions: ['x://y'] });
    try {
      expect(listen.status).toBe(200);
      expect(listen.responseHeaders.get('x-accel-buffering')).toBe('no');
      const ack = await listen.next(() => true);
      expect(ack.method).toBe('notifications/subscriptions/acknowledged');
      const ackParams = ack.params as { notifications: unknown; _meta: Record<string, unknown> };
      // Only what the gateway honours is acknowledged.
      expect(ackParams.notifications).toEqual({ toolsListChanged: true });
      expect(ackParams._meta[SUB]).toMatch(/^listen-/);
      // alpha goes away and beta is new: beta is withheld until re-trust (drift), alpha's removal
      // is what clients can see.
      tools(['beta']);
      const changed = await listen.next((m) => m.method === 'notifications/tools/list_changed', 15_000);
      expect((changed.params as { _meta: Record<string, unknown> })._meta[SUB]).toBe(ackParams._meta[SUB]);
      // It is sent after the new catalog was verified: the listing made now shows what the
      // gateway decided (alpha gone, beta withheld), not the raw upstream list.
      const all: string[] = [];
      let cursor: string | undefined;
      do {
        const r = await modernRequest(gw.url, 'tools/list', cursor ? { cursor } : {});
        all.push(...(r.body.result!.tools as { name: string }[]).map((t) => t.name));
        cursor = r.body.result!.nextCursor as string | undefined;
      } while (cursor);
      expect(all).not.toContain('d__alpha');
      expect(all).not.toContain('d__beta');
      expect(narrow.messages.some((m) => m.method === 'notifications/tools/list_changed')).toBe(false);
    } finally {
      listen.close();
      narrow.close();
    }
  });
});
