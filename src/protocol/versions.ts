/**
 * The protocol's vocabulary that both edges share: revisions, reserved `_meta` keys and the
 * error codes the 2026-07-28 revision defines. No policy lives here, and nothing here branches on
 * an era: src/server decides the downstream era, src/upstream each upstream's.
 */

/** Revisions with per-request metadata and no handshake (spec 2026-07-28: basic/versioning). */
export const MODERN_VERSIONS = ['2026-07-28'] as const;
/** Revisions with an `initialize` handshake and sessions, newest first. */
export const LEGACY_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
/** Everything served downstream, newest first (what `server/discover` and -32022 list). */
export const SUPPORTED_VERSIONS: readonly string[] = [...MODERN_VERSIONS, ...LEGACY_VERSIONS];

export const LATEST_MODERN = MODERN_VERSIONS[0];
export const LATEST_LEGACY = LEGACY_VERSIONS[0];
/**
 * A legacy request without the version header is taken as 2025-03-26 (spec 2025-11-25:
 * transports, protocol version header; kept by 2026-07-28: streamable-http, protocol version header).
 */
export const DEFAULT_LEGACY_VERSION = '2025-03-26';

export type Era = 'legacy' | 'modern';

export function isModernVersion(v: unknown): v is (typeof MODERN_VERSIONS)[number] {
  return typeof v === 'string' && (MODERN_VERSIONS as readonly string[]).includes(v);
}

export function isLegacyVersion(v: unknown): v is (typeof LEGACY_VERSIONS)[number] {
  return typeof v === 'string' && (LEGACY_VERSIONS as readonly string[]).includes(v);
}

/** Reserved `_meta` keys (spec 2026-07-28: basic/index, `_meta`). */
export const META = {
  protocolVersion: 'io.modelcontextprotocol/protocolVersion',
  clientInfo: 'io.modelcontextprotocol/clientInfo',
  clientCapabilities: 'io.modelcontextprotocol/clientCapabilities',
  logLevel: 'io.modelcontextprotocol/logLevel',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
  subscriptionId: 'io.modelcontextprotocol/subscriptionId',
  /** 2025-11-25 tasks: the task a message belongs to (basic/utilities/tasks). */
  relatedTask: 'io.modelcontextprotocol/related-task',
} as const;

/** The tasks extension of 2026-07-28 (SEP-2663), negotiated under `capabilities.extensions`. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

const KNOWN_RESERVED: ReadonlySet<string> = new Set([...Object.values(META), TASKS_EXTENSION]);

/**
 * Every `_meta` key under a reserved MCP prefix: never relayed from one side to the other as-is.
 * The prefix's second label is `modelcontextprotocol` or `mcp` (`io.modelcontextprotocol/…`,
 * `dev.mcp/…`). Checked on every key of every relayed request, so without allocating.
 */
export function isReservedMetaKey(key: string): boolean {
  // The keys the revisions define, which most requests carry, are one lookup.
  if (KNOWN_RESERVED.has(key)) return true;
  if (key.startsWith('io.modelcontextprotocol/')) return true;
  const slash = key.indexOf('/');
  if (slash === -1) return false;
  const dot = key.indexOf('.');
  if (dot === -1 || dot > slash) return false;
  let end = key.indexOf('.', dot + 1);
  if (end === -1 || end > slash) end = slash;
  const length = end - dot - 1;
  return (
    (length === 20 && key.startsWith('modelcontextprotocol', dot + 1)) ||
    (length === 3 && key.startsWith('mcp', dot + 1))
  );
}

/** Error codes of the reserved -32020..-32099 range (spec 2026-07-28: basic/index, error codes). */
export const McpCode = {
  HeaderMismatch: -32020,
  MissingRequiredClientCapability: -32021,
  UnsupportedProtocolVersion: -32022,
} as const;

/** The log levels of `logLevel` and `logging/setLevel` (RFC 5424 severities). */
export const LOG_LEVELS = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
] as const;
export type McpLogLevel = (typeof LOG_LEVELS)[number];

/** Methods that may answer with an `input_required` result (spec 2026-07-28: patterns/mrtr). */
export const MRTR_METHODS: ReadonlySet<string> = new Set(['tools/call', 'prompts/get', 'resources/read']);

/**
 * `{ ...meta, ...own }` for `_meta` objects, with `own`'s keys first.
 *
 * @example withMeta({ a: 1, [META.logLevel]: 'x' }, { [META.logLevel]: 'info' }) // { 'io.…/logLevel': 'info', a: 1 }
 */
export function withMeta(
  meta: Readonly<Record<string, unknown>> | undefined,
  own: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  return meta ? { ...own, ...meta, ...own } : { ...own };
}

/**
 * `{ ...params, _meta }`, with `_meta` first. Written before the spread: Node 20 takes V8's slow
 * path for a key added to an object after a spread, and every request to a modern upstream
 * makes one of these.
 */
export function withMetaField(
  params: Readonly<Record<string, unknown>>,
  meta: Record<string, unknown>,
): Record<string, unknown> {
  const { _meta: _replaced, ...rest } = params;
  return { _meta: meta, ...rest };
}
