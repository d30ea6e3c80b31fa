import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CursorSealer } from '../../src/aggregate/cursor.js';
import { anonymousPrincipal } from '../../src/auth/principal.js';
import { ManifoldError } from '../../src/errors.js';
import { classify } from '../../src/protocol/jsonrpc.js';
import { toRpcError } from '../../src/server/mcp/errors.js';
import { negotiateVersion } from '../../src/server/mcp/legacy.js';
import { SessionTable } from '../../src/server/mcp/sessions.js';
import { backoffDelay } from '../../src/upstream/backoff.js';
import { mapCallError, sanitizeUpstreamText, UpstreamRpcError } from '../../src/upstream/call-errors.js';

describe('JSON-RPC classification', () => {
  it('tells requests, notifications and responses apart', () => {
    expect(classify({ jsonrpc: '2.0', id: 1, method: 'ping' }).kind).toBe('request');
    expect(classify({ jsonrpc: '2.0', id: 'a', method: 'ping', params: {} }).kind).toBe('request');
    expect(classify({ jsonrpc: '2.0', method: 'notifications/initialized' }).kind).toBe('notification');
    expect(classify({ jsonrpc: '2.0', id: 1, result: {} }).kind).toBe('response');
    expect(classify({ jsonrpc: '2.0', id: 1, error: { code: 1, message: 'x' } }).kind).toBe('response');
  });

  it('B2: a batch is refused with ERR_BATCH', () => {
    expect(() => classify([{ jsonrpc: '2.0', id: 1, method: 'ping' }])).toThrow(
      expect.objectContaining({ code: 'ERR_BATCH' }),
    );
  });

  it('refuses what is not one JSON-RPC 2.0 message', () => {
    for (const bad of [
      null,
      1,
      'x',
      {},
      { jsonrpc: '1.0', id: 1, method: 'x' },
      { jsonrpc: '2.0', id: {}, method: 'x' },
      { jsonrpc: '2.0', id: 1, method: 'x', params: [1] },
      { jsonrpc: '2.0', id: 1 },
    ]) {
      expect(() => classify(bad)).toThrow(expect.objectContaining({ code: 'ERR_BAD_REQUEST' }));
    }
  });

  it('E6: arbitrary JSON never escapes as anything but a ManifoldError', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        try {
          classify(v);
        } catch (e) {
          expect(e).toBeInstanceOf(ManifoldError);
          expect(toRpcError(e).status).toBeLessThan(500);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('error edge mapping', () => {
  it('maps transport errors to 4xx and method errors to JSON-RPC codes', () => {
    expect(toRpcError(new ManifoldError('ERR_BODY_TOO_LARGE', 'x')).status).toBe(413);
    expect(toRpcError(new ManifoldError('ERR_SESSION_NOT_FOUND', 'x')).status).toBe(404);
    expect(toRpcError(new ManifoldError('ERR_ORIGIN', 'x')).status).toBe(403);
    expect(toRpcError(new ManifoldError('ERR_TOOL_UNKNOWN', 'x')).code).toBe(-32602);
    expect(toRpcError(new ManifoldError('ERR_METHOD_NOT_FOUND', 'x')).code).toBe(-32601);
  });

  it('an unknown error says nothing about its insides', () => {
    const e = toRpcError(new Error('secret path /etc/x at 10.0.0.1'));
    expect(e.message).toBe('internal error');
    expect(JSON.stringify(e)).not.toContain('10.0.0.1');
  });

  it('keeps an upstream standard code, but not a bogus one', () => {
    const keep = mapCallError(new McpError(ErrorCode.InvalidParams, 'bad x'), 'srv', 1000, false);
    expect(toRpcError(keep).code).toBe(-32602);
    expect(keep.publicMessage).toBe('server srv returned an error: bad x');
    const bogus = mapCallError(new McpError(12345, 'odd'), 'srv', 1000, false);
    expect(toRpcError(bogus).code).toBe(-32603);
  });

  it('F5: a timeout and a dropped connection both say the outcome is unknown', () => {
    // The SDK's own errors, as its Protocol makes them.
    const t = mapCallError(
      new McpError(ErrorCode.RequestTimeout, 'Request timed out', { timeout: 500 }),
      'srv',
      500,
      false,
    );
    expect(t.code).toBe('ERR_UPSTREAM_TIMEOUT');
    expect(t.publicMessage).toMatch(/outcome is unknown.*not retried/);
    const c = mapCallError(new McpError(ErrorCode.ConnectionClosed, 'Connection closed'), 'srv', 500, false);
    expect(c.code).toBe('ERR_OUTCOME_UNKNOWN');
    expect(c.publicMessage).toMatch(/outcome is unknown/);
    expect(mapCallError(new Error('aborted'), 'srv', 500, true).code).toBe('ERR_CANCELLED');
  });

  it("an upstream's own -32000 or -32001 answer is its error, not the SDK's closed connection or timeout", () => {
    // RelayRequest the SDK (stdio, SSE): an error answer becomes an McpError with the upstream's code.
    for (const code of [ErrorCode.ConnectionClosed, ErrorCode.RequestTimeout]) {
      const viaSdk = mapCallError(new McpError(code, 'boom'), 'srv', 500, false);
      expect(viaSdk.code).toBe('ERR_UPSTREAM_ERROR');
      expect(viaSdk.publicMessage).toBe('server srv returned an error: boom');
      // The direct path has its own class for error answers.
      const direct = mapCallError(new UpstreamRpcError(code, 'boom'), 'srv', 500, false);
      expect(direct.code).toBe('ERR_UPSTREAM_ERROR');
      expect(direct.data).toMatchObject({ upstreamCode: code });
    }
  });

  it('upstream text is one bounded line without control or bidi characters', () => {
    const s = sanitizeUpstreamText(`a\nb\u001b[31mc\u202ed${'x'.repeat(1000)}`);
    for (const ch of ['\n', '\u001b', '\u202e']) expect(s.includes(ch)).toBe(false);
    expect(s.length).toBeLessThanOrEqual(301);
  });
});

describe('protocol negotiation', () => {
  it('echoes a supported revision and offers the latest otherwise', () => {
    expect(negotiateVersion('2025-06-18')).toBe('2025-06-18');
    expect(negotiateVersion('2025-03-26')).toBe('2025-03-26');
    expect(negotiateVersion('2099-01-01')).toBe('2025-11-25');
    expect(negotiateVersion(undefined)).toBe('2025-11-25');
  });
});

describe('cursors', () => {
  it('B8: round-trips for its owner and version only', async () => {
    const s = await CursorSealer.create();
    const c = await s.seal('v3', 50, 'alice');
    expect(await s.open(c, 'v3', 'alice')).toBe(50);
    await expect(s.open(c, 'v3', 'bob')).rejects.toMatchObject({ code: 'ERR_INVALID_PARAMS' });
    await expect(s.open(c, 'v4', 'alice')).rejects.toMatchObject({ code: 'ERR_INVALID_PARAMS' });
    const other = await CursorSealer.create();
    await expect(other.open(c, 'v3', 'alice')).rejects.toMatchObject({ code: 'ERR_INVALID_PARAMS' });
  });

  it('B8: any tampering is -32602, never a crash', async () => {
    const s = await CursorSealer.create();
    const c = await s.seal('v1', 10, 'p');
    await fc.assert(
      fc.asyncProperty(fc.string(), async (junk) => {
        if (junk === c) return;
        await expect(s.open(junk, 'v1', 'p')).rejects.toMatchObject({ code: 'ERR_INVALID_PARAMS' });
      }),
      { numRuns: 200 },
    );
    const [body, mac] = c.split('.') as [string, string];
    const forged = btoa(JSON.stringify({ v: 'v1', o: 0, p: 'p' })).replace(/=+$/, '');
    await expect(s.open(`${forged}.${mac}`, 'v1', 'p')).rejects.toMatchObject({ code: 'ERR_INVALID_PARAMS' });
    await expect(s.open(`${body}.${mac.slice(1)}`, 'v1', 'p')).rejects.toMatchObject({
      code: 'ERR_INVALID_PARAMS',
    });
  });
});

describe('session table', () => {
  const who = (key: string) => ({ ...anonymousPrincipal, key, viewKey: key });

  it('E5: is bounded; the evicted session is gone', () => {
    const t = new SessionTable({ max: 3, idleSeconds: 3600 });
    const a = t.create(who('p'), '2025-11-25', 0);
    const b = t.create(who('p'), '2025-11-25', 0);
    t.create(who('p'), '2025-11-25', 0);
    t.get(b.id, 'p');
    t.create(who('p'), '2025-11-25', 0);
    expect(t.size).toBe(3);
    expect(t.get(a.id, 'p')).toBeUndefined();
    expect(t.get(b.id, 'p')).toBeDefined();
  });

  it('A4: a session belongs to its owner; another principal cannot find it', () => {
    const t = new SessionTable({ max: 10, idleSeconds: 3600 });
    const s = t.create(who('alice'), '2025-11-25', 0);
    expect(t.get(s.id, 'alice')?.id).toBe(s.id);
    expect(t.get(s.id, 'bob')).toBeUndefined();
  });

  it('ending a session aborts its in-flight calls', () => {
    const t = new SessionTable({ max: 10, idleSeconds: 3600 });
    const s = t.create(who('p'), '2025-11-25', 0);
    const ac = new AbortController();
    s.inflight.add('number:1', ac);
    t.delete(s.id);
    expect(ac.signal.aborted).toBe(true);
  });
});

describe('backoff', () => {
  it('F4: doubles from 1 s to a 60 s cap, with jitter', () => {
    const mid = { baseMs: 1000, capMs: 60_000, jitter: 0.25, random: () => 0.5 };
    expect([1, 2, 3, 4, 7, 8, 50].map((n) => backoffDelay(n, mid))).toEqual([
      1000, 2000, 4000, 8000, 60_000, 60_000, 60_000,
    ]);
    const low = backoffDelay(3, { ...mid, random: () => 0 });
    const high = backoffDelay(3, { ...mid, random: () => 0.999999 });
    expect(low).toBe(3000);
    expect(high).toBeGreaterThan(4900);
    expect(high).toBeLessThanOrEqual(5000);
  });
});
