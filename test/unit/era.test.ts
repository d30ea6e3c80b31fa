import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManifoldError } from '../../src/errors.js';
import { batchAllowed, decideEra } from '../../src/protocol/era.js';
import {
  decodeHeaderValue,
  encodeHeaderValue,
  paramHeaderPlan,
  paramValue,
  sameParamValue,
} from '../../src/protocol/headers.js';
import { isReservedMetaKey, META } from '../../src/protocol/versions.js';
import { toRpcError } from '../../src/server/mcp/errors.js';

const meta = (extra: Record<string, unknown> = {}) => ({
  [META.protocolVersion]: '2026-07-28',
  [META.clientCapabilities]: {},
  ...extra,
});
const call = (m: Record<string, unknown> | undefined) => ({
  jsonrpc: '2.0',
  id: 7,
  method: 'tools/list',
  params: m === undefined ? {} : { _meta: m },
});

function refusal(fn: () => unknown): { code: string; rpc: number; status: number; message: string } {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof ManifoldError)) throw e;
    const r = toRpcError(e, 'modern');
    return { code: e.code, rpc: r.code, status: r.status, message: e.publicMessage };
  }
  throw new Error('expected a refusal');
}

describe('the era of a request (spec 2026-07-28: basic/versioning, streamable-http)', () => {
  it('a 2026-07-28 header with matching _meta is modern, with its declared capabilities and log level', () => {
    const d = decideEra({
      versionHeader: '2026-07-28',
      sessionHeader: undefined,
      message: call(meta({ [META.clientCapabilities]: { sampling: {} }, [META.logLevel]: 'info' })),
    });
    expect(d).toEqual({
      era: 'modern',
      meta: { version: '2026-07-28', clientCapabilities: { sampling: {} }, logLevel: 'info' },
    });
  });

  it('reads _meta once into the progress token and the keys relayed upstream', () => {
    const d = decideEra({
      versionHeader: '2026-07-28',
      sessionHeader: undefined,
      message: call(meta({ progressToken: 'p1', traceparent: 't', 'dev.mcp/x': 1, 'acme/y': 2 })),
    });
    expect(d.meta).toMatchObject({ progressToken: 'p1', relayed: { traceparent: 't', 'acme/y': 2 } });
    const legacy = decideEra({
      versionHeader: undefined,
      sessionHeader: 's',
      message: call({ progressToken: { bad: true }, [META.logLevel]: 'debug', vendor: 'v' }),
    });
    expect(legacy).toEqual({ era: 'legacy', version: undefined, meta: { relayed: { vendor: 'v' } } });
    expect(
      refusal(() =>
        decideEra({
          versionHeader: '2025-11-25',
          sessionHeader: 's',
          message: { ...call(undefined), params: { _meta: 'text' } },
        }),
      ),
    ).toMatchObject({ code: 'ERR_BAD_META', rpc: -32602 });
  });

  it('no header, or a legacy one, without modern _meta is legacy', () => {
    expect(decideEra({ versionHeader: undefined, sessionHeader: 's', message: call(undefined) })).toEqual({
      era: 'legacy',
      version: undefined,
      meta: {},
    });
    expect(
      decideEra({ versionHeader: '2025-06-18', sessionHeader: 's', message: call({ progressToken: 1 }) }),
    ).toEqual({
      era: 'legacy',
      version: '2025-06-18',
      meta: { progressToken: 1 },
    });
  });

  it('missing _meta or a missing required field is -32602 with HTTP 400; clientInfo is optional', () => {
    for (const m of [
      undefined,
      { [META.clientCapabilities]: {} },
      { [META.protocolVersion]: '2026-07-28' },
    ]) {
      const r = refusal(() =>
        decideEra({ versionHeader: '2026-07-28', sessionHeader: undefined, message: call(m) }),
      );
      expect(r).toMatchObject({ code: 'ERR_BAD_META', rpc: -32602, status: 400 });
    }
    const bad = refusal(() =>
      decideEra({
        versionHeader: '2026-07-28',
        sessionHeader: undefined,
        message: call(meta({ [META.logLevel]: 'loud' })),
      }),
    );
    expect(bad.rpc).toBe(-32602);
  });

  it('header and _meta that disagree are HeaderMismatch (-32020, 400), whichever era each names', () => {
    const cases: [string | undefined, string][] = [
      ['2026-07-28', 'v999.0.0'],
      ['2025-11-25', '2026-07-28'],
      [undefined, '2026-07-28'],
    ];
    for (const [header, inMeta] of cases) {
      const r = refusal(() =>
        decideEra({
          versionHeader: header,
          sessionHeader: undefined,
          message: call(meta({ [META.protocolVersion]: inMeta })),
        }),
      );
      expect(r, `${header} vs ${inMeta}`).toMatchObject({
        code: 'ERR_HEADER_MISMATCH',
        rpc: -32020,
        status: 400,
      });
      expect(r.message).toMatch(/send|leaves it out/);
    }
  });

  it('an unknown version is UnsupportedProtocolVersion (-32022, 400) listing what is served', () => {
    try {
      decideEra({
        versionHeader: 'v999.0.0',
        sessionHeader: undefined,
        message: call(meta({ [META.protocolVersion]: 'v999.0.0' })),
      });
      throw new Error('accepted');
    } catch (e) {
      const r = toRpcError(e, 'modern');
      expect(r.code).toBe(-32022);
      expect(r.status).toBe(400);
      expect(r.data.supported).toEqual(['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26']);
      expect(r.data.requested).toBe('v999.0.0');
    }
  });

  it('a modern request with Mcp-Session-Id is a mixed request, refused with a message that says what to change', () => {
    const r = refusal(() =>
      decideEra({ versionHeader: '2026-07-28', sessionHeader: 'abc', message: call(meta()) }),
    );
    expect(r).toMatchObject({ code: 'ERR_MIXED_ERA', rpc: -32600, status: 400 });
    expect(r.message).toContain('drop the header');
  });

  it('batches belong to 2025-03-26 only', () => {
    expect(batchAllowed(undefined, '2025-03-26')).toBe(true);
    expect(batchAllowed('2025-03-26', undefined)).toBe(true);
    expect(batchAllowed(undefined, '2025-11-25')).toBe(false);
    expect(batchAllowed('2025-06-18', '2025-03-26')).toBe(false);
  });

  it('method-not-found is 404 for a modern client and a 200 for a legacy one', () => {
    const e = new ManifoldError('ERR_METHOD_NOT_FOUND', 'Method not found: x');
    expect(toRpcError(e, 'modern')).toMatchObject({ status: 404, code: -32601 });
    expect(toRpcError(e, 'legacy')).toMatchObject({ status: 200, code: -32601 });
  });

  it('never throws anything but a ManifoldError, whatever the headers and body (fuzz)', () => {
    fc.assert(
      fc.property(
        fc.option(fc.oneof(fc.constantFrom('2026-07-28', '2025-11-25', '2025-03-26'), fc.string()), {
          nil: undefined,
        }),
        fc.option(fc.string(), { nil: undefined }),
        fc.dictionary(fc.string(), fc.jsonValue()),
        (versionHeader, sessionHeader, message) => {
          try {
            decideEra({ versionHeader, sessionHeader, message: message as Record<string, unknown> });
          } catch (e) {
            expect(e).toBeInstanceOf(ManifoldError);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('request metadata headers', () => {
  it('Base64 sentinel values round-trip, and only unsafe values are encoded (spec table)', () => {
    expect(encodeHeaderValue('us-west1')).toBe('us-west1');
    expect(encodeHeaderValue('Hello, 世界')).toBe('=?base64?SGVsbG8sIOS4lueVjA==?=');
    expect(encodeHeaderValue(' padded ')).toBe('=?base64?IHBhZGRlZCA=?=');
    expect(encodeHeaderValue('line1\nline2')).toBe('=?base64?bGluZTEKbGluZTI=?=');
    // A leading U+FEFF is data, not a byte-order mark to drop (a property run found it).
    expect(decodeHeaderValue(encodeHeaderValue('\uFEFFx'))).toBe('\uFEFFx');
    expect(encodeHeaderValue('=?base64?literal?=')).toBe('=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=');
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        expect(decodeHeaderValue(encodeHeaderValue(s))).toBe(s);
      }),
    );
  });

  it('malformed sentinel values and control characters are refused', () => {
    expect(decodeHeaderValue('=?base64?!!!?=')).toBeUndefined();
    expect(decodeHeaderValue('=?base64?/w==?=')).toBeUndefined(); // not UTF-8
    expect(decodeHeaderValue('a\u0001b')).toBeUndefined();
  });

  it('x-mcp-header: statically reachable primitive properties only, unique, tokens', () => {
    const ok = paramHeaderPlan({
      type: 'object',
      properties: {
        region: { type: 'string', 'x-mcp-header': 'Region' },
        opts: { type: 'object', properties: { n: { type: 'integer', 'x-mcp-header': 'N' } } },
      },
    });
    expect(ok).toEqual({
      ok: true,
      params: [
        { header: 'Region', path: ['region'], type: 'string' },
        { header: 'N', path: ['opts', 'n'], type: 'integer' },
      ],
    });
    const bad = [
      { type: 'object', properties: { a: { type: 'number', 'x-mcp-header': 'A' } } },
      { type: 'object', properties: { a: { type: 'string', 'x-mcp-header': 'has space' } } },
      {
        type: 'object',
        properties: {
          a: { type: 'string', 'x-mcp-header': 'A' },
          b: { type: 'string', 'x-mcp-header': 'a' },
        },
      },
      {
        type: 'object',
        properties: { a: { type: 'array', items: { type: 'string', 'x-mcp-header': 'A' } } },
      },
      { type: 'object', anyOf: [{ properties: { a: { type: 'string', 'x-mcp-header': 'A' } } }] },
      { type: 'object', 'x-mcp-header': 'Root' },
    ];
    for (const schema of bad) expect(paramHeaderPlan(schema).ok, JSON.stringify(schema)).toBe(false);
    expect(paramHeaderPlan({ type: 'object', properties: {} })).toEqual({ ok: true, params: [] });
  });

  it('argument values become header values; absent and null send nothing; integers compare numerically', () => {
    const p = { header: 'N', path: ['opts', 'n'], type: 'integer' as const };
    expect(paramValue({ opts: { n: 42 } }, p)).toBe('42');
    expect(paramValue({ opts: { n: null } }, p)).toBeUndefined();
    expect(paramValue({}, p)).toBeUndefined();
    expect(paramValue({ b: true }, { header: 'B', path: ['b'], type: 'boolean' })).toBe('true');
    expect(sameParamValue('42.0', '42', 'integer')).toBe(true);
    expect(sameParamValue('42.0', '42', 'string')).toBe(false);
  });

  it('reserved _meta prefixes: the second label modelcontextprotocol or mcp', () => {
    expect(isReservedMetaKey('io.modelcontextprotocol/clientInfo')).toBe(true);
    expect(isReservedMetaKey('dev.mcp/x')).toBe(true);
    expect(isReservedMetaKey('com.example.mcp/x')).toBe(false);
    expect(isReservedMetaKey('progressToken')).toBe(false);
    expect(isReservedMetaKey('traceparent')).toBe(false);
    expect(isReservedMetaKey('com.mcp.example/x')).toBe(true);
    expect(isReservedMetaKey('org.modelcontextprotocol.sub/x')).toBe(true);
    expect(isReservedMetaKey('a.mcpx/x')).toBe(false);
    expect(isReservedMetaKey('x.modelcontextprotocolx/y')).toBe(false);
    expect(isReservedMetaKey('x.modelcontextprotoco/y')).toBe(false);
    expect(isReservedMetaKey('mcp/x')).toBe(false);
    expect(isReservedMetaKey('io.mcp')).toBe(false);
    expect(isReservedMetaKey('a/b.mcp.c')).toBe(false);
  });
});
