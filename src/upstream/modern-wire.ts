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
} from '../protocol/headers.js';
import { META, withMeta, withMetaField } from '../protocol/versions.js';
import type { Wire } from './http-wire.js';

/**
 * The client capabilities the gateway declares upstream when a request carries none of its own:
 * none. A request relayed for a client declares what that client and the server's clientFeatures
 * both allow (the session sets them); an upstream that needs more answers
 * MissingRequiredClientCapability, which is relayed.
 */
export const GATEWAY_CLIENT_CAPABILITIES: Record<string, unknown> = Object.freeze({});

/**
 * Stamps the gateway's own `_meta` on a request's params, keeping the caller's other keys. The
 * client capabilities are the gateway's for this request when the session set them (the relayed
 * client features), none otherwise; a downstream client's own reserved keys never get this far.
 */
export function modernStamp(version: string, clientVersion: string) {
  const info = { name: 'manifold', version: clientVersion };
  return (params: Record<string, unknown>): Record<string, unknown> => {
    const given = params._meta;
    const meta =
      typeof given === 'object' && given !== null && !Array.isArray(given)
        ? (given as Record<string, unknown>)
        : {};
    return withMetaField(
      params,
      withMeta(meta, {
        [META.protocolVersion]: version,
        [META.clientInfo]: info,
        [META.clientCapabilities]: meta[META.clientCapabilities] ?? GATEWAY_CLIENT_CAPABILITIES,
      }),
    );
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
  const cache = new Map<string, Record<string, string>>();
  const base = {
    ...configured,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': version,
  };
  return {
    readErrorBodies: true,
    headers(method, params) {
      const field = NAME_FIELD[method];
      const name = field ? params[field] : undefined;
      // Task ids are each used a few times only: they would just churn the cache.
      if (field === 'taskId' && typeof name === 'string') {
        return { ...base, 'mcp-method': method, 'mcp-name': encodeHeaderValue(name) };
      }
      const key = typeof name === 'string' ? `${method}\n${name}` : method;
      let headers = cache.get(key);
      if (!headers) {
        headers = { ...base, 'mcp-method': method };
        if (typeof name === 'string') headers['mcp-name'] = encodeHeaderValue(name);
        if (cache.size >= MAX_CACHED) cache.clear();
        cache.set(key, headers);
      }
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
