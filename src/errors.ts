/**
 * One error hierarchy with stable codes. Code that handles errors narrows on `code`, never on
 * message text. The edge (server/mcp/errors.ts) maps each code to an HTTP status and JSON-RPC error.
 */
export type ErrorCode =
  | 'ERR_CONFIG'
  | 'ERR_BAD_REQUEST'
  | 'ERR_PARSE'
  | 'ERR_BATCH'
  | 'ERR_BODY_TOO_LARGE'
  | 'ERR_ORIGIN'
  | 'ERR_HOST'
  | 'ERR_PROTOCOL_VERSION'
  | 'ERR_HEADER_MISMATCH'
  | 'ERR_BAD_META'
  | 'ERR_MIXED_ERA'
  | 'ERR_MISSING_CAPABILITY'
  | 'ERR_CLIENT_FEATURE'
  | 'ERR_SESSION_REQUIRED'
  | 'ERR_SESSION_NOT_FOUND'
  | 'ERR_NOT_ACCEPTABLE'
  | 'ERR_METHOD_NOT_FOUND'
  | 'ERR_INVALID_PARAMS'
  | 'ERR_TOOL_UNKNOWN'
  | 'ERR_RESOURCE_UNKNOWN'
  | 'ERR_UPSTREAM_UNAVAILABLE'
  | 'ERR_UPSTREAM_TIMEOUT'
  | 'ERR_UPSTREAM_ERROR'
  | 'ERR_OUTCOME_UNKNOWN'
  | 'ERR_UPSTREAM_AUTH'
  | 'ERR_CANCELLED'
  | 'ERR_LISTING'
  | 'ERR_ALL_UPSTREAMS_FAILED'
  | 'ERR_SHUTTING_DOWN'
  | 'ERR_EGRESS_DENIED'
  | 'ERR_UPSTREAM_BODY_TOO_LARGE'
  | 'ERR_UNAUTHORIZED'
  | 'ERR_AUTH_UNAVAILABLE'
  | 'ERR_STORE_UNAVAILABLE'
  | 'ERR_RATE_LIMITED'
  | 'ERR_PROFILE_UNKNOWN'
  | 'ERR_PROFILE_FORBIDDEN'
  | 'ERR_FORBIDDEN';

export class ManifoldError extends Error {
  readonly code: ErrorCode;
  /** Safe to show a client: never carries secrets, URLs or upstream bodies. */
  readonly publicMessage: string;
  readonly data?: Record<string, unknown>;

  constructor(
    code: ErrorCode,
    publicMessage: string,
    options?: { cause?: unknown; data?: Record<string, unknown> },
  ) {
    super(publicMessage, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ManifoldError';
    this.code = code;
    this.publicMessage = publicMessage;
    if (options?.data) this.data = options.data;
  }
}

/** A request body, or a stdio message, longer than `gateway.maxBodyBytes`: refused unread. */
export function bodyTooLarge(max: number): ManifoldError {
  return new ManifoldError('ERR_BODY_TOO_LARGE', `request body exceeds ${max} bytes`);
}

/** A short, single-line description of any thrown value, for logs and diagnostics. */
export function describeError(e: unknown): string {
  if (e instanceof ManifoldError) return e.publicMessage;
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    const base = e.message || e.name;
    return (typeof code === 'string' && !base.includes(code) ? `${code}: ${base}` : base).split('\n')[0]!;
  }
  return String(e).split('\n')[0]!;
}

/**
 * The first thing `pick` finds in `e` or an error under it (its `cause`, an AggregateError's
 * `errors`), a few levels deep: wrappers such as fetch's "fetch failed" hide the error that says
 * what happened.
 */
export function findCause<T>(e: unknown, pick: (e: object) => T | undefined, depth = 0): T | undefined {
  if (depth > 5 || typeof e !== 'object' || e === null) return undefined;
  const found = pick(e);
  if (found !== undefined) return found;
  const { cause, errors } = e as { cause?: unknown; errors?: unknown };
  for (const inner of [cause, ...(Array.isArray(errors) ? errors : [])]) {
    const deeper = findCause(inner, pick, depth + 1);
    if (deeper !== undefined) return deeper;
  }
  return undefined;
}
