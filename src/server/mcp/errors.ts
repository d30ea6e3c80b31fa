import { describeError, type ErrorCode, ManifoldError } from '../../errors.js';
import type { Logger } from '../../lib/log.js';
import type { Redactor } from '../../lib/redact.js';
import { errorMessage, type JsonRpcId, RpcCode } from '../../protocol/jsonrpc.js';
import { type Era, McpCode } from '../../protocol/versions.js';

interface Mapping {
  /** HTTP status when the error ends the HTTP exchange itself (transport-level). */
  status: number;
  rpc: number;
}

/**
 * The one place where error codes become HTTP statuses and JSON-RPC codes. Transport errors get
 * a 4xx; method errors travel as a JSON-RPC error inside a 200.
 */
const table: Record<ErrorCode, Mapping> = {
  ERR_CONFIG: { status: 500, rpc: RpcCode.InternalError },
  ERR_PARSE: { status: 400, rpc: RpcCode.ParseError },
  ERR_BATCH: { status: 400, rpc: RpcCode.InvalidRequest },
  ERR_BAD_REQUEST: { status: 400, rpc: RpcCode.InvalidRequest },
  ERR_BODY_TOO_LARGE: { status: 413, rpc: RpcCode.InvalidRequest },
  ERR_ORIGIN: { status: 403, rpc: RpcCode.InvalidRequest },
  ERR_HOST: { status: 403, rpc: RpcCode.InvalidRequest },
  // 2026-07-28 (basic/versioning, streamable-http "Server Validation", basic/index `_meta`).
  ERR_PROTOCOL_VERSION: { status: 400, rpc: McpCode.UnsupportedProtocolVersion },
  ERR_HEADER_MISMATCH: { status: 400, rpc: McpCode.HeaderMismatch },
  ERR_BAD_META: { status: 400, rpc: RpcCode.InvalidParams },
  ERR_MIXED_ERA: { status: 400, rpc: RpcCode.InvalidRequest },
  ERR_MISSING_CAPABILITY: { status: 400, rpc: McpCode.MissingRequiredClientCapability },
  // The gateway's policy refused a server's request to the client (clientFeatures): a call error.
  ERR_CLIENT_FEATURE: { status: 200, rpc: RpcCode.InternalError },
  ERR_SESSION_REQUIRED: { status: 400, rpc: RpcCode.InvalidRequest },
  ERR_SESSION_NOT_FOUND: { status: 404, rpc: -32001 },
  ERR_NOT_ACCEPTABLE: { status: 406, rpc: RpcCode.InvalidRequest },
  ERR_SHUTTING_DOWN: { status: 503, rpc: -32013 },
  ERR_METHOD_NOT_FOUND: { status: 200, rpc: RpcCode.MethodNotFound },
  ERR_INVALID_PARAMS: { status: 200, rpc: RpcCode.InvalidParams },
  ERR_TOOL_UNKNOWN: { status: 200, rpc: RpcCode.InvalidParams },
  // -32002 until 2025-11-25; -32602 since 2026-07-28 (basic/index, error codes), see toRpcError.
  ERR_RESOURCE_UNKNOWN: { status: 200, rpc: -32002 },
  ERR_UPSTREAM_UNAVAILABLE: { status: 200, rpc: -32010 },
  ERR_UPSTREAM_TIMEOUT: { status: 200, rpc: RpcCode.RequestTimeout },
  ERR_UPSTREAM_ERROR: { status: 200, rpc: RpcCode.InternalError },
  ERR_OUTCOME_UNKNOWN: { status: 200, rpc: -32011 },
  // An upstream refused the gateway's credentials (401/403) before running the request.
  ERR_UPSTREAM_AUTH: { status: 200, rpc: -32015 },
  ERR_CANCELLED: { status: 200, rpc: RpcCode.Cancelled },
  ERR_LISTING: { status: 200, rpc: RpcCode.InternalError },
  ERR_ALL_UPSTREAMS_FAILED: { status: 200, rpc: -32012 },
  ERR_EGRESS_DENIED: { status: 200, rpc: -32010 },
  ERR_UPSTREAM_BODY_TOO_LARGE: { status: 200, rpc: -32014 },
  ERR_UNAUTHORIZED: { status: 401, rpc: -32001 },
  ERR_AUTH_UNAVAILABLE: { status: 503, rpc: RpcCode.InternalError },
  ERR_STORE_UNAVAILABLE: { status: 503, rpc: RpcCode.InternalError },
  ERR_RATE_LIMITED: { status: 200, rpc: -32029 },
  // `/mcp/<profile>` for a profile that is not configured (#17): like any unknown path.
  ERR_PROFILE_UNKNOWN: { status: 404, rpc: RpcCode.InvalidRequest },
  // A token bound to one profile (auth.profileClaim) used at another's path.
  ERR_PROFILE_FORBIDDEN: { status: 403, rpc: RpcCode.InvalidRequest },
  // A valid token without the scope an operator endpoint needs (manifold:admin for /metrics).
  ERR_FORBIDDEN: { status: 403, rpc: RpcCode.InvalidRequest },
};

export interface RpcError {
  status: number;
  code: number;
  message: string;
  data: { manifold: ErrorCode | 'ERR_INTERNAL' } & Record<string, unknown>;
}

/** `data` members a client may see; everything else in a ManifoldError's data is for logs. */
const PUBLIC_DATA = [
  'upstreams',
  'supported',
  'requested',
  'requiredCapabilities',
  'retryAfterSeconds',
  'uri',
];

/**
 * Anything thrown while serving becomes a safe, stable error. Unknown errors say nothing inside.
 * `era` only changes the HTTP status: a 2026-07-28 server answers an unknown method with 404
 * (spec 2026-07-28: streamable-http, protocol version header).
 */
export function toRpcError(e: unknown, era: Era = 'legacy'): RpcError {
  if (e instanceof ManifoldError) {
    const m = table[e.code];
    let code = m.rpc;
    // An upstream's own standard JSON-RPC code is kept (e.g. -32602 for its invalid params).
    const upstreamCode = e.data?.upstreamCode;
    if (
      e.code === 'ERR_UPSTREAM_ERROR' &&
      typeof upstreamCode === 'number' &&
      upstreamCode <= -32000 &&
      upstreamCode >= -32768
    ) {
      code = upstreamCode;
    }
    const data: RpcError['data'] = { manifold: e.code };
    if (e.data) for (const k of PUBLIC_DATA) if (e.data[k] !== undefined) data[k] = e.data[k];
    // #19: why an upstream wants a sign-in (login-required, step-up-exhausted…) is the caller's to know.
    if (e.code === 'ERR_UPSTREAM_AUTH' && typeof e.data?.rule === 'string') {
      data.rule = e.data.rule;
      if (typeof e.data.server === 'string') data.server = e.data.server;
    }
    const status = era === 'modern' && e.code === 'ERR_METHOD_NOT_FOUND' ? 404 : m.status;
    if (e.code === 'ERR_RESOURCE_UNKNOWN' && era === 'modern') code = RpcCode.InvalidParams;
    return { status, code, message: e.publicMessage, data };
  }
  return {
    status: 200,
    code: RpcCode.InternalError,
    message: 'internal error',
    data: { manifold: 'ERR_INTERNAL' },
  };
}

/**
 * The one way a failure becomes a JSON-RPC error answer to request `id`: its HTTP status and its
 * body, redacted, since error text can carry an upstream's words, which may echo a configured
 * secret. The gateway's own bugs are logged here.
 */
export function errorAnswer(
  gateway: { log: Logger; redact: Redactor },
  id: JsonRpcId | null,
  e: unknown,
  era: Era,
): { status: number; body: string } {
  const err = toRpcError(e, era);
  if (err.data.manifold === 'ERR_INTERNAL') {
    gateway.log.error('request.internal_error', { error: describeError(e) });
  }
  return { status: err.status, body: gateway.redact(errorMessage(id, err.code, err.message, err.data)) };
}
