import { ManifoldError } from '../../errors.js';
import { isObject } from '../../lib/json.js';
import { decideEra, unsupportedVersion } from '../../protocol/era.js';
import type { JsonRpcId } from '../../protocol/jsonrpc.js';
import { isModernVersion, SUPPORTED_VERSIONS } from '../../protocol/versions.js';
import { readPlainCall } from './call-reader.js';
import { type Edge, failResponse } from './dispatch.js';
import { EnvelopeCache } from './envelope-cache.js';
import { routeRetry } from './forward.js';
import { type HttpIn, PlainReply, type Reply } from './http-in.js';
import { legacyBatch, legacyDelete, legacyGet, legacyPost } from './legacy.js';
import type { ChangeKind } from './listen.js';
import { modernPost } from './modern.js';

function accepts(accept: string | undefined, type: string): boolean {
  return accept === undefined || accept.includes(type) || accept.includes('*/*');
}

function idOf(body: unknown): JsonRpcId | null {
  const id = isObject(body) ? body.id : undefined;
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
}

/**
 * Streamable HTTP for both eras. Each POST is parsed once; its era is decided from its headers
 * and body (era.ts) and it goes to legacy.ts or modern.ts. The SDK server stack is not in this
 * path, and no McpServer is ever built per request.
 */
export function createMcpHandlers(edge: Edge) {
  const envelopes = new EnvelopeCache();
  /**
   * No async wrapper (#18): once the body is read, a message is handled in the same turn down to
   * its upstream request, and only a promise that can still fail gets an error handler here.
   */
  function post(c: HttpIn): Promise<Reply> {
    const accept = c.header('accept');
    const canStream = accepts(accept, 'text/event-stream');
    if (!accepts(accept, 'application/json') && !canStream) {
      throw new ManifoldError(
        'ERR_NOT_ACCEPTABLE',
        'Accept must include application/json and text/event-stream',
      );
    }
    return c
      .text(edge.gateway.config.gateway.maxBodyBytes)
      .then((text) => message(c, text, c.header('mcp-protocol-version'), canStream));
  }

  function message(
    c: HttpIn,
    text: string,
    versionHeader: string | undefined,
    canStream: boolean,
  ): Reply | Promise<Reply> {
    const modernHeader = isModernVersion(versionHeader);
    let body: unknown;
    try {
      // A legacy tools/call in either common layout is read without parsing its fixed parts (#18).
      body = modernHeader ? envelopes.parse(text) : (readPlainCall(text) ?? JSON.parse(text));
    } catch {
      throw new ManifoldError('ERR_PARSE', 'parse error: the body is not valid JSON');
    }
    const fail = (e: unknown) => failResponse(edge, idOf(body), e, modernHeader ? 'modern' : 'legacy');
    try {
      // A retry of a call held on another instance is answered by that instance (#15).
      const routed = routeRetry(edge, c, isObject(body) ? body : {}, text, modernHeader);
      const served = routed
        ? routed.then((elsewhere) => elsewhere ?? serve(c, text, body, versionHeader, canStream))
        : serve(c, text, body, versionHeader, canStream);
      return served instanceof Promise ? served.then(undefined, fail) : served;
    } catch (e) {
      return fail(e);
    }
  }

  function serve(
    c: HttpIn,
    text: string,
    body: unknown,
    versionHeader: string | undefined,
    canStream: boolean,
  ): Reply | Promise<Reply> {
    const { principal } = c;
    if (Array.isArray(body)) {
      if (isModernVersion(versionHeader))
        throw new ManifoldError(
          'ERR_BATCH',
          `JSON-RPC batches are not part of ${versionHeader}: send one message per POST`,
        );
      if (versionHeader !== undefined && !SUPPORTED_VERSIONS.includes(versionHeader))
        throw unsupportedVersion(versionHeader);
      return legacyBatch(edge, { c, principal, bytesIn: text.length, canStream }, body);
    }
    if (!isObject(body)) throw new ManifoldError('ERR_BAD_REQUEST', 'expected one JSON-RPC 2.0 message');
    const decision = decideEra({
      versionHeader,
      sessionHeader: c.header('mcp-session-id'),
      message: body,
    });
    if (decision.era === 'modern') {
      return modernPost(edge, {
        c,
        principal,
        message: body,
        meta: decision.meta,
        bytesIn: text.length,
        canStream,
      });
    }
    return legacyPost(edge, { c, principal, message: body, bytesIn: text.length, canStream });
  }

  /** GET and DELETE belong to the legacy era; a 2026-07-28 server answers them 405 (streamable-http). */
  async function get(c: HttpIn): Promise<Reply> {
    const v = c.header('mcp-protocol-version');
    if (isModernVersion(v)) return methodNotAllowed();
    if (v !== undefined && !SUPPORTED_VERSIONS.includes(v)) throw unsupportedVersion(v);
    return await legacyGet(edge, c, c.principal);
  }

  async function del(c: HttpIn): Promise<Reply> {
    const v = c.header('mcp-protocol-version');
    if (isModernVersion(v)) return methodNotAllowed();
    return await legacyDelete(edge, c, c.principal);
  }

  return { post, get, delete: del };
}

function methodNotAllowed(): Reply {
  return new PlainReply(405, null, { allow: 'POST' });
}

/**
 * Announces verified catalog changes: on every legacy GET stream and modern listen stream that
 * asked for that list and whose principal's view of it changed.
 */
export function announceChanged(edge: Edge, kinds: ReadonlySet<ChangeKind>): void {
  const { gateway } = edge;
  for (const kind of kinds) {
    const note = JSON.stringify({ jsonrpc: '2.0', method: `notifications/${kind}/list_changed` });
    for (const s of edge.sessions.all()) {
      if (!s.stream) continue;
      const now = gateway.viewDigest(s.principal, kind);
      if (now === s.seen[kind]) continue;
      s.seen[kind] = now;
      s.stream.send(note);
    }
    edge.listeners.changed(kind, (p) => gateway.viewDigest(p, kind));
  }
}
