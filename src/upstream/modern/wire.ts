/**
 * What every request to a 2026-07-28 upstream carries: the per-request `_meta` (protocol version,
 * the gateway's identity and the client capabilities it really supports) and, over HTTP, the
 * standard headers and the `Mcp-Param-*` mirrors of `x-mcp-header` arguments (spec 2026-07-28:
 * basic/index `_meta`; streamable-http "Request Metadata", "Client Behavior").
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  encodeHeaderValue,
  NAME_FIELD,
  type ParamHeader,
  paramHeaderPlan,
  paramValue,
} from '../../protocol/headers.js';
import { META, withMeta, withMetaField } from '../../protocol/versions.js';
import type { Wire } from '../wire/http.js';

/**
 * The client capabilities the gateway declares upstream when a request carries none of its own:
 * none. A request relayed for a client declares what that client and the server's clientFeatures
 * both allow (the session sets them); an upstream that needs more answers
 * MissingRequiredClientCapability, which is relayed.
 */
export const GATEWAY_CLIENT_CAPABILITIES: Record<string, unknown> = Object.freeze({});

/** What one request adds to the stamp: the client's log level and the capabilities it may use. */
export interface StampOptions {
  logLevel?: string | undefined;
  clientCapabilities?: Record<string, unknown> | undefined;
}

/**
 * Stamps the gateway's own `_meta` on a request's params, keeping the caller's other keys, in one
 * copy: the protocol version, the gateway's identity, the client capabilities (the request's own,
 * which the session set from the relayed client features; else a `_meta` given; else none) and
 * the log level the client asked for. A downstream client's own reserved keys never get this far.
 *
 * The `_meta` of a request that brings none of its own is built once per capabilities object and
 * frozen (#18): the relay's requests all pass the same one, and a per-call `_meta` and params copy
 * (two of each, before) cost half a microsecond a call.
 */
export function modernStamp(version: string, clientVersion: string) {
  const info = { name: 'manifold', version: clientVersion };
  let lastCapabilities: Record<string, unknown> | undefined;
  let lastMeta: Record<string, unknown> | undefined;
  const build = (
    given: Record<string, unknown> | undefined,
    capabilities: Record<string, unknown> | undefined,
    logLevel: string | undefined,
  ): Record<string, unknown> => {
    const own: Record<string, unknown> = {
      [META.protocolVersion]: version,
      [META.clientInfo]: info,
      [META.clientCapabilities]:
        capabilities ?? given?.[META.clientCapabilities] ?? GATEWAY_CLIENT_CAPABILITIES,
    };
    if (logLevel !== undefined) own[META.logLevel] = logLevel;
    return given ? withMeta(given, own) : own;
  };
  return (params: Record<string, unknown>, o?: StampOptions): Record<string, unknown> => {
    const given = params._meta;
    const capabilities = o?.clientCapabilities;
    const logLevel = o?.logLevel;
    if (typeof given === 'object' && given !== null && !Array.isArray(given)) {
      return withMetaField(params, build(given as Record<string, unknown>, capabilities, logLevel));
    }
    if (logLevel !== undefined) return withMetaField(params, build(undefined, capabilities, logLevel));
    if (lastMeta === undefined || capabilities !== lastCapabilities) {
      lastCapabilities = capabilities;
      lastMeta = Object.freeze(build(undefined, capabilities, undefined));
    }
    return withMetaField(params, lastMeta);
  };
}

/**
 * The header plans of a listing: for each tool that marks arguments with `x-mcp-header`, which
 * header carries which argument. Tools whose annotations are invalid are reported, and the
 * catalog leaves them out (a client MUST, streamable-http "Schema Extension").
 */
export function headerPlans(tools: readonly Tool[]): Map<string, readonly ParamHeader[]> {
  const plans = new Map<string, readonly ParamHeader[]>();
  for (const tool of tools) {
    const plan = paramHeaderPlan(tool.inputSchema);
    if (plan.ok && plan.params.length > 0) plans.set(tool.name, plan.params);
  }
  return plans;
}

const MAX_CACHED = 2048;

/** The modern wire: headers built once per method and name, plus the argument headers of a call. */
export function modernWire(
  configured: Record<string, string>,
  version: string,
  plans: () => ReadonlyMap<string, readonly ParamHeader[]>,
): Wire {
  // By method, then by name (#18: no key string is built per request); `cached` counts both levels.
  const unnamed = new Map<string, Record<string, string>>();
  const named = new Map<string, Map<string, Record<string, string>>>();
  let cached = 0;
  const base = {
    ...configured,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': version,
  };
  const withName = (method: string, name: string) => ({
    ...base,
    'mcp-method': method,
    'mcp-name': encodeHeaderValue(name),
  });
  const headersOf = (method: string, name: unknown): Record<string, string> => {
    // Past the bound it starts over, before any lookup: nothing is added to a map already dropped.
    if (cached >= MAX_CACHED) {
      unnamed.clear();
      named.clear();
      cached = 0;
    }
    if (typeof name !== 'string') {
      let headers = unnamed.get(method);
      if (!headers) {
        headers = { ...base, 'mcp-method': method };
        unnamed.set(method, headers);
        cached++;
      }
      return headers;
    }
    let byName = named.get(method);
    if (!byName) {
      byName = new Map();
      named.set(method, byName);
    }
    let headers = byName.get(name);
    if (!headers) {
      headers = withName(method, name);
      byName.set(name, headers);
      cached++;
    }
    return headers;
  };
  return {
    readErrorBodies: true,
    headers(method, params) {
      const field = NAME_FIELD[method];
      const name = field ? params[field] : undefined;
      // Task ids are each used a few times only: they would just churn the cache.
      if (field === 'taskId' && typeof name === 'string') return withName(method, name);
      const headers = headersOf(method, name);
      const plan = method === 'tools/call' && typeof name === 'string' ? plans().get(name) : undefined;
      if (!plan) return headers;
      const args = params.arguments;
      const values = typeof args === 'object' && args !== null ? (args as Record<string, unknown>) : {};
      const withParams = { ...headers };
      for (const p of plan) {
        const v = paramValue(values, p);
        if (v !== undefined) withParams[`mcp-param-${p.header.toLowerCase()}`] = encodeHeaderValue(v);
      }
      return withParams;
    },
  };
}
