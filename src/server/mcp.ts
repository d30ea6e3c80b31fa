import type { Context } from 'hono';
import type { Principal } from '../auth/principal.js';
import { describeError, ManifoldError } from '../errors.js';
import type { Gateway } from '../gateway.js';
import { toRpcError } from './errors.js';
import { readBodyCapped } from './http-guards.js';
import {
  classify,
  errorMessage,
  type JsonRpcId,
  type JsonRpcRequest,
  rawResultMessage,
  resultMessage,
} from './jsonrpc.js';
import { isSupportedVersion, negotiateVersion } from './protocol.js';
import { inflightKey, type Session } from './sessions.js';
import { SseStream, sseHeaders } from './sse.js';
import { toolsCall } from './tools-call.js';

const SESSION_HEADER = 'mcp-session-id';
const jsonHeaders = { 'content-type': 'application/json' };

function json(body: string, status = 200, extra?: Record<string, string>): Response {
  return new Response(body, { status, headers: extra ? { ...jsonHeaders, ...extra } : jsonHeaders });
}

function accepts(c: Context, type: string): boolean {
  const accept = c.req.header('accept');
  return accept === undefined || accept.includes(type) || accept.includes('*/*');
}

/**
 * Streamable HTTP (spec: basic/transports, 2025-11-25). One parse per message; the SDK server
 * stack is not in this path, and no McpServer is ever built per request.
 */
export function createMcpHandlers(gateway: Gateway) {
  const log = gateway.log;

  const fail = (id: JsonRpcId | null, e: unknown): string => {
    const err = toRpcError(e);
    if (err.data.manifold === 'ERR_INTERNAL')
      log.error('request.internal_error', { error: describeError(e) });
    return errorMessage(id, err.code, err.message, err.data);
  };

  const checkVersionHeader = (c: Context) => {
    const v = c.req.header('mcp-protocol-version');
    if (v !== undefined && !isSupportedVersion(v)) {
      throw new ManifoldError('ERR_PROTOCOL_VERSION', `unsupported MCP-Protocol-Version: ${v.slice(0, 32)}`);
    }
  };

  const requireSession = (c: Context, principal: Principal): Session => {
    const id = c.req.header(SESSION_HEADER);
    if (!id) throw new ManifoldError('ERR_SESSION_REQUIRED', 'Mcp-Session-Id header is required');
    const session = gateway.sessions.get(id, principal.key);
    if (!session) throw new ManifoldError('ERR_SESSION_NOT_FOUND', 'session not found: initialize again');
    return session;
  };

  async function post(c: Context): Promise<Response> {
    const principal = c.get('principal');
    if (!accepts(c, 'application/json') && !accepts(c, 'text/event-stream')) {
      throw new ManifoldError(
        'ERR_NOT_ACCEPTABLE',
        'Accept must include application/json and text/event-stream',
      );
    }
    checkVersionHeader(c);
    const text = await readBodyCapped(c.req.raw, gateway.config.gateway.maxBodyBytes);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new ManifoldError('ERR_PARSE', 'parse error: the body is not valid JSON');
    }
    const incoming = classify(body);

    if (incoming.kind === 'request' && incoming.message.method === 'initialize') {
      if (gateway.isStopping) throw new ManifoldError('ERR_SHUTTING_DOWN', 'the gateway is shutting down');
      const version = negotiateVersion(incoming.message.params?.protocolVersion);
      const session = gateway.sessions.create(principal.key, version, gateway.platform.now());
      const result = {
        protocolVersion: version,
        capabilities: { tools: { listChanged: true } },
        serverInfo: { name: 'manifold', title: 'Manifold MCP gateway', version: gateway.version },
        // Upstream `instructions` are never forwarded (SECURITY C5); the gateway sends none of its own.
      };
      return json(resultMessage(incoming.message.id, result), 200, { [SESSION_HEADER]: session.id });
    }

    const session = requireSession(c, principal);
    if (incoming.kind === 'response') return new Response(null, { status: 202 });
    if (incoming.kind === 'notification') {
      onNotification(session, incoming.message.method, incoming.message.params);
      return new Response(null, { status: 202 });
    }
    const request = incoming.message;
    try {
      return await dispatch(c, session, principal, request, text.length);
    } catch (e) {
      return json(fail(request.id, e));
    }
  }

  function onNotification(
    session: Session,
    method: string,
    params: Record<string, unknown> | undefined,
  ): void {
    if (method === 'notifications/cancelled') {
      const id = params?.requestId;
      if (typeof id === 'string' || typeof id === 'number') {
        session.inflight.get(inflightKey(id))?.abort(new Error('cancelled by the client'));
      }
    }
    // notifications/initialized and others need no action.
  }

  async function dispatch(
    c: Context,
    session: Session,
    principal: Principal,
    request: JsonRpcRequest,
    bytesIn: number,
  ) {
    switch (request.method) {
      case 'ping':
        return json(resultMessage(request.id, {}));
      case 'tools/list': {
        const page = await gateway.listToolsJson(principal, request.params?.cursor);
        return json(rawResultMessage(request.id, page));
      }
      case 'tools/call':
        return toolsCall({
          gateway,
          session,
          principal,
          request,
          canStream: accepts(c, 'text/event-stream'),
          bytesIn,
          json: (b, s) => json(b, s),
          fail,
        });
      default:
        throw new ManifoldError('ERR_METHOD_NOT_FOUND', `Method not found: ${request.method.slice(0, 64)}`);
    }
  }

  /** The standalone stream: server-initiated messages such as tools/list_changed. */
  async function get(c: Context): Promise<Response> {
    checkVersionHeader(c);
    const accept = c.req.header('accept') ?? '';
    if (!accept.includes('text/event-stream')) {
      throw new ManifoldError('ERR_NOT_ACCEPTABLE', 'Accept must include text/event-stream');
    }
    const session = requireSession(c, c.get('principal'));
    // A newer stream replaces an older one, so a client reconnecting after a dead socket is never locked out.
    session.stream?.close();
    const stream = new SseStream({ keepaliveMs: 25_000 });
    session.stream = stream;
    stream.onclose = () => {
      if (session.stream === stream) session.stream = undefined;
    };
    return new Response(stream.readable, { status: 200, headers: sseHeaders });
  }

  async function del(c: Context): Promise<Response> {
    const session = requireSession(c, c.get('principal'));
    gateway.sessions.delete(session.id);
    return new Response(null, { status: 204 });
  }

  return { post, get, delete: del, fail };
}

/** Sends tools/list_changed on every open standalone stream. */
export function broadcastListChanged(gateway: Gateway): void {
  const note = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
  for (const s of gateway.sessions.all()) s.stream?.send(note);
}
