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
  LOG_LEVELS,
  type McpLogLevel,
  META,
  SUPPORTED_VERSIONS,
} from './versions.js';

/** What a modern request declares about itself in `_meta` (spec 2026-07-28: basic/index). */
export interface RequestMeta {
  version: string;
  clientCapabilities: Record<string, unknown>;
  clientInfo?: Record<string, unknown>;
  logLevel?: McpLogLevel;
}

export type EraDecision =
  | { era: 'legacy'; version: string | undefined }
  | { era: 'modern'; meta: RequestMeta };

export interface EraInput {
  /** The MCP-Protocol-Version header, if sent. */
  versionHeader: string | undefined;
  /** The Mcp-Session-Id header, if sent. */
  sessionHeader: string | undefined;
  /** The one parsed message (a batch is decided by `decideBatchEra`). */
  message: Record<string, unknown>;
}

export function unsupportedVersion(requested: string): ManifoldError {
  return new ManifoldError(
    'ERR_PROTOCOL_VERSION',
    `Unsupported protocol version ${JSON.stringify(requested.slice(0, 40))}: this gateway serves ${SUPPORTED_VERSIONS.join(', ')}`,
    { data: { supported: [...SUPPORTED_VERSIONS], requested: requested.slice(0, 100) } },
  );
}

function metaVersion(message: Record<string, unknown>): unknown {
  const params = message.params;
  if (!isObject(params)) return undefined;
  const meta = params._meta;
  return isObject(meta) ? meta[META.protocolVersion] : undefined;
}

export function decideEra(input: EraInput): EraDecision {
  const { versionHeader: header, sessionHeader, message } = input;
  if (header !== undefined && isModernVersion(header)) {
    if (sessionHeader !== undefined) {
      throw new ManifoldError(
        'ERR_MIXED_ERA',
        `Mcp-Session-Id does not belong on a ${header} request, which needs no session: drop the header, or send the session's own MCP-Protocol-Version (for example 2025-11-25) to keep using it`,
      );
    }
    // Notifications and stray responses carry no required metadata (streamable-http, "Sending Messages").
    if (typeof message.method !== 'string' || message.id === undefined) {
      return { era: 'modern', meta: { version: header, clientCapabilities: {} } };
    }
    return { era: 'modern', meta: readMeta(message, header) };
  }
  if (header !== undefined && !isLegacyVersion(header)) throw unsupportedVersion(header);

  // Read only here: a modern request's version is read from its envelope above (#18).
  const inMeta = metaVersion(message);
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
  return { era: 'legacy', version: header };
}

/**
 * The per-request fields of a modern request. A missing or malformed required field is -32602
 * with HTTP 400 (spec 2026-07-28: basic/index, "Per-request protocol fields"); a version that
 * disagrees with the header is HeaderMismatch (streamable-http, "Protocol Version Header").
 */
function readMeta(message: Record<string, unknown>, header: string): RequestMeta {
  const params = message.params;
  const meta = isObject(params) ? params._meta : undefined;
  // An envelope the parse shares between requests (envelope-cache.ts, deep-frozen) is read once
  // per version header (#18). A parsed one is the request's own and is read every time.
  if (!isObject(meta)) return readEnvelope(meta, header);
  // The last shared envelope first: most of the time one client is calling.
  if (meta === lastMeta && lastRead?.version === header) return lastRead;
  const known = decided.get(meta);
  if (known?.version === header) return remember(meta, known);
  const read = readEnvelope(meta, header);
  if (!Object.isFrozen(meta)) return read;
  decided.set(meta, Object.freeze(read));
  return remember(meta, read);
}

/** What a shared envelope was read as (a weak map: the cache drops envelopes it no longer keeps). */
const decided = new WeakMap<object, RequestMeta>();
/** The last of them, held strongly: one envelope, kept until another one is read. */
let lastMeta: object | undefined;
let lastRead: RequestMeta | undefined;

function remember(meta: object, read: RequestMeta): RequestMeta {
  lastMeta = meta;
  lastRead = read;
  return read;
}

function readEnvelope(meta: unknown, header: string): RequestMeta {
  // Said only in a refusal: not built for every request (#18).
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
  const out: RequestMeta = { version: header, clientCapabilities: caps };
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
