/**
 * The modern era downstream: revision 2026-07-28 (spec: basic/transports/streamable-http,
 * basic/versioning, server/discover, patterns/subscriptions). Every request stands alone: no
 * session, no earlier request, so any instance can serve it.
 */
import type { Principal } from '../../auth/principal.js';
import { ManifoldError } from '../../errors.js';
import type { Cancellation } from '../../lib/cancellation.js';
import { isObject } from '../../lib/json.js';
import type { ModernMeta } from '../../protocol/era.js';
import { decodeHeaderValue, nameField } from '../../protocol/headers.js';
import { type JsonRpcRequest, resultMessage } from '../../protocol/jsonrpc.js';
import { META, SUPPORTED_VERSIONS } from '../../protocol/versions.js';
import { type Edge, serverCapabilities } from './edge.js';
import { type Exchange, modernDress } from './exchange.js';
import { type HttpIn, json, type Reply } from './http-in.js';
import { type ListenFilter, ListenRegistry } from './listen.js';
import { Answer } from './relay/answer.js';
import { sseHeaders } from './sse.js';
import { requireTasksExtension } from './tasks.js';

/**
 * `Mcp-Method` must be present and equal the body's method; `Mcp-Name` likewise for the named
 * methods, after decoding the Base64 sentinel (streamable-http, "Server Validation"). A tool's
 * `Mcp-Param-*` headers are checked once the tool is known (tools-call.ts).
 */
export function checkStandardHeaders(c: HttpIn, request: JsonRpcRequest): void {
  const method = c.header('mcp-method');
  if (method === undefined) {
    throw new ManifoldError(
      'ERR_HEADER_MISMATCH',
      `Header mismatch: the Mcp-Method header is required (${request.method.slice(0, 64)})`,
    );
  }
  if (method !== request.method) {
    throw new ManifoldError(
      'ERR_HEADER_MISMATCH',
      `Header mismatch: Mcp-Method header value ${JSON.stringify(method.slice(0, 64))} does not match body value ${JSON.stringify(request.method.slice(0, 64))}`,
    );
  }
  const field = nameField(request.method);
  if (field === undefined) return;
  const body = request.params?.[field];
  const raw = c.header('mcp-name');
  if (raw === undefined) {
    throw new ManifoldError(
      'ERR_HEADER_MISMATCH',
      `Header mismatch: the Mcp-Name header is required for ${request.method}`,
    );
  }
  const name = decodeHeaderValue(raw);
  if (name === undefined)
    throw new ManifoldError('ERR_HEADER_MISMATCH', 'Header mismatch: the Mcp-Name header value is malformed');
  if (name !== body) {
    throw new ManifoldError(
      'ERR_HEADER_MISMATCH',
      `Header mismatch: Mcp-Name header value ${JSON.stringify(name.slice(0, 128))} does not match body value ${JSON.stringify(String(body).slice(0, 128))}`,
    );
  }
}

/** A modern request as the code below the edge reads it: everything from this request alone. */
export function modernExchange(
  edge: Edge,
  c: HttpIn,
  principal: Principal,
  request: JsonRpcRequest,
  meta: ModernMeta,
  bytesIn: number,
  canStream: boolean,
): Exchange {
  return {
    principal,
    request,
    era: 'modern',
    protocolVersion: meta.version,
    http: c,
    clientCapabilities: meta.clientCapabilities,
    canStream,
    logLevel: meta.logLevel,
    bytesIn,
    meta,
    session: undefined,
    dress: (r, cache) => modernDress(edge.serverInfo, r, cache),
    ask: undefined,
    answer: () => new Answer(canStream),
    pollMs: undefined,
    // Closing the response is the cancellation on streamable HTTP (patterns/cancellation).
    track: (_id, cancellation: Cancellation) =>
      c.onDisconnect(() => cancellation.abort(new Error('the client closed the request'))),
  };
}

/** The methods only the modern era has (server/discover, patterns/subscriptions). */
export const MODERN_METHODS = new Map<string, (edge: Edge, ex: Exchange) => Promise<Reply>>([
  ['server/discover', discover],
  ['subscriptions/listen', listen],
]);

async function discover(edge: Edge, ex: Exchange): Promise<Reply> {
  const result = {
    supportedVersions: SUPPORTED_VERSIONS,
    capabilities: serverCapabilities(edge.gateway, 'modern'),
    // Upstream `instructions` are never forwarded (SECURITY C5); the gateway has none.
  };
  const hint = { ttlMs: edge.listCache.ttlMs, cacheScope: 'public' } as const;
  return json(resultMessage(ex.request.id, ex.dress(result, hint)));
}

/** At most this many resource URIs in one listen request's filter. */
const MAX_WATCHED = 64;

async function listen(edge: Edge, ex: Exchange): Promise<Reply> {
  if (!ex.canStream) {
    throw new ManifoldError(
      'ERR_NOT_ACCEPTABLE',
      'subscriptions/listen answers with a stream: Accept must include text/event-stream',
    );
  }
  const raw = ex.request.params?.notifications;
  const filter = isObject(raw) ? (raw as ListenFilter) : {};
  // Task status notifications are the tasks extension's (SEP-2663): none are sent (clients poll
  // tasks/get), so the acknowledgement lists no task ids, but the capability is still checked.
  if ((filter as { taskIds?: unknown }).taskIds !== undefined) requireTasksExtension(ex);
  const honoured = ListenRegistry.honoured(filter);
  const g = edge.gateway;
  // Resource subscriptions: honoured for the URIs this principal may read on servers that send
  // updates; the acknowledgement lists exactly those (patterns/subscriptions, "Acknowledgment").
  const watched: { server: string; uri: string; exposed: string }[] = [];
  const asked = Array.isArray(filter.resourceSubscriptions) ? filter.resourceSubscriptions : [];
  for (const uri of asked.filter((u): u is string => typeof u === 'string').slice(0, MAX_WATCHED)) {
    try {
      const route = g.views.resolveResource(ex.principal, uri);
      if ((await g.owner(route.server)).canSubscribe)
        watched.push({ server: route.server, uri: route.uri, exposed: uri });
    } catch {
      // Not visible, unknown, or its server is down: left out of the acknowledgement.
    }
  }
  if (watched.length > 0) honoured.resourceSubscriptions = watched.map((w) => w.exposed);
  const seen = {
    tools: g.viewDigest(ex.principal),
    prompts: g.viewDigest(ex.principal, 'prompts'),
    resources: g.viewDigest(ex.principal, 'resources'),
  };
  const id = ex.request.id;
  const watcher = {
    send: (uri: string) =>
      stream.send(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'notifications/resources/updated',
          params: { uri, _meta: { [META.subscriptionId]: id } },
        }),
      ),
  };
  const stream = edge.listeners.open(id, ex.principal, honoured, seen, () => edge.watch.removeAll(watcher));
  for (const w of watched) await edge.watch.add(watcher, w.server, w.uri, w.exposed).catch(() => {});
  return new Response(stream.readable, { status: 200, headers: sseHeaders });
}
