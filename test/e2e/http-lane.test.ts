import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/server/http/app.js';
import { EVERYTHING, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { testIssuer } from '../helpers/tokens.js';

// On Node, POST /mcp is read straight from node:http (deploy/node/http-lane.ts) and everything
// else goes through the Hono app. The lane must answer exactly what the app answers: these
// requests go to both, the running gateway's port and `createApp(gateway).fetch`, and the two
// answers are compared (#18).
const ISS = 'https://issuer.example';
const AUD = 'lane-test';
const ACCEPT = 'application/json, text/event-stream';

interface Raw {
  method: string;
  path: string;
  headers: [string, string][];
  body?: string | Buffer;
  /** Sent with Transfer-Encoding: chunked, in this many pieces, instead of a Content-Length. */
  chunks?: number;
}
interface Got {
  status: number;
  body: string;
  headers: Record<string, string | undefined>;
}

describe('the Node HTTP lane answers as the app does', () => {
  let gw: TestGateway;
  let app: Hono;
  let token = '';
  let port = 0;

  beforeAll(async () => {
    const issuer = await testIssuer(ISS, AUD);
    gw = await startTestGateway({
      mcpServers: { everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] } },
      gateway: {
        maxBodyBytes: 8 << 20,
        maxResultBytes: 8 << 20,
        maxUpstreamBodyBytes: 16 << 20,
        auth: { issuer: ISS, audience: AUD, publicKey: issuer.publicKey },
      },
      profiles: { narrow: { tools: ['everything__echo'] } },
    });
    app = createApp(gw.gateway);
    port = Number(new URL(gw.url).port);
    token = await issuer.mint({ scope: 'tools:*' });
  }, 30_000);
  afterAll(async () => {
    await gw?.stop();
  });

  /** The request over a real socket to the running gateway, repeated headers sent as they are. */
  const overLane = (r: Raw) =>
    new Promise<Got>((resolve, reject) => {
      const body = r.body === undefined ? undefined : Buffer.from(r.body);
      const flat = r.headers.flat();
      if (body && !r.chunks) flat.push('content-length', String(body.length));
      const req = httpRequest(
        { host: '127.0.0.1', port, method: r.method, path: r.path, headers: flat },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              body: Buffer.concat(chunks).toString('utf8'),
              headers: res.headers as Record<string, string | undefined>,
            }),
          );
        },
      );
      req.on('error', reject);
      if (body && r.chunks) {
        const size = Math.ceil(body.length / r.chunks);
        for (let at = 0; at < body.length; at += size) req.write(body.subarray(at, at + size));
        req.end();
      } else {
        req.end(body);
      }
    });

  /** The same request to the Hono app of the same gateway. */
  const overApp = async (r: Raw): Promise<Got> => {
    const headers = new Headers();
    for (const [k, v] of r.headers) headers.append(k, v);
    if (!headers.has('host')) headers.set('host', `127.0.0.1:${port}`);
    const body = r.body === undefined ? undefined : Buffer.from(r.body);
    const init: RequestInit & { duplex?: 'half' } = { method: r.method, headers };
    if (body && r.chunks) {
      init.body = new ReadableStream({
        start(c) {
          c.enqueue(new Uint8Array(body));
          c.close();
        },
      });
      init.duplex = 'half';
    } else if (body) {
      headers.set('content-length', String(body.length));
      init.body = body;
    }
    const res = await app.fetch(new Request(`http://127.0.0.1:${port}${r.path}`, init));
    return {
      status: res.status,
      body: await res.text(),
      headers: Object.fromEntries(res.headers) as Record<string, string | undefined>,
    };
  };

  const json = (extra: [string, string][] = []): [string, string][] => [
    ['host', `127.0.0.1:${port}`],
    ['content-type', 'application/json'],
    ['accept', ACCEPT],
    ...extra,
  ];
  const bearer = (): [string, string] => ['authorization', `Bearer ${token}`];
  const initialize = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  const listModern = JSON.stringify({
    jsonrpc: '2.0',
    id: 2,
    method: 'tools/list',
    params: {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
      },
    },
  });
  const modern: [string, string][] = [
    ['mcp-protocol-version', '2026-07-28'],
    ['mcp-method', 'tools/list'],
  ];

  const cases: [string, () => Raw, number][] = [
    ['no token', () => ({ method: 'POST', path: '/mcp', headers: json(), body: initialize }), 401],
    [
      'two Authorization headers are ambiguous',
      () => ({ method: 'POST', path: '/mcp', headers: json([bearer(), bearer()]), body: initialize }),
      401,
    ],
    [
      // Node alone keeps the first Host only; the gateway's server joins both, as Headers does.
      'two Host headers, the second one foreign',
      () => ({
        method: 'POST',
        path: '/mcp',
        headers: [...json([bearer()]), ['host', 'evil.example']],
        body: initialize,
      }),
      403,
    ],
    [
      'an Accept header sent twice, its halves joined',
      () => ({
        method: 'POST',
        path: '/mcp',
        headers: [
          ...json([bearer(), ...modern]).filter(([k]) => k !== 'accept'),
          ['Accept', 'application/json'],
          ['accept', 'text/event-stream'],
        ],
        body: listModern,
      }),
      200,
    ],
    [
      'header names in any case, one of them named like an Object method',
      () => ({
        method: 'POST',
        path: '/mcp',
        headers: [
          ['Host', `127.0.0.1:${port}`],
          ['Content-Type', 'application/json'],
          ['ACCEPT', ACCEPT],
          ['Authorization', `Bearer ${token}`],
          ['MCP-Protocol-Version', '2026-07-28'],
          ['Mcp-Method', 'tools/list'],
          ['constructor', 'x'],
        ],
        body: listModern,
      }),
      200,
    ],
    [
      'a foreign Origin',
      () => ({
        method: 'POST',
        path: '/mcp',
        headers: json([bearer(), ['origin', 'https://evil.example']]),
        body: initialize,
      }),
      403,
    ],
    [
      'a Host the gateway does not serve',
      () => ({
        method: 'POST',
        path: '/mcp',
        headers: [...json([bearer()]).slice(1), ['host', 'evil.example']],
        body: initialize,
      }),
      403,
    ],
    [
      'a declared length over maxBodyBytes',
      () => ({ method: 'POST', path: '/mcp', headers: json([bearer()]), body: 'x'.repeat((8 << 20) + 1) }),
      413,
    ],
    [
      'a chunked body that grows past maxBodyBytes',
      () => ({
        method: 'POST',
        path: '/mcp',
        headers: json([bearer()]),
        body: 'x'.repeat((8 << 20) + 1),
        chunks: 9,
      }),
      413,
    ],
    [
      'not JSON',
      () => ({ method: 'POST', path: '/mcp', headers: json([bearer()]), body: '{"jsonrpc":' }),
      400,
    ],
    [
      'a body that starts with a byte-order mark',
      () => ({
        method: 'POST',
        path: '/mcp',
        headers: json([bearer(), ...modern]),
        body: `\uFEFF${listModern}`,
      }),
      200,
    ],
    [
      'a chunked body within the cap',
      () => ({
        method: 'POST',
        path: '/mcp',
        headers: json([bearer(), ...modern]),
        body: listModern,
        chunks: 3,
      }),
      200,
    ],
    [
      'a profile endpoint',
      () => ({
        method: 'POST',
        path: '/mcp/narrow?x=1',
        headers: json([bearer(), ...modern]),
        body: listModern,
      }),
      200,
    ],
    [
      'an unknown profile',
      () => ({ method: 'POST', path: '/mcp/nope', headers: json([bearer(), ...modern]), body: listModern }),
      404,
    ],
    [
      'a path below a profile',
      () => ({ method: 'POST', path: '/mcp/narrow/x', headers: json([bearer()]), body: '{}' }),
      404,
    ],
    ['PUT', () => ({ method: 'PUT', path: '/mcp', headers: json([bearer()]), body: '{}' }), 405],
    [
      'GET with a modern version',
      () => ({ method: 'GET', path: '/mcp', headers: json([bearer(), ...modern]) }),
      405,
    ],
    [
      'a legacy GET without a session',
      () => ({ method: 'GET', path: '/mcp', headers: json([bearer()]) }),
      400,
    ],
  ];

  it.each(cases)('%s', async (_what, make, status) => {
    const r = make();
    const [lane, viaApp] = [await overLane(r), await overApp(r)];
    expect(lane.status).toBe(status);
    expect(viaApp.status).toBe(status);
    expect(lane.headers['content-type']).toBe(viaApp.headers['content-type']);
    expect(lane.headers['www-authenticate']).toBe(viaApp.headers['www-authenticate']);
    // The same answer, byte for byte (a list's page cursor is sealed per request, so compare
    // only what a cursor does not change).
    expect(lane.body.replace(/"nextCursor":"[^"]*"/, '')).toBe(
      viaApp.body.replace(/"nextCursor":"[^"]*"/, ''),
    );
    if (status === 401) expect(lane.headers['www-authenticate']).toContain('resource_metadata=');
  });

  it('legacy and modern SDK clients work through the lane, and a big result arrives whole', async () => {
    // Past 1 Mi characters the lane writes the answer in pieces; an emoji sits on the first cut.
    const message = `${'é'.repeat(256 * 1024 - 40)}😀${'ü'.repeat(1_200_000)}`;
    const client = new Client({ name: 'lane', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    const r = (await client.callTool({ name: 'everything__echo', arguments: { message } })) as {
      content: { text: string }[];
    };
    expect(r.content[0]!.text).toBe(`Echo: ${message}`);
    await client.close();

    const { Client: ModernClient } = await import('@modelcontextprotocol/client');
    const { StreamableHTTPClientTransport: ModernTransport } = await import('@modelcontextprotocol/client');
    const m = new ModernClient({ name: 'lane-modern', version: '1' });
    await m.connect(
      new ModernTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    const r2 = (await m.callTool({ name: 'everything__echo', arguments: { message: 'hi' } })) as {
      content: { text: string }[];
    };
    expect(r2.content[0]!.text).toBe('Echo: hi');
    await m.close();
  }, 30_000);

  it('a body the client cuts off is dropped, and the lane goes on serving', async () => {
    // Half a declared body, then the socket closed: the read settles once (as cut), its listeners
    // stay on the request and do nothing more, and nothing reaches the process as uncaught.
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.write(
            `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\n` +
              `accept: ${ACCEPT}\r\nauthorization: Bearer ${token}\r\ncontent-length: 400\r\n\r\n` +
              listModern.slice(0, 40),
          );
          setTimeout(() => socket.destroy(), 50);
        });
        socket.on('close', () => resolve());
        socket.on('error', reject);
      });
    }
    const after = await overLane({
      method: 'POST',
      path: '/mcp',
      headers: json([bearer(), ...modern]),
      body: listModern,
    });
    expect(after.status).toBe(200);
    expect(after.body).toContain('everything__echo');
  });
});
