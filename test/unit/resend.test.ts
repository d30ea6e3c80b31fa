import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/load.js';
import { ManifoldError } from '../../src/errors.js';
import { createJsonLogger, silentLogger } from '../../src/lib/log.js';
import type { Platform } from '../../src/platform.js';
import {
  httpStatusOf,
  mapCallError,
  notResentError,
  publicReason,
  sessionExpired,
  UpstreamHttpError,
  UpstreamSessionExpired,
} from '../../src/upstream/call-errors.js';
import { modernWire } from '../../src/upstream/modern/wire.js';
import { Upstream } from '../../src/upstream/upstream.js';
import { postJsonOf } from '../../src/upstream/wire/egress-fetch.js';
import { legacyWire, postMessage, type Wire } from '../../src/upstream/wire/http.js';

// #14: which 404 means "the server forgot the session", how a request that was not resent is
// worded, and the resend of a stdio upstream whose child died (reconnect without the backoff).

describe('a 404 that means the session is gone', () => {
  const answer404 = (body: string) =>
    (async () =>
      new Response(body, {
        status: 404,
        headers: { 'content-type': 'application/json' },
      })) as unknown as typeof fetch;
  const post = (
    wire: Wire,
    body = '{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"no session"}}',
  ) => {
    const received: unknown[] = [];
    return postMessage(
      {
        url: 'http://u/mcp',
        post: postJsonOf({ fetch: answer404(body) }),
        wire,
        log: silentLogger,
        receive: (m) => received.push(m),
      },
      { jsonrpc: '2.0', id: 'manifold:1', method: 'tools/call', params: { name: 't' } },
      new AbortController().signal,
    ).then(
      (end) => ({ end, received }),
      (e: unknown) => ({ error: e, received }),
    );
  };
  const endpoint = (sessionId: string | undefined) => ({
    sessionId,
    protocolVersion: '2025-11-25',
    send: async () => {},
  });

  it('a legacy request that carried Mcp-Session-Id: UpstreamSessionExpired, still an HTTP 404 for reasons', async () => {
    const r = await post(legacyWire(endpoint('s-1'), {}));
    expect(r).toHaveProperty('error');
    const e = (r as { error: unknown }).error;
    expect(e).toBeInstanceOf(UpstreamSessionExpired);
    expect(sessionExpired(e)).toBe(true);
    expect(sessionExpired(new Error('wrapped', { cause: e }))).toBe(true);
    expect(httpStatusOf(e)).toBe(404);
    expect(publicReason(e)).toBe('HTTP 404 from the server');
    const mapped = mapCallError(e, 'srv', 1000, false);
    expect(mapped.code).toBe('ERR_UPSTREAM_UNAVAILABLE');
    expect(mapped.publicMessage).toContain('did not run');
  });

  it('a legacy request without a session (a stateless server): a plain HTTP 404, outcome unknown', async () => {
    const r = (await post(legacyWire(endpoint(undefined), {}))) as { error: unknown };
    expect(r.error).toBeInstanceOf(UpstreamHttpError);
    expect(sessionExpired(r.error)).toBe(false);
    expect(mapCallError(r.error, 'srv', 1000, false).code).toBe('ERR_OUTCOME_UNKNOWN');
  });

  it("a modern server's 404 never is: its error body is the answer, and a bare 404 is a plain HTTP error", async () => {
    const wire = modernWire({}, '2026-07-28', () => new Map());
    const withBody = await post(
      wire,
      '{"jsonrpc":"2.0","id":"manifold:1","error":{"code":-32601,"message":"Method not found"}}',
    );
    expect(withBody).not.toHaveProperty('error');
    expect(withBody.received).toEqual([expect.objectContaining({ id: 'manifold:1' })]);
    const bare = (await post(wire, 'not found')) as { error: unknown };
    expect(bare.error).toBeInstanceOf(UpstreamHttpError);
    expect(sessionExpired(bare.error)).toBe(false);
  });
});

describe('the wording of a request that was not resent', () => {
  const CHECK = 'check whether it took effect before calling it again';

  it('may have run: outcome unknown, says why, and tells the model to check first', () => {
    const whys = [
      [{ kind: 'not-read' }, 'not classified read'],
      [{ kind: 'retry-zero' }, 'retry is 0'],
      [{ kind: 'exhausted', resends: 2 }, 'resent 2 times'],
      [{ kind: 'exhausted', resends: 1 }, 'resent once'],
      [{ kind: 'no-connection', waitedMs: 1500 }, 'within 1500 ms'],
      [{ kind: 'not-resent' }, 'not resent'],
    ] as const;
    for (const [why, says] of whys) {
      const e = notResentError('srv', new Error('x'), { mayHaveRun: true, why });
      expect(e.code).toBe('ERR_OUTCOME_UNKNOWN');
      expect(e.publicMessage).toContain('outcome is unknown');
      expect(e.publicMessage).toContain(says);
      expect(e.publicMessage).toContain(CHECK);
    }
  });

  it('refused for its session every time: it did not run, and calling again is safe', () => {
    for (const why of [{ kind: 'retry-zero' }, { kind: 'exhausted', resends: 1 }] as const) {
      const e = notResentError('srv', new Error('x'), { mayHaveRun: false, why });
      expect(e.code).toBe('ERR_UPSTREAM_UNAVAILABLE');
      expect(e.publicMessage).toContain('did not run');
      expect(e.publicMessage).toContain('calling it again is safe');
      expect(e.publicMessage).not.toContain('outcome is unknown');
    }
  });
});

// A stdio upstream whose "child" is an in-memory MCP server: closing its transport is the child
// dying (the SDK client sees the connection close, as with a real process).
describe('resend after a stdio child died', () => {
  const upstreams: Upstream[] = [];
  afterEach(async () => {
    await Promise.all(upstreams.splice(0).map((u) => u.close()));
  });

  interface Child {
    calls: number;
    transport: InMemoryTransport;
  }

  function setup(o: {
    retry?: number;
    connectTimeoutMs?: number;
    /** What the n-th call (1-based, over every child) does: die mid-call, or answer. */
    die: (n: number) => boolean;
    /** Children after the first that fail to start (the command cannot be run). */
    failRestarts?: boolean;
  }) {
    const children: Child[] = [];
    let total = 0;
    const platform: Platform = {
      fetch,
      runtime: 'test',
      now: Date.now,
      log: silentLogger,
      connectStdio: (spec): Transport => {
        if (o.failRestarts && children.length > 0) throw new Error('could not start x: ENOENT');
        const [client, server] = InMemoryTransport.createLinkedPair();
        const child: Child = { calls: 0, transport: server };
        children.push(child);
        const mcp = new McpServer({ name: spec.server, version: '1' });
        mcp.registerTool('slow', { description: 'a read' }, async (extra) => {
          child.calls++;
          const n = ++total;
          const token = extra._meta?.progressToken;
          for (const progress of [1, 2]) {
            if (token !== undefined) {
              await extra.sendNotification({
                method: 'notifications/progress',
                params: { progressToken: token, progress },
              });
            }
          }
          if (o.die(n)) {
            setTimeout(() => void server.close(), 20);
            return new Promise<never>(() => {});
          }
          if (token !== undefined) {
            await extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken: token, progress: 3 },
            });
          }
          return { content: [{ type: 'text', text: `slow:${n}` }] };
        });
        const start = client.start.bind(client);
        client.start = async () => {
          await mcp.connect(server);
          await start();
        };
        return client;
      },
    };
    const parsed = parseConfigObject(
      {
        gateway: { connectTimeoutMs: o.connectTimeoutMs ?? 5000 },
        mcpServers: {
          s: { command: 'x', protocol: '2025-11-25', risk: { slow: 'read' }, retry: o.retry ?? 1 },
        },
      },
      {},
    );
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
    const logs: Record<string, unknown>[] = [];
    const log = createJsonLogger({ level: 'debug', write: (line) => logs.push(JSON.parse(line)) });
    const upstream = new Upstream(parsed.config.servers[0]!, {
      platform,
      gateway: parsed.config.gateway,
      log,
      // A long normal backoff: a resend that waited for it would be caught by the timings.
      backoff: { baseMs: 5000, capMs: 5000, jitter: 0 },
      clientVersion: 't',
    });
    upstreams.push(upstream);
    return { upstream, children, logs };
  }

  it('a read call is resent on the respawned child, without the backoff delay, and progress never goes back', async () => {
    const { upstream, children, logs } = setup({ die: (n) => n === 1 });
    await upstream.start();
    const seen: number[] = [];
    const started = Date.now();
    const result = await upstream.request(
      'tools/call',
      { name: 'slow', arguments: {} },
      { repeatable: true, onprogress: (p) => seen.push(p.progress) },
    );
    expect(Date.now() - started).toBeLessThan(2500);
    expect(result.content).toEqual([{ type: 'text', text: 'slow:2' }]);
    expect(children.map((c) => c.calls)).toEqual([1, 1]);
    expect(seen).toEqual([1, 2, 3]);
    expect(logs.filter((l) => l.event === 'upstream.call_resent')).toEqual([
      expect.objectContaining({ reason: 'connection-lost', tool: 'slow', resend: 1, retry: 1 }),
    ]);
    expect(upstream.state).toBe('ready');
  });

  it('a call not marked repeatable is outcome unknown and not resent', async () => {
    const { upstream, children } = setup({ die: (n) => n === 1 });
    await upstream.start();
    const e = await upstream.request('tools/call', { name: 'slow', arguments: {} }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ManifoldError);
    expect((e as ManifoldError).code).toBe('ERR_OUTCOME_UNKNOWN');
    expect((e as ManifoldError).publicMessage).toContain('not classified read');
    expect(children.map((c) => c.calls)).toEqual([1]);
  });

  it('retry bounds the resends: with retry 2 a child that keeps dying is tried three times in all', async () => {
    const { upstream, children } = setup({ retry: 2, die: () => true });
    await upstream.start();
    const e = (await upstream
      .request('tools/call', { name: 'slow', arguments: {} }, { repeatable: true })
      .catch((x: unknown) => x)) as ManifoldError;
    expect(e.code).toBe('ERR_OUTCOME_UNKNOWN');
    expect(e.publicMessage).toContain('resent 2 times');
    expect(children.reduce((n, c) => n + c.calls, 0)).toBe(3);
  });

  it('the wait for a new child is bounded by the connect timeout', async () => {
    const { upstream, children } = setup({ connectTimeoutMs: 600, die: () => true, failRestarts: true });
    await upstream.start();
    const started = Date.now();
    const e = (await upstream
      .request('tools/call', { name: 'slow', arguments: {} }, { repeatable: true })
      .catch((x: unknown) => x)) as ManifoldError;
    const took = Date.now() - started;
    expect(e.code).toBe('ERR_OUTCOME_UNKNOWN');
    expect(e.publicMessage).toContain('not reachable again within 600 ms');
    expect(took).toBeGreaterThanOrEqual(550);
    expect(took).toBeLessThan(2000);
    expect(children).toHaveLength(1);
  });
});
