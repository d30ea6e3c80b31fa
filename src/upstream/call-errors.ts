import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { describeError, ManifoldError } from '../errors.js';
import { stripUnsafe } from '../guards/text.js';
import { McpCode } from '../protocol/versions.js';

/**
 * Upstream text is untrusted: escapes, controls, bidi and zero-width characters go (the same
 * rule as for descriptions), then it becomes one bounded line.
 */
export function sanitizeUpstreamText(text: string, max = 300): string {
  const clean = stripUnsafe(text).replace(/\s+/g, ' ').trim();
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}

/**
 * Maps whatever a relayed tools/call threw to one ManifoldError. A call that may have reached the
 * upstream is never retried (at most once), so the message says the outcome is unknown.
 */
export function mapCallError(
  e: unknown,
  server: string,
  timeoutMs: number,
  cancelled: boolean,
  method = 'tools/call',
): ManifoldError {
  if (e instanceof ManifoldError) return e;
  if (cancelled) return new ManifoldError('ERR_CANCELLED', 'the request was cancelled');
  if (e instanceof UpstreamRpcError) {
    // The request needs a client capability the gateway did not declare upstream (2026-07-28:
    // basic/index). Relayed as the same error, so a modern client gets -32021 with HTTP 400.
    if (e.code === McpCode.MissingRequiredClientCapability) {
      const required = (e.data as { requiredCapabilities?: unknown } | undefined)?.requiredCapabilities;
      return new ManifoldError(
        'ERR_MISSING_CAPABILITY',
        `server ${server} needs a client capability the gateway does not relay: ${sanitizeUpstreamText(e.message)}`,
        {
          cause: e,
          data: { requiredCapabilities: boundedCapabilities(required) },
        },
      );
    }
    return upstreamError(server, e, e.code);
  }
  if (e instanceof McpError) {
    // The SDK reports its own timeouts and closed connections as McpErrors too, with these codes;
    // an upstream may send the same codes for its own reasons. The SDK's own carry its markers.
    const data = e.data as { timeout?: unknown; maxTotalTimeout?: unknown } | undefined;
    if (
      e.code === ErrorCode.RequestTimeout &&
      (typeof data?.timeout === 'number' || typeof data?.maxTotalTimeout === 'number')
    ) {
      const max = data?.maxTotalTimeout;
      if (typeof max === 'number') {
        return new ManifoldError(
          'ERR_UPSTREAM_TIMEOUT',
          `${method} on server ${server} ran past the absolute maximum of ${max} ms, progress notwithstanding. It was cancelled upstream, but the outcome is unknown: the tool may have run. It was not retried.`,
          { cause: e },
        );
      }
      return new ManifoldError(
        'ERR_UPSTREAM_TIMEOUT',
        `${method} on server ${server} timed out after ${timeoutMs} ms without progress. It was cancelled upstream, but the outcome is unknown: the tool may have run. It was not retried.`,
        { cause: e },
      );
    }
    if (e.code === ErrorCode.ConnectionClosed && /Connection closed$/.test(e.message)) {
      return outcomeUnknown(server, e);
    }
    return upstreamError(server, e, e.code);
  }
  return outcomeUnknown(server, e);
}

/** Upstream data is untrusted: capability names as keys, small objects as values, a few at most. */
function boundedCapabilities(v: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return out;
  for (const [k, value] of Object.entries(v).slice(0, 8)) {
    if (!/^[A-Za-z][\w./-]{0,63}$/.test(k)) continue;
    const small = typeof value === 'object' && value !== null && JSON.stringify(value).length <= 512;
    out[k] = small ? value : {};
  }
  return out;
}

function upstreamError(server: string, e: Error, code: number): ManifoldError {
  return new ManifoldError(
    'ERR_UPSTREAM_ERROR',
    `server ${server} returned an error: ${sanitizeUpstreamText(e.message.replace(/^MCP error -?\d+: /, ''))}`,
    { cause: e, data: { upstreamCode: code } },
  );
}

function outcomeUnknown(server: string, cause: unknown): ManifoldError {
  return new ManifoldError(
    'ERR_OUTCOME_UNKNOWN',
    `the connection to server ${server} failed during the call. The outcome is unknown: the tool may have run. It was not retried.`,
    { cause },
  );
}

/** Upstream error text is untrusted and unbounded: one clean line for logs and /healthz. */
export function brief(e: unknown): string {
  return sanitizeUpstreamText(describeError(e), 200);
}

// Failures of a direct call (direct-call.ts), mapped above like the SDK's own.

/** A non-2xx answer to the POST. Its text stays in the error (for logs), never in a result. */
export class UpstreamHttpError extends Error {
  constructor(
    readonly status: number,
    text: string,
  ) {
    super(`HTTP ${status} from the upstream${text ? `: ${text.slice(0, 200)}` : ''}`);
    this.name = 'UpstreamHttpError';
  }
}

/**
 * An error answer from the upstream. Its own class, so that an upstream's -32000 or -32001 is
 * never mistaken for the SDK's own "connection closed" or "request timed out".
 */
export class UpstreamRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'UpstreamRpcError';
  }
}

export class UpstreamProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UpstreamProtocolError';
  }
}
