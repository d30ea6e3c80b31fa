import { describeError, findCause, ManifoldError } from '../errors.js';
import { stripUnsafe } from '../guards/text.js';
import { isObject } from '../lib/json.js';
import { McpCode } from '../protocol/versions.js';
import type { OAuthRule } from './oauth/types.js';

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
 * upstream is not resent here, so the message says the outcome is unknown; `Upstream.request`
 * resends the two safe cases (#14: a `read` tool after a dropped connection, and a session the
 * server no longer knew) and words what it did not resend with `notResentError`.
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
  if (sessionExpired(e)) return notResentError(server, e, { mayHaveRun: false, why: { kind: 'not-resent' } });
  const refused = authRefusal(e);
  if (refused !== undefined) {
    // The server turned the request away at its door: it never ran, so saying so is safe.
    return new ManifoldError(
      'ERR_UPSTREAM_AUTH',
      `server ${server} refused the ${method} with HTTP ${refused} before it ran: the gateway's credentials for it were not accepted. It was not retried.`,
      { cause: e, data: { status: refused } },
    );
  }
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
  if (isSdkMcpError(e)) {
    // The SDK reports its own timeouts and closed connections as McpErrors too, with these codes;
    // an upstream may send the same codes for its own reasons. The SDK's own carry its markers.
    const data = e.data as { timeout?: unknown; maxTotalTimeout?: unknown } | undefined;
    if (
      e.code === SDK_REQUEST_TIMEOUT &&
      (typeof data?.timeout === 'number' || typeof data?.maxTotalTimeout === 'number')
    ) {
      const max = data?.maxTotalTimeout;
      if (typeof max === 'number') {
        return new ManifoldError(
          'ERR_UPSTREAM_TIMEOUT',
          `${method} on server ${server} ran past the absolute maximum of ${max} ms, progress notwithstanding. It was cancelled upstream, but the outcome is unknown: the tool may have run. It was not retried; ${CHECK}.`,
          { cause: e },
        );
      }
      return new ManifoldError(
        'ERR_UPSTREAM_TIMEOUT',
        `${method} on server ${server} timed out after ${timeoutMs} ms without progress. It was cancelled upstream, but the outcome is unknown: the tool may have run. It was not retried; ${CHECK}.`,
        { cause: e },
      );
    }
    if (e.code === SDK_CONNECTION_CLOSED && /Connection closed$/.test(e.message)) {
      return outcomeUnknown(server, e);
    }
    return upstreamError(server, e, e.code);
  }
  if (e instanceof UpstreamInvalidAnswer) {
    // The server answered: the connection is fine, and the same request would get the same answer.
    return new ManifoldError(
      'ERR_UPSTREAM_ERROR',
      `server ${server} answered the ${method} with an invalid result: ${sanitizeUpstreamText(e.message, 200)}. The outcome is unknown: the tool may have run. It was not retried; ${CHECK}.`,
      { cause: e },
    );
  }
  return outcomeUnknown(server, e);
}

/** The SDK's ErrorCode.RequestTimeout and ErrorCode.ConnectionClosed. */
const SDK_REQUEST_TIMEOUT = -32001;
const SDK_CONNECTION_CLOSED = -32000;

/**
 * The SDK's McpError (and its subclasses), recognised by shape rather than by class: importing the
 * class would load the SDK's whole schema module before the gateway listens.
 * Its constructor always words the message `MCP error <code>: …`.
 */
export function isSdkMcpError(e: unknown): e is Error & { code: number; data?: unknown } {
  return (
    e instanceof Error &&
    typeof (e as { code?: unknown }).code === 'number' &&
    e.message.startsWith('MCP error ')
  );
}

/** Upstream data is untrusted: capability names as keys, small objects as values, a few at most. */
function boundedCapabilities(v: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!isObject(v)) return out;
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
  return notResentError(server, cause, { mayHaveRun: true, why: { kind: 'not-resent' } });
}

/** What a model is told to do about a call whose outcome is unknown. */
const CHECK = 'check whether it took effect before calling it again';

/** Why a failed request was not sent (again). */
export type NotResent =
  /** No reason given (mapCallError's own wording). */
  | { kind: 'not-resent' }
  /** A connection failure, but running the request twice might do harm (not a `read` tool). */
  | { kind: 'not-read' }
  /** The server's `retry` is 0. */
  | { kind: 'retry-zero' }
  /** Resent `resends` times, the server's `retry`, and failed again. */
  | { kind: 'exhausted'; resends: number }
  /** No fresh connection within the connect timeout. */
  | { kind: 'no-connection'; waitedMs: number };

/**
 * The error for a request that failed and was not resent. `mayHaveRun`: some attempt may have
 * reached the tool (the outcome is unknown); otherwise every attempt was refused for a session the
 * server did not know, so nothing ran and calling again is safe.
 */
export function notResentError(
  server: string,
  cause: unknown,
  o: { mayHaveRun: boolean; why: NotResent },
): ManifoldError {
  const { why, mayHaveRun } = o;
  const times = (n: number) => (n === 1 ? 'once' : `${n} times`);
  // What to do next: safe to call again when nothing ran, else check first.
  const next = mayHaveRun ? CHECK : 'calling it again is safe';
  const tail =
    why.kind === 'not-read'
      ? ` It was not resent because it is not classified read; ${next}.`
      : why.kind === 'retry-zero'
        ? ` It was not resent because retry is 0 for this server; ${next}.`
        : why.kind === 'exhausted'
          ? ` It was resent ${times(why.resends)}, the most this server allows, and ${mayHaveRun ? 'failed' : 'refused'} again; ${next}.`
          : why.kind === 'no-connection'
            ? mayHaveRun
              ? ` It was not resent because the server was not reachable again within ${why.waitedMs} ms; ${CHECK}.`
              : ` It was not resent: no new session could be opened within ${why.waitedMs} ms. Calling it again is safe once the server is back.`
            : ` It was not resent; ${next}.`;
  if (!mayHaveRun) {
    const lead = `server ${server} did not know the gateway's session (HTTP 404), so the call did not run.`;
    return new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', `${lead}${tail}`, { cause });
  }
  const lead = `the connection to server ${server} failed during the call. The outcome is unknown: the tool may have run.`;
  return new ManifoldError('ERR_OUTCOME_UNKNOWN', `${lead}${tail}`, { cause });
}

/** Upstream error text is untrusted and unbounded: one clean line for logs and /healthz. */
export function brief(e: unknown): string {
  return sanitizeUpstreamText(describeError(e), 200);
}

// Failures of a direct call (direct-call.ts), mapped above like the SDK's own.

/**
 * A non-2xx answer to the POST. Its text stays in the error (for logs), never in a result; the
 * body of a 401 or 403 is not kept at all: servers that refuse often echo the credentials.
 */
export class UpstreamHttpError extends Error {
  constructor(
    readonly status: number,
    text: string,
  ) {
    const kept = AUTH_STATUSES.has(status) ? '' : text;
    super(`HTTP ${status} from the upstream${kept ? `: ${kept.slice(0, 200)}` : ''}`);
    this.name = 'UpstreamHttpError';
  }
}

const AUTH_STATUSES = new Set([401, 403]);

/**
 * A legacy server answered 404 to a request that carried its `Mcp-Session-Id`: it no longer
 * knows the session (it restarted, or expired it), and ran nothing (spec 2025-11-25: transports,
 * session management). Only the legacy wire raises it: a 2026-07-28 server has no sessions, and
 * its 404 means something else (an unknown endpoint, or an error answer with a body).
 */
export class UpstreamSessionExpired extends UpstreamHttpError {
  constructor(text: string) {
    super(404, text);
    this.name = 'UpstreamSessionExpired';
  }
}

/** Whether a request was refused for a session the server no longer knows (looking through causes). */
export function sessionExpired(e: unknown): boolean {
  return findCause(e, (x) => x instanceof UpstreamSessionExpired || undefined) === true;
}

/**
 * The HTTP status an upstream refused with, from our own error or the SDK's transports (whose
 * StreamableHTTPError and SseError carry it as `code`), looking through causes.
 */
export function httpStatusOf(e: unknown): number | undefined {
  return findCause(e, (x) => {
    if (x instanceof UpstreamHttpError) return x.status;
    const { name, code, message } = x as { name?: unknown; code?: unknown; message?: unknown };
    if (typeof code !== 'number' || code < 400) return undefined;
    const fromSdk =
      code < 600 && typeof message === 'string' && /^(Streamable HTTP|SSE) error:/.test(message);
    return fromSdk || name === 'SseError' ? code : undefined;
  });
}

/** Whether the upstream refused the gateway's credentials (401 or 403). */
export function authRefusal(e: unknown): number | undefined {
  const status = httpStatusOf(e);
  return status !== undefined && AUTH_STATUSES.has(status) ? status : undefined;
}

const OWN_WORDS = new Set<string>([
  'ERR_EGRESS_DENIED',
  'ERR_UPSTREAM_TIMEOUT',
  'ERR_UPSTREAM_BODY_TOO_LARGE',
  'ERR_UPSTREAM_UNAVAILABLE',
  'ERR_LISTING',
  'ERR_UPSTREAM_AUTH',
]);

const ERRNO: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host lookup failed',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed',
  UND_ERR_SOCKET: 'connection closed',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
};

/**
 * Why an upstream is unavailable, in words safe for anyone who may see the server: no upstream
 * body, no address, no command line, no configured value (#13.4). /healthz and client errors
 * show this; the logs keep the detail (`brief`), redacted, except for a 401/403 body.
 */
export function publicReason(e: unknown): string {
  const status = httpStatusOf(e);
  if (status !== undefined) {
    return AUTH_STATUSES.has(status)
      ? `refused with HTTP ${status}: the gateway's credentials for it were not accepted`
      : `HTTP ${status} from the server`;
  }
  // The gateway's own words for these carry no upstream text, address or command.
  if (e instanceof ManifoldError && OWN_WORDS.has(e.code)) return sanitizeUpstreamText(e.publicMessage, 200);
  const errno = findCause(e, ({ code }: { code?: unknown }) =>
    typeof code === 'string' && Object.hasOwn(ERRNO, code) ? ERRNO[code] : undefined,
  );
  if (errno) return errno;
  const message = e instanceof Error ? e.message : String(e);
  const spawn = /^could not start .*: ([A-Z][A-Z0-9_]{1,20})$/.exec(message);
  if (spawn) return `the command could not be started (${spawn[1]})`;
  if (e instanceof UpstreamProtocolError) return 'protocol error';
  if (/timed? ?out/i.test(message)) return 'timed out';
  return 'connection failed';
}

/** What a log line may say about an upstream failure: the detail, but never a 401/403 body. */
export function logReason(e: unknown): string {
  return authRefusal(e) !== undefined ? publicReason(e) : brief(e);
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

/** An answer to the request that is not a valid one (no connection failed: nothing is resent). */
export class UpstreamInvalidAnswer extends UpstreamProtocolError {}

/**
 * The server needs a login (or refused every authorization) before it serves this identity
 * (#19). It carries no upstream text and no token; `loginUrl` only for the caller's own login
 * (mode `user`): a deployment login is begun by an admin, never through a call error.
 */
export class UpstreamAuthRequired extends ManifoldError {
  constructor(
    readonly server: string,
    readonly rule: OAuthRule,
    readonly loginUrl?: string,
  ) {
    // With the caller's own link (mode user), resources/read and prompts/get show it as it is.
    super(
      'ERR_UPSTREAM_AUTH',
      rule === 'step-up-exhausted'
        ? `server ${server} keeps asking for more scopes than the sign-ins granted; an operator must look at it`
        : loginUrl
          ? `server ${server} needs you to sign in: ${loginUrl}`
          : `server ${server} needs a sign-in before it can be used${rule === 'login-required' ? '' : ` (${rule})`}`,
      { data: { rule, server } },
    );
  }
}
