/**
 * What every request to a 2026-07-28 upstream carries: the per-request `_meta` (protocol version,
 * the gateway's identity and the client capabilities it really supports) and, over HTTP, the
 * standard headers and the `Mcp-Param-*` mirrors of `x-mcp-header` arguments (spec 2026-07-28:
 * basic/index `_meta`; streamable-http "Request Metadata", "Client Behavior").
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { isObject } from '../../lib/json.js';
import {
  encodeHeaderValue,
  NAME_FIELD,
  type ParamHeader,
  paramHeaderPlan,
  paramValue,
} from '../../protocol/headers.js';
import { META } from '../../protocol/versions.js';
import type { SessionCallOptions } from '../session.js';
import type { Wire } from '../wire/http.js';

/**
 * The client capabilities the gateway declares upstream when a request carries none of its own:
 * none. A request relayed for a client declares what that client and the server's clientFeatures
 * both allow (the session sets them); an upstream that needs more answers
 * MissingRequiredClientCapability, which is relayed.
 */
export const GATEWAY_CLIENT_CAPABILITIES: Record<string, unknown> = Object.freeze({});

/**
 * Stamps the gateway's own `_meta` on a request's params, keeping the caller's other keys: the
 * protocol version, the gateway's identity, the client capabilities (the request's own, which the
 * session set from the relayed client features; else a `_meta` given; else none) and the log level
 * the client asked for. A downstream client's own reserved keys never get this far.
 */
export function modernStamp(version: string, clientVersion: string) {
  const info = { name: 'manifold', version: clientVersion };
  return (
    params: Record<string, unknown>,
    o?: Pick<SessionCallOptions, 'logLevel' | 'clientCapabilities'>,
  ): Record<string, unknown> => {
    const given = isObject(params._meta) ? params._meta : undefined;
    const own: Record<string, unknown> = {
      [META.protocolVersion]: version,
      [META.clientInfo]: info,
      [META.clientCapabilities]:
        o?.clientCapabilities ?? given?.[META.clientCapabilities] ?? GATEWAY_CLIENT_CAPABILITIES,
    };
    if (o?.logLevel !== undefined) own[META.logLevel] = o.logLevel;
    // `_meta` before the spread: a kept optimisation for Node 20 (docs/architecture.md).
    const { _meta: _given, ...rest } = params;
    return { _meta: { ...given, ...own }, ...rest };
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

/** The modern wire: the standard headers of each request, plus the argument headers of a call. */
export function modernWire(
  configured: Record<string, string>,
  version: string,
  plans: () => ReadonlyMap<string, readonly ParamHeader[]>,
): Wire {
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
      const own: Record<string, string> = { 'mcp-method': method };
      if (typeof name === 'string') own['mcp-name'] = encodeHeaderValue(name);
      const plan = method === 'tools/call' && typeof name === 'string' ? plans().get(name) : undefined;
      const args = isObject(params.arguments) ? params.arguments : {};
      for (const p of plan ?? []) {
        const v = paramValue(args, p);
        if (v !== undefined) own[`mcp-param-${p.header.toLowerCase()}`] = encodeHeaderValue(v);
      }
      return { ...base, ...own };
    },
  };
}
