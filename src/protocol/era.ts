/**
 * Which era one POST speaks, decided once at the edge from its headers and body, by the spec's
 * rules (2026-07-28: basic/versioning; streamable-http, "Request Metadata" and "Backward
 * Compatibility"). Everything below the edge reads the resulting context and never the wire.
 *
 * - `MCP-Protocol-Version: 2026-07-28` is a modern request: it needs the per-request `_meta`,
 *   the header and `_meta` must agree, and a session id does not belong on it.
 * - No header, or a legacy revision, is a legacy request: initialize, sessions, the GET stream.
 *   Modern `_meta` on one (a version in `_meta` but not in the header) is a mixed request.
 * - Any other version is refused with UnsupportedProtocolVersion, listing what is served.
 */
import { ManifoldError } from '../errors.js';
import { isObject } from '../lib/json.js';
import {
  type Era,
  isLegacyVersion,
  isModernVersion,
  isReservedMetaKey,
  LOG_LEVELS,
  type McpLogLevel,
  META,
  SUPPORTED_VERSIONS,
} from './versions.js';

/**
 * What a request's `_meta` says, read once at the edge (spec 2026-07-28: basic/index, `_meta`;
 * utilities/progress). Everything after the edge reads this, never `params._meta`.
 */
export interface RequestMeta {
  /** The client's progress token, when it asked for progress with a valid one. */
  progressToken?: string | number;
  /**
   * The keys relayed upstream as they came (trace context, vendor keys): all but the progress
   * token, which the gateway maps, and keys under a reserved MCP prefix, which describe the
   * client's own request (the upstream edge writes its own).
   */
  relayed?: Record<string, unknown>;
}

/** What a modern request declares about itself in `_meta` (spec 2026-07-28: basic/index). */
export interface ModernMeta extends RequestMeta {
  version: string;
  clientCapabilities: Record<string, unknown>;
  clientInfo?: Record<string, unknown>;
  logLevel?: McpLogLevel;
}

export type EraDecision =
  | { era: 'legacy'; version: string | undefined; meta: RequestMeta }
  | { era: 'modern'; meta: ModernMeta };

export interface EraInput {
  /** The MCP-Protocol-Version header, if sent. */
  versionHeader: string | undefined;
  /** The Mcp-Session-Id header, if sent. */
  sessionHeader: string | undefined;
  /** The one parsed message (a batch is legacy by definition). */
  message: Record<string, unknown>;
}

export function unsupportedVersion(requested: string): ManifoldError {
  return new ManifoldError(
    'ERR_PROTOCOL_VERSION',
    `Unsupported protocol version ${JSON.stringify(requested.slice(0, 40))}: this gateway serves ${SUPPORTED_VERSIONS.join(', ')}`,
    { data: { supported: [...SUPPORTED_VERSIONS], requested: requested.slice(0, 100) } },
  );
}

/** The era of one message and what its `_meta` says; throws what the spec says to refuse. */
export function decideEra(input: EraInput): EraDecision {
  const { versionHeader: header, sessionHeader, message } = input;
  const params = isObject(message.params) ? message.params : undefined;
  const meta = params?._meta;
  // Notifications and stray responses carry no required metadata (streamable-http, "Sending Messages").
  const request = typeof message.method === 'string' && message.id !== undefined;
  if (header !== undefined && isModernVersion(header)) {
    if (sessionHeader !== undefined) {
      throw new ManifoldError(
        'ERR_MIXED_ERA',
        `Mcp-Session-Id does not belong on a ${header} request, which needs no session: drop the header, or send the session's own MCP-Protocol-Version (for example 2025-11-25) to keep using it`,
      );
    }
    if (!request) return { era: 'modern', meta: { version: header, clientCapabilities: {} } };
    return { era: 'modern', meta: readModernMeta(meta, header) };
  }
  if (header !== undefined && !isLegacyVersion(header)) throw unsupportedVersion(header);
  const inMeta = isObject(meta) ? meta[META.protocolVersion] : undefined;
  if (inMeta !== undefined) {
    if (header === undefined && typeof inMeta === 'string' && !isModernVersion(inMeta)) {
      if (!isLegacyVersion(inMeta)) throw unsupportedVersion(inMeta);
    } else if (header === undefined) {
      throw new ManifoldError(
        'ERR_HEADER_MISMATCH',
        `Header mismatch: _meta names protocol version ${JSON.stringify(String(inMeta).slice(0, 40))} but the MCP-Protocol-Version header is missing; send MCP-Protocol-Version: ${String(inMeta).slice(0, 40)}`,
      );
    } else if (inMeta !== header) {
      throw new ManifoldError(
        'ERR_HEADER_MISMATCH',
        `Header mismatch: MCP-Protocol-Version is ${header} but _meta names ${JSON.stringify(String(inMeta).slice(0, 40))}. A 2026-07-28 request sends that version in both, with no session; a ${header} request leaves it out of _meta`,
      );
    }
  }
  if (!request) return { era: 'legacy', version: header, meta: {} };
  return { era: 'legacy', version: header, meta: readMeta(meta) };
}

/**
 * The progress token and the relayed keys of a request's `_meta` (a legacy request's, or one of a
 * batch). A `_meta` that is not an object would be spread key by key (a string into one key per
 * character) into what goes upstream: it is refused here, once, for every method.
 */
export function readMeta(meta: unknown): RequestMeta {
  if (meta === undefined) return {};
  if (!isObject(meta)) throw new ManifoldError('ERR_BAD_META', 'params._meta must be an object');
  const out: RequestMeta = {};
  for (const key of Object.keys(meta)) {
    const value = meta[key];
    if (key === 'progressToken') {
      if (typeof value === 'string' || typeof value === 'number') out.progressToken = value;
    } else if (key !== '__proto__' && !isReservedMetaKey(key)) {
      out.relayed ??= {};
      out.relayed[key] = value;
    }
  }
  return out;
}

/**
 * The per-request fields of a modern request. A missing or malformed required field is -32602
 * with HTTP 400 (spec 2026-07-28: basic/index, "Per-request protocol fields"); a version that
 * disagrees with the header is HeaderMismatch (streamable-http, "Protocol Version Header").
 */
function readModernMeta(meta: unknown, header: string): ModernMeta {
  const need = () =>
    `every ${header} request carries params._meta with "${META.protocolVersion}" and "${META.clientCapabilities}"`;
  if (!isObject(meta)) throw new ManifoldError('ERR_BAD_META', `Invalid params: _meta is missing; ${need()}`);
  const version = meta[META.protocolVersion];
  if (version === undefined) {
    throw new ManifoldError(
      'ERR_BAD_META',
      `Invalid params: _meta has no "${META.protocolVersion}"; ${need()}`,
    );
  }
  if (version !== header) {
    throw new ManifoldError(
      'ERR_HEADER_MISMATCH',
      `Header mismatch: MCP-Protocol-Version header value ${JSON.stringify(header)} does not match _meta value ${JSON.stringify(String(version).slice(0, 40))}; send the same version in both`,
    );
  }
  const caps = meta[META.clientCapabilities];
  if (!isObject(caps)) {
    throw new ManifoldError(
      'ERR_BAD_META',
      `Invalid params: "${META.clientCapabilities}" ${caps === undefined ? 'is missing' : 'must be an object'}; ${need()}`,
    );
  }
  const out: ModernMeta = { version: header, clientCapabilities: caps, ...readMeta(meta) };
  const info = meta[META.clientInfo];
  if (info !== undefined) {
    if (!isObject(info))
      throw new ManifoldError('ERR_BAD_META', `Invalid params: "${META.clientInfo}" must be an object`);
    out.clientInfo = info;
  }
  const level = meta[META.logLevel];
  if (level !== undefined) {
    if (!(LOG_LEVELS as readonly unknown[]).includes(level)) {
      throw new ManifoldError(
        'ERR_BAD_META',
        `Invalid params: "${META.logLevel}" must be one of ${LOG_LEVELS.join(', ')}`,
      );
    }
    out.logLevel = level as McpLogLevel;
  }
  return out;
}

/**
 * A JSON-RPC batch is only part of 2025-03-26 (removed in 2025-06-18; never in 2026-07-28). A
 * batch is accepted only when neither the header nor the session says a later revision.
 */
export function batchAllowed(versionHeader: string | undefined, sessionVersion: string | undefined): boolean {
  const version = versionHeader ?? sessionVersion;
  return version === undefined || version === '2025-03-26';
}

export type { Era };
