import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { describeError, ManifoldError } from '../errors.js';
import { stripUnsafe } from '../guards/text.js';

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
): ManifoldError {
  if (e instanceof ManifoldError) return e;
  if (cancelled) return new ManifoldError('ERR_CANCELLED', 'the request was cancelled');
  if (e instanceof McpError) {
    if (e.code === ErrorCode.RequestTimeout) {
      const max = (e.data as { maxTotalTimeout?: unknown } | undefined)?.maxTotalTimeout;
      if (typeof max === 'number') {
        return new ManifoldError(
          'ERR_UPSTREAM_TIMEOUT',
          `tools/call on server ${server} ran past the absolute maximum of ${max} ms, progress notwithstanding. It was cancelled upstream, but the outcome is unknown: the tool may have run. It was not retried.`,
          { cause: e },
        );
      }
      return new ManifoldError(
        'ERR_UPSTREAM_TIMEOUT',
        `tools/call on server ${server} timed out after ${timeoutMs} ms without progress. It was cancelled upstream, but the outcome is unknown: the tool may have run. It was not retried.`,
        { cause: e },
      );
    }
    if (e.code === ErrorCode.ConnectionClosed) {
      return outcomeUnknown(server, e);
    }
    return new ManifoldError(
      'ERR_UPSTREAM_ERROR',
      `server ${server} returned an error: ${sanitizeUpstreamText(e.message.replace(/^MCP error -?\d+: /, ''))}`,
      { cause: e, data: { upstreamCode: e.code } },
    );
  }
  return outcomeUnknown(server, e);
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
