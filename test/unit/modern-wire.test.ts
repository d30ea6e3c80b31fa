import { describe, expect, it } from 'vitest';
import type { ParamHeader } from '../../src/protocol/headers.js';
import { META } from '../../src/protocol/versions.js';
import { GATEWAY_CLIENT_CAPABILITIES, modernStamp, modernWire } from '../../src/upstream/modern/wire.js';

// What a request to a 2026-07-28 upstream carries (spec 2026-07-28: basic/index `_meta`,
// streamable-http "Request Metadata"), whatever came before it.
describe('modernStamp', () => {
  const stamp = modernStamp('2026-07-28', '9.9.9');
  const identity = { name: 'manifold', version: '9.9.9' };

  it('stamps version, identity and no capabilities on a request with no _meta, keeping params', () => {
    const params = { name: 'echo', arguments: { message: 'hi' } };
    const sent = stamp(params);
    expect(sent).toEqual({
      _meta: {
        [META.protocolVersion]: '2026-07-28',
        [META.clientInfo]: identity,
        [META.clientCapabilities]: {},
      },
      name: 'echo',
      arguments: { message: 'hi' },
    });
    expect(params).toEqual({ name: 'echo', arguments: { message: 'hi' } });
  });

  it('declares the capabilities the request passes, in a _meta of its own', () => {
    const caps = { sampling: {} };
    const a = stamp({ name: 'a' }, { clientCapabilities: caps });
    const b = stamp({ name: 'b' }, { clientCapabilities: caps });
    expect((a._meta as Record<string, unknown>)[META.clientCapabilities]).toBe(caps);
    expect(b._meta).not.toBe(a._meta);
    const other = { elicitation: {} };
    const c = stamp({ name: 'c' }, { clientCapabilities: other });
    expect((c._meta as Record<string, unknown>)[META.clientCapabilities]).toBe(other);
    const d = stamp({ name: 'd' });
    expect((d._meta as Record<string, unknown>)[META.clientCapabilities]).toBe(GATEWAY_CLIENT_CAPABILITIES);
    // Back to the first: its own capabilities again, not the last ones cached.
    const e = stamp({ name: 'e' }, { clientCapabilities: caps });
    expect((e._meta as Record<string, unknown>)[META.clientCapabilities]).toBe(caps);
  });

  it('adds the log level after the capabilities, on a fresh _meta each time', () => {
    const a = stamp({ name: 'a' }, { logLevel: 'debug', clientCapabilities: {} });
    const meta = a._meta as Record<string, unknown>;
    expect(Object.keys(meta)).toEqual([
      META.protocolVersion,
      META.clientInfo,
      META.clientCapabilities,
      META.logLevel,
    ]);
    expect(meta[META.logLevel]).toBe('debug');
    const b = stamp({ name: 'b' }, { logLevel: 'info' });
    expect((b._meta as Record<string, unknown>)[META.logLevel]).toBe('info');
    expect(b._meta).not.toBe(a._meta);
    // No log level: none in the `_meta`.
    expect(stamp({ name: 'c' })._meta).not.toHaveProperty([META.logLevel]);
  });

  it("keeps a request's own _meta keys beside the gateway's, never mutating it", () => {
    const own = { traceparent: '00-abc-def-01', [META.clientCapabilities]: { roots: {} } };
    const params = { name: 'x', _meta: own };
    const sent = stamp(params);
    const meta = sent._meta as Record<string, unknown>;
    expect(Object.keys(meta).sort()).toEqual(
      [META.protocolVersion, META.clientInfo, META.clientCapabilities, 'traceparent'].sort(),
    );
    // Capabilities given in the `_meta` stand when the request passes none; passed ones win.
    expect(meta[META.clientCapabilities]).toEqual({ roots: {} });
    const caps = { sampling: {} };
    const passed = stamp(params, { clientCapabilities: caps, logLevel: 'error' })._meta as Record<
      string,
      unknown
    >;
    expect(passed[META.clientCapabilities]).toBe(caps);
    expect(passed[META.logLevel]).toBe('error');
    expect(params._meta).toBe(own);
    expect(Object.keys(own)).toEqual(['traceparent', META.clientCapabilities]);
  });
});

describe('modernWire headers', () => {
  const plans = new Map<string, readonly ParamHeader[]>();
  const wire = modernWire({ 'X-Api-Key': 'k' }, '2026-07-28', () => plans);

  it('carries the standard headers per method and name', () => {
    const a = wire.headers('tools/call', { name: 'echo' });
    expect(a).toEqual({
      'X-Api-Key': 'k',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'echo',
    });
    // The same name under another method, and another name under the same method, differ.
    expect(wire.headers('prompts/get', { name: 'echo' })['mcp-method']).toBe('prompts/get');
    expect(wire.headers('tools/call', { name: 'add' })['mcp-name']).toBe('add');
    expect(wire.headers('resources/read', { uri: 'file:///a b' })['mcp-name']).toBe('file:///a b');
    // A method without a name field, and a named method whose name is missing: no Mcp-Name.
    const list = wire.headers('tools/list', {});
    expect(list['mcp-method']).toBe('tools/list');
    expect(list).not.toHaveProperty('mcp-name');
    expect(wire.headers('tools/list', { cursor: 'c' })).toEqual(list);
    expect(wire.headers('tools/call', {})).not.toHaveProperty('mcp-name');
  });

  it('encodes a name that is not plain ASCII, and mirrors x-mcp-header arguments per call', () => {
    expect(wire.headers('tools/call', { name: 'São' })['mcp-name']).toMatch(/^=\?base64\?.*\?=$/);
    plans.set('geo', [{ header: 'Region', path: ['region'], type: 'string' }]);
    const one = wire.headers('tools/call', { name: 'geo', arguments: { region: 'eu-west-1' } });
    const two = wire.headers('tools/call', { name: 'geo', arguments: { region: 'us-east-2' } });
    expect(one['mcp-param-region']).toBe('eu-west-1');
    expect(two['mcp-param-region']).toBe('us-east-2');
    // A call without the argument carries no header for it.
    expect(wire.headers('tools/call', { name: 'geo' })).not.toHaveProperty('mcp-param-region');
  });
});
