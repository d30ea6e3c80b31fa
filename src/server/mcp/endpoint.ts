import { ManifoldError } from '../../errors.js';
import { isObject } from '../../lib/json.js';
import { decideEra, unsupportedVersion } from '../../protocol/era.js';
import { classify, type JsonRpcId } from '../../protocol/jsonrpc.js';
import { type Era, isModernVersion, SUPPORTED_VERSIONS } from '../../protocol/versions.js';
import { legacyBatch } from './batch.js';
import { dispatch } from './dispatch.js';
import type { Edge } from './edge.js';
import { errorAnswer } from './errors.js';
import type { Exchange } from './exchange.js';
import { FORWARD_HEADER, routeRetry } from './forward.js';
import { type HttpIn, json, PlainReply, type Reply } from './http-in.js';
import {
  initialize,
  legacyDelete,
  legacyExchange,
  legacyGet,
  onNotification,
  onResponse,
  requireSession,
} from './legacy.js';
import type { ChangeKind } from './listen.js';
import { checkStandardHeaders, modernExchange } from './modern.js';

function accepts(accept: string | undefined, type: string): boolean {
  return accept === undefined || accept.includes(type) || accept.includes('*/*');
}

function idOf(body: unknown): JsonRpcId | null {
  const id = isObject(body) ? body.id : undefined;
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
}

/**
 * Streamable HTTP for both eras. Each POST body is parsed once, with `JSON.parse`; its era is
 * decided and its `_meta` read once (protocol/era.ts) into the Exchange that everything after it
 * reads. A failure anywhere below becomes its answer here, in one place. The SDK server stack is
 * not in this path, and no McpServer is ever built per request.
 */
export function createMcpHandlers(edge: Edge) {
  async function post(c: HttpIn): Promise<Reply> {
    const accept = c.header('accept');
    const canStream = accepts(accept, 'text/event-stream');
    if (!accepts(accept, 'application/json') && !canStream) {
      throw new ManifoldError(
        'ERR_NOT_ACCEPTABLE',
        'Accept must include application/json and text/event-stream',
      );
    }
    const text = await c.text(edge.gateway.config.gateway.maxBodyBytes);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new ManifoldError('ERR_PARSE', 'parse error: the body is not valid JSON');
    }
    const versionHeader = c.header('mcp-protocol-version');
    const era: Era = isModernVersion(versionHeader) ? 'modern' : 'legacy';
    let ex: Exchange | undefined;
    try {
      // A retry of a call held on another instance is answered by that instance (#15): only a
      // deployment with a forwarder, or a request forwarded to this one, has anything to route.
      if (edge.forwarder || c.header(FORWARD_HEADER) !== undefined) {
        const elsewhere = await routeRetry(edge, c, isObject(body) ? body : {}, text, era === 'modern');
        if (elsewhere) return elsewhere;
      }
      if (Array.isArray(body)) return await legacyBatch(edge, c, body, text.length);
      if (!isObject(body)) throw new ManifoldError('ERR_BAD_REQUEST', 'expected one JSON-RPC 2.0 message');
      const decision = decideEra({ versionHeader, sessionHeader: c.header('mcp-session-id'), message: body });
      const incoming = classify(body);
      if (decision.era === 'modern') {
        // No client notification is defined on streamable HTTP in 2026-07-28; accepting one is harmless.
        if (incoming.kind !== 'request') return new PlainReply(202, null, {});
        checkStandardHeaders(c, incoming.message);
        ex = modernExchange(edge, c, c.principal, incoming.message, decision.meta, text.length, canStream);
      } else {
        if (incoming.kind === 'request' && incoming.message.method === 'initialize') {
          return await initialize(edge, c.principal, incoming.message);
        }
        const session = await requireSession(edge, c, c.principal);
        if (incoming.kind === 'response') {
          onResponse(session, incoming.message);
          return new PlainReply(202, null, {});
        }
        if (incoming.kind === 'notification') {
          onNotification(session, incoming.message);
          return new PlainReply(202, null, {});
        }
        ex = legacyExchange(edge, c, session, incoming.message, decision.meta, text.length, canStream);
      }
      return await dispatch(edge, ex);
    } catch (e) {
      const { status, body: answer } = errorAnswer(edge.gateway, idOf(body), e, era);
      // A legacy session's request reads every error of its method inside a 200 (2025-11-25:
      // transports); anything refused before that, and a modern request, gets its own status.
      return json(answer, ex?.era === 'legacy' ? 200 : status);
    }
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
