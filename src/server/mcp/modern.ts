/**
 * The modern era downstream: revision 2026-07-28 (spec: basic/transports/streamable-http,
 * basic/versioning, server/discover, patterns/subscriptions). Every request stands alone: no
 * session, no earlier request, so any instance can serve it.
 */
import type { CatalogEntry } from '../../aggregate/catalog.js';
import type { Principal } from '../../auth/principal.js';
import { ManifoldError } from '../../errors.js';
import type { Cancellation } from '../../lib/cancellation.js';
import { madeOnce } from '../../lib/objects.js';
import type { RequestMeta } from '../../protocol/era.js';
import {
  decodeHeaderValue,
  nameField,
  paramHeaderPlan,
  paramValue,
  sameParamValue,
} from '../../protocol/headers.js';
import { classify, type JsonRpcRequest } from '../../protocol/jsonrpc.js';
import { META, SUPPORTED_VERSIONS } from '../../protocol/versions.js';
import { dispatchCommon, type Edge, failResponse, json, serverCapabilities } from './dispatch.js';
import { type Exchange, modernResult } from './exchange.js';
import { type HttpIn, PlainReply, type Reply } from './http-in.js';
import { type ListenFilter, ListenRegistry } from './listen.js';
import { Answer } from './relay/answer.js';
import { sseHeaders } from './sse.js';
import { requireTasksExtension } from './tasks.js';

export interface ModernPost {
  c: HttpIn;
  principal: Principal;
  message: Record<string, unknown>;
  meta: RequestMeta;
  bytesIn: number;
  canStream: boolean;
}

/** Each tool's `Mcp-Param-*` plan, read from its exposed schema once. */
const planOf = madeOnce((entry: CatalogEntry) => paramHeaderPlan(entry.tool.inputSchema));
/** How each edge dresses a modern result, built once per edge rather than per request. */
const dresserOf = madeOnce((edge: Edge) => modernResult(edge.serverInfo));

/** No async wrapper (#18): the request goes on in the same turn, and a failure is its answer. */
export function modernPost(edge: Edge, p: ModernPost): Reply | Promise<Reply> {
  const incoming = classify(p.message);
  // No client notification is defined on streamable HTTP in 2026-07-28; accepting one is harmless.
  if (incoming.kind !== 'request') return new PlainReply(202, null, {});
  const request = incoming.message;
  const fail = (e: unknown) => failResponse(edge, request.id, e, 'modern');
  try {
    if (request.method === 'tools/call') {
      const name = request.params?.name;
      const entry = typeof name === 'string' ? edge.gateway.catalog.byName.get(name) : undefined;
      checkStandardHeaders(p.c, request, 'name', entry !== undefined);
      if (entry) checkParamHeaders(edge, p, request, entry);
    } else {
      checkStandardHeaders(p.c, request, nameField(request.method), false);
    }
    return dispatch(edge, exchange(edge, p, request), p).then(undefined, fail);
  } catch (e) {
    return fail(e);
  }
}

/**
 * `Mcp-Method` must be present and equal the body's method; `Mcp-Name` likewise for the named
 * methods, after decoding the Base64 sentinel (streamable-http, "Server Validation").
 * `field`: the params field `Mcp-Name` mirrors (headers.ts `nameField`; given for tools/call, #18).
 * `exposed`: the body's name is one of the catalog's tools. Every exposed name matches
 * `[a-zA-Z0-9_-]{1,64}` (aggregate/names.ts `EXPOSED_NAME`), so a header equal to it decodes to
 * itself and is not decoded again (#18).
 */
function checkStandardHeaders(
  c: HttpIn,
  request: JsonRpcRequest,
  field: ReturnType<typeof nameField>,
  exposed: boolean,
): void {
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
  if (field === undefined) return;
  const body = request.params?.[field];
  const raw = c.header('mcp-name');
  if (raw === undefined) {
    throw new ManifoldError(
      'ERR_HEADER_MISMATCH',
      `Header mismatch: the Mcp-Name header is required for ${request.method}`,
    );
  }
  const name = exposed && raw === body ? raw : decodeHeaderValue(raw);
  if (name === undefined)
    throw new ManifoldError('ERR_HEADER_MISMATCH', 'Header mismatch: the Mcp-Name header value is malformed');
  if (name !== body) {
    throw new ManifoldError(
      'ERR_HEADER_MISMATCH',
      `Header mismatch: Mcp-Name header value ${JSON.stringify(name.slice(0, 128))} does not match body value ${JSON.stringify(String(body).slice(0, 128))}`,
    );
  }
}

/**
 * `Mcp-Param-*` headers of a tool whose exposed schema marks arguments with `x-mcp-header` must
 * match the arguments ("Server Behavior for Custom Headers"). Unrecognised ones pass unread.
 */
function checkParamHeaders(edge: Edge, p: ModernPost, request: JsonRpcRequest, entry: CatalogEntry): void {
  const plan = planOf(entry);
  // Most tools mirror no argument: nothing to check, so nothing said (#18: no visibility lookup).
  if (!plan.ok || plan.params.length === 0) return;
  // A tool the caller cannot see is left to fail like an unknown one (SECURITY A13): checking its
  // headers would tell the caller it exists and which arguments it mirrors.
  if (!edge.gateway.isVisible(p.principal, entry.name)) return;
  const args = request.params?.arguments;
  const values =
    typeof args === 'object' && args !== null && !Array.isArray(args)
      ? (args as Record<string, unknown>)
      : {};
  for (const param of plan.params) {
    const expected = paramValue(values, param);
    const raw = p.c.header(`mcp-param-${param.header.toLowerCase()}`);
    if (expected === undefined) continue;
    if (raw === undefined) {
      throw new ManifoldError(
        'ERR_HEADER_MISMATCH',
        `Header mismatch: the Mcp-Param-${param.header} header is required when that argument is set`,
      );
    }
    const got = decodeHeaderValue(raw);
    if (got === undefined || !sameParamValue(got, expected, param.type)) {
      throw new ManifoldError(
        'ERR_HEADER_MISMATCH',
        `Header mismatch: Mcp-Param-${param.header} does not match the argument in the body`,
      );
    }
  }
}

/**
 * The same members in the same order as legacy.ts `exchange`, `pollMs` and `ask` included: both
 * eras' exchanges then share one hidden class, and the code below the edge that reads them stays
 * monomorphic when both eras call (#18).
 */
function exchange(edge: Edge, p: ModernPost, request: JsonRpcRequest): Exchange {
  const dresser = dresserOf(edge);
  const { c } = p;
  return {
    principal: p.principal,
    request,
    era: 'modern',
    protocolVersion: p.meta.version,
    http: c,
    clientCapabilities: p.meta.clientCapabilities,
    canStream: p.canStream,
    answer: () => new Answer(p.canStream),
    pollMs: undefined,
    logLevel: p.meta.logLevel,
    bytesIn: p.bytesIn,
    result: dresser.result,
    resultJson: dresser.resultJson,
    json: dresser.json,
    ask: undefined,
    // Closing the response is the cancellation on streamable HTTP (patterns/cancellation).
    track: (_id, cancellation: Cancellation) =>
      c.onDisconnect(() => cancellation.abort(new Error('the client closed the request'))),
  };
}

function dispatch(edge: Edge, ex: Exchange, p: ModernPost): Promise<Reply> {
  switch (ex.request.method) {
    case 'server/discover':
      return Promise.resolve(
        json(
          `{"jsonrpc":"2.0","id":${JSON.stringify(ex.request.id)},"result":${ex.resultJson(
            JSON.stringify({
              supportedVersions: SUPPORTED_VERSIONS,
              capabilities: serverCapabilities(edge.gateway, 'modern'),
              // Upstream `instructions` are never forwarded (SECURITY C5); the gateway has none.
            }),
            { ttlMs: edge.listCache.ttlMs, cacheScope: 'public' },
          )}}`,
        ),
      );
    case 'subscriptions/listen':
      return listen(edge, ex, p);
    default:
      return dispatchCommon(edge, ex);
  }
}

/** At most this many resource URIs in one listen request's filter. */
const MAX_WATCHED = 64;

async function listen(edge: Edge, ex: Exchange, p: ModernPost): Promise<Reply> {
  if (!p.canStream) {
    throw new ManifoldError(
      'ERR_NOT_ACCEPTABLE',
      'subscriptions/listen answers with a stream: Accept must include text/event-stream',
    );
  }
  const raw = ex.request.params?.notifications;
  const filter = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as ListenFilter) : {};
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
