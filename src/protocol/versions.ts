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

export const LATEST_LEGACY = LEGACY_VERSIONS[0];

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

/** A key's prefix (up to its first `/`) whose second label is `modelcontextprotocol` or `mcp`. */
const RESERVED_PREFIX = /^[^./]*\.(?:modelcontextprotocol|mcp)(?:\.[^/]*)?\//;

/**
 * Every `_meta` key under a reserved MCP prefix: never relayed from one side to the other as-is
 * (`io.modelcontextprotocol/…`, `dev.mcp/…`; spec 2026-07-28: basic/index `_meta`).
 */
export function isReservedMetaKey(key: string): boolean {
  return RESERVED_PREFIX.test(key);
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
