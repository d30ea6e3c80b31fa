import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVERYTHING, FIXTURE, startTestGateway, type TestGateway } from '../helpers/harness.js';

// Streamable HTTP at the wire level: what a client that is not the SDK would see.
const ACCEPT = 'application/json, text/event-stream';

function init(version = '2025-11-25') {
  return {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };
}

describe('streamable HTTP edge', () => {
  let gw: TestGateway;
  let sid: string;

  const post = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const withSession = (extra: Record<string, string> = {}) => ({ 'mcp-session-id': sid, ...extra });

  beforeAll(async () => {
    gw = await startTestGateway({
      mcpServers: {
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        fx: { command: process.execPath, args: [FIXTURE] },
      },
      gateway: { maxBodyBytes: 4096, pageSize: 5 },
    });
    const r = await post(init());
    expect(r.status).toBe(200);
    sid = r.headers.get('mcp-session-id') ?? '';
    expect(sid).not.toBe('');
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('initialize negotiates each supported revision and falls back to the latest', async () => {
    for (const v of ['2025-11-25', '2025-06-18', '2025-03-26']) {
      const body = await (await post(init(v))).json();
      expect(body.result.protocolVersion).toBe(v);
      expect(body.result.capabilities.tools.listChanged).toBe(true);
      expect(body.result.instructions).toBeUndefined();
    }
    const body = await (await post(init('1999-01-01'))).json();
    expect(body.result.protocolVersion).toBe('2025-11-25');
  });

  it('B1: a notification or a response gets 202 with an empty body', async () => {
    const n = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, withSession());
    expect(n.status).toBe(202);
    expect(await n.text()).toBe('');
    const r = await post({ jsonrpc: '2.0', id: 77, result: {} }, withSession());
    expect(r.status).toBe(202);
    expect(await r.text()).toBe('');
  });

  it('B2: a batch gets 400, and a body over the cap gets 413 before it is parsed', async () => {
    const batch = await post([{ jsonrpc: '2.0', id: 1, method: 'ping' }], withSession());
    expect(batch.status).toBe(400);
    expect((await batch.json()).error.code).toBe(-32600);
    const big = await post(
      `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"${'a'.repeat(5000)}"}}`,
      withSession(),
    );
    expect(big.status).toBe(413);
    // Not JSON at all, but too big: still 413, proving the cap comes before the parse.
    const bigGarbage = await post('x'.repeat(5000), withSession());
    expect(bigGarbage.status).toBe(413);
  });

  it('a 2025-03-26 session may send a batch: every request answered in order in one array, notifications in it need none', async () => {
    const r = await post(init('2025-03-26'));
    const old = r.headers.get('mcp-session-id')!;
    const batch = await post(
      [
        { jsonrpc: '2.0', id: 'a', method: 'ping' },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 'b', method: 'tools/list' },
        { jsonrpc: '2.0', id: 'c', method: 'no/such' },
      ],
      { 'mcp-session-id': old },
    );
    expect(batch.status).toBe(200);
    const answers = (await batch.json()) as {
      id: string;
      result?: { tools?: unknown[] };
      error?: { code: number };
    }[];
    expect(answers.map((a) => a.id)).toEqual(['a', 'b', 'c']);
    expect(answers[1]!.result!.tools!.length).toBeGreaterThan(0);
    expect(answers[2]!.error!.code).toBe(-32601);
    const onlyNotes = await post([{ jsonrpc: '2.0', method: 'notifications/initialized' }], {
      'mcp-session-id': old,
    });
    expect(onlyNotes.status).toBe(202);
    // initialize never rides in a batch, and a later revision's header refuses batches.
    expect((await post([init('2025-03-26')], { 'mcp-session-id': old })).status).toBe(400);
    const withHeader = await post([{ jsonrpc: '2.0', id: 1, method: 'ping' }], {
      'mcp-session-id': old,
      'mcp-protocol-version': '2025-06-18',
    });
    expect(withHeader.status).toBe(400);
  });

  it('invalid JSON is a 400 parse error, and a non-message is an invalid request', async () => {
    const bad = await post('{"jsonrpc":', withSession());
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.code).toBe(-32700);
    const odd = await post({ hello: 'world' }, withSession());
    expect(odd.status).toBe(400);
    expect((await odd.json()).error.code).toBe(-32600);
  });

  it('B3: a foreign Origin gets 403, loopback origins on any port pass, a foreign Host gets 403', async () => {
    expect(
      (await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, withSession({ origin: 'https://evil.example' })))
        .status,
    ).toBe(403);
    expect(
      (await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, withSession({ origin: 'null' }))).status,
    ).toBe(403);
    const ok = await post(
      { jsonrpc: '2.0', id: 2, method: 'ping' },
      withSession({ origin: 'http://localhost:6274' }),
    );
    expect(ok.status).toBe(200);
    const u = new URL(gw.url);
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: 'POST',
          headers: { host: 'evil.example', 'content-type': 'application/json', accept: ACCEPT },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify(init()));
    });
    expect(status).toBe(403);
  });

  it('B4: a missing session id is 400; after DELETE the same id is 404', async () => {
    expect((await post({ jsonrpc: '2.0', id: 3, method: 'ping' })).status).toBe(400);
    const r = await post(init());
    const mine = r.headers.get('mcp-session-id') ?? '';
    expect((await post({ jsonrpc: '2.0', id: 3, method: 'ping' }, { 'mcp-session-id': mine })).status).toBe(
      200,
    );
    const del = await fetch(gw.url, { method: 'DELETE', headers: { 'mcp-session-id': mine } });
    expect(del.status).toBe(204);
    expect((await post({ jsonrpc: '2.0', id: 3, method: 'ping' }, { 'mcp-session-id': mine })).status).toBe(
      404,
    );
    expect(
      (await post({ jsonrpc: '2.0', id: 3, method: 'ping' }, { 'mcp-session-id': 'made-up' })).status,
    ).toBe(404);
  });

  it('B5: an unsupported MCP-Protocol-Version gets 400; a supported one passes', async () => {
    const bad = await post(
      { jsonrpc: '2.0', id: 4, method: 'ping' },
      withSession({ 'mcp-protocol-version': '2024-01-01' }),
    );
    expect(bad.status).toBe(400);
    const good = await post(
      { jsonrpc: '2.0', id: 4, method: 'ping' },
      withSession({ 'mcp-protocol-version': '2025-06-18' }),
    );
    expect(good.status).toBe(200);
    expect((await good.json()).result).toEqual({});
  });

  it('an unknown method is -32601 inside a 200', async () => {
    const r = await post({ jsonrpc: '2.0', id: 5, method: 'no/such/method' }, withSession());
    expect(r.status).toBe(200);
    expect((await r.json()).error.code).toBe(-32601);
  });

  it('B7: progress is re-keyed to the client token, in order, and the response comes last', async () => {
    const r = await post(
      {
        jsonrpc: '2.0',
        id: 6,
        method: 'tools/call',
        params: {
          name: 'everything__trigger-long-running-operation',
          arguments: { duration: 0.3, steps: 3 },
          _meta: { progressToken: 'client-tok' },
        },
      },
      withSession(),
    );
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    const events = (await r.text())
      .split('\n')
      // Priming events (2025-11-25 resumable streams) carry no data.
      .filter((l) => l.startsWith('data: ') && l.length > 6)
      .map((l) => JSON.parse(l.slice(6)));
    expect(events.map((e) => e.params?.progress ?? 'response')).toEqual([1, 2, 3, 'response']);
    for (const e of events.slice(0, 3)) expect(e.params.progressToken).toBe('client-tok');
    expect(events[3].id).toBe(6);
  });

  it('a call without a progress token is answered as plain JSON', async () => {
    const r = await post(
      {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'everything__echo', arguments: { message: 'hi' } },
      },
      withSession(),
    );
    expect(r.headers.get('content-type')).toContain('application/json');
    expect((await r.json()).result.content[0].text).toContain('hi');
  });

  it('B8: the merged list pages with opaque cursors; a tampered cursor gets -32602', async () => {
    const names: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const r = await post(
        { jsonrpc: '2.0', id: 8, method: 'tools/list', params: cursor ? { cursor } : {} },
        withSession(),
      );
      const body = await r.json();
      names.push(...body.result.tools.map((t: { name: string }) => t.name));
      cursor = body.result.nextCursor;
      pages++;
    } while (cursor && pages < 50);
    expect(pages).toBeGreaterThan(2);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toContain('fx__sleep');
    const first = await (
      await post({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} }, withSession())
    ).json();
    const good: string = first.result.nextCursor;
    // One character of the sealed body changed: every bit of it is data. (The end of the MAC's
    // base64url carries padding bits, so changing the last character could decode the same.)
    const tampered = `${good.slice(0, 2)}${good[2] === 'A' ? 'B' : 'A'}${good.slice(3)}`;
    for (const c of [tampered, 'garbage', 42, `${good}.x`]) {
      const r = await (
        await post({ jsonrpc: '2.0', id: 10, method: 'tools/list', params: { cursor: c } }, withSession())
      ).json();
      expect(r.error.code).toBe(-32602);
    }
  });

  it('GET without a session is 400 and DELETE of an unknown session is 404', async () => {
    expect((await fetch(gw.url, { headers: { accept: 'text/event-stream' } })).status).toBe(400);
    expect((await fetch(gw.url, { method: 'DELETE', headers: { 'mcp-session-id': 'nope' } })).status).toBe(
      404,
    );
  });

  it('/healthz reports every upstream with state and tool count', async () => {
    const h = await (await fetch(gw.url.replace('/mcp', '/healthz'))).json();
    expect(h.status).toBe('ok');
    const fx = h.upstreams.find((u: { name: string }) => u.name === 'fx');
    expect(fx).toMatchObject({ state: 'ready', transport: 'stdio' });
    expect(fx.tools).toBeGreaterThanOrEqual(3);
  });
});
