/**
 * The legacy era downstream: revisions 2025-11-25, 2025-06-18 and 2025-03-26 of streamable HTTP
 * (spec 2025-11-25: basic/transports, basic/lifecycle). The initialize handshake opens a session
 * held in the edge's bounded table; the GET stream carries list_changed; DELETE ends a session.
 */
import type { Principal } from '../../auth/principal.js';
import { ManifoldError } from '../../errors.js';
import { stripUnsafe } from '../../guards/text.js';
import type { Cancellation } from '../../lib/cancellation.js';
import { isObject } from '../../lib/json.js';
import { unrefTimer } from '../../platform.js';
import type { RequestMeta } from '../../protocol/era.js';
import { type JsonRpcNotification, type JsonRpcRequest, resultMessage } from '../../protocol/jsonrpc.js';
import { LATEST_LEGACY, LEGACY_VERSIONS, LOG_LEVELS } from '../../protocol/versions.js';
import { type Edge, serverCapabilities } from './edge.js';
import { type Exchange, legacyDress } from './exchange.js';
import { type HttpIn, json, PlainReply, type Reply } from './http-in.js';
import { Answer } from './relay/answer.js';
import { inflightKey, type Session } from './sessions.js';
import { MAX_STREAMS, parseEventId, ResumableStream, SseStream, sseHeaders } from './sse.js';

export const SESSION_HEADER = 'mcp-session-id';

/** A client may ask for any revision; the answer is one the gateway serves (basic/lifecycle). */
export function negotiateVersion(requested: unknown): string {
  return typeof requested === 'string' && (LEGACY_VERSIONS as readonly string[]).includes(requested)
    ? requested
    : LATEST_LEGACY;
}

/** The request's session: this instance's, or (over a shared session store, #15) any instance's. */
export async function requireSession(edge: Edge, c: HttpIn, principal: Principal): Promise<Session> {
  const id = c.header(SESSION_HEADER);
  if (!id) throw new ManifoldError('ERR_SESSION_REQUIRED', 'Mcp-Session-Id header is required');
  const session = edge.sessions.get(id, principal.key);
  if (session) {
    session.principal = principal;
    edge.shared?.used(session);
    return session;
  }
  if (!edge.shared) throw notFound();
  const found = await edge.shared.find(id, principal);
  if (!found) throw notFound();
  found.principal = principal;
  found.seen = seenBy(edge, principal);
  return found;
}

const notFound = () => new ManifoldError('ERR_SESSION_NOT_FOUND', 'session not found: initialize again');

/** What the principal sees of each list now: a later change is announced against it. */
function seenBy(edge: Edge, principal: Principal): Session['seen'] {
  const { gateway } = edge;
  return {
    tools: gateway.viewDigest(principal),
    prompts: gateway.viewDigest(principal, 'prompts'),
    resources: gateway.viewDigest(principal, 'resources'),
  };
}

export async function initialize(edge: Edge, principal: Principal, request: JsonRpcRequest): Promise<Reply> {
  const { gateway } = edge;
  if (gateway.isStopping) throw new ManifoldError('ERR_SHUTTING_DOWN', 'the gateway is shutting down');
  const version = negotiateVersion(request.params?.protocolVersion);
  const caps = request.params?.capabilities;
  const session = edge.sessions.create(
    principal,
    version,
    gateway.platform.now(),
    isObject(caps) ? caps : {},
  );
  session.seen = seenBy(edge, principal);
  // Recorded before the id is handed out: the client's next request may reach another instance.
  if (edge.shared) {
    try {
      await edge.shared.opened(session);
    } catch (e) {
      edge.sessions.drop(session.id);
      throw e;
    }
  }
  const result = {
    protocolVersion: version,
    capabilities: serverCapabilities(gateway, 'legacy'),
    serverInfo: { name: 'manifold', title: 'Manifold MCP gateway', version: gateway.version },
    // Upstream `instructions` are never forwarded (SECURITY C5); the gateway sends none of its own.
  };
  return json(resultMessage(request.id, result), 200, { [SESSION_HEADER]: session.id });
}

/** A legacy request as the code below the edge reads it: its own message, its session's state. */
export function legacyExchange(
  edge: Edge,
  c: HttpIn,
  session: Session,
  request: JsonRpcRequest,
  meta: RequestMeta,
  bytesIn: number,
  canStream: boolean,
): Exchange {
  // Resumable streams are 2025-11-25's (SEP-1699): older clients would take a priming event
  // with no data for a message.
  const resumable = canStream && session.protocolVersion === LATEST_LEGACY;
  const poll = edge.gateway.config.gateway.streamPollMs;
  return {
    principal: session.principal,
    request,
    era: 'legacy',
    protocolVersion: session.protocolVersion,
    http: c,
    clientCapabilities: session.clientCapabilities,
    canStream,
    logLevel: session.logLevel,
    bytesIn,
    meta,
    session,
    dress: legacyDress,
    ask: (answer, method, params, cancellation) => askClient(session, answer, method, params, cancellation),
    answer: () => (resumable ? new Answer(true, () => openResumable(session)) : new Answer(canStream)),
    pollMs: resumable && poll > 0 ? poll : undefined,
    track: (id, cancellation) => {
      const entry = session.inflight.add(inflightKey(id), cancellation);
      return () => session.inflight.remove(entry);
    },
  };
}

/** The methods only the legacy era has (spec 2025-11-25: ping, logging, resource subscriptions). */
export const LEGACY_METHODS = new Map<string, (edge: Edge, ex: Exchange) => Promise<Reply>>([
  ['ping', async (_edge, ex) => json(resultMessage(ex.request.id, {}))],
  ['logging/setLevel', setLevel],
  ['resources/subscribe', subscription],
  ['resources/unsubscribe', subscription],
]);

/** The level applies to this session's later requests (spec 2025-11-25: utilities/logging). */
async function setLevel(edge: Edge, ex: Exchange): Promise<Reply> {
  const session = ex.session!;
  const level = ex.request.params?.level;
  if (!(LOG_LEVELS as readonly unknown[]).includes(level)) {
    throw new ManifoldError('ERR_INVALID_PARAMS', `level must be one of ${LOG_LEVELS.join(', ')}`);
  }
  session.logLevel = level as string;
  // Shared, so the level holds on whichever instance serves the session's next call.
  await edge.shared?.setLogLevel(session, level as string);
  return json(resultMessage(ex.request.id, {}));
}

/** resources/subscribe and unsubscribe (spec 2025-11-25: server/resources, "Subscriptions"). */
async function subscription(edge: Edge, ex: Exchange): Promise<Reply> {
  const session = ex.session!;
  const uri = ex.request.params?.uri;
  const route = edge.gateway.views.resolveResource(ex.principal, uri);
  session.watcher ??= {
    send: (exposed: string) =>
      session.stream?.send(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'notifications/resources/updated',
          params: { uri: exposed },
        }),
      ),
  };
  const watcher = session.watcher;
  if (ex.request.method === 'resources/unsubscribe') {
    edge.watch.remove(watcher, route.server, route.uri);
    return json(resultMessage(ex.request.id, {}));
  }
  const upstream = await edge.gateway.owner(route.server);
  if (!upstream.canSubscribe) {
    throw new ManifoldError(
      'ERR_INVALID_PARAMS',
      `server ${route.server} does not send resource updates, so ${String(uri).slice(0, 256)} cannot be subscribed to`,
    );
  }
  session.onEnd = () => edge.watch.removeAll(watcher);
  await edge.watch.add(watcher, route.server, route.uri, uri as string);
  return json(resultMessage(ex.request.id, {}));
}

/** A POST stream of this session that a reconnect can resume; the oldest finished one goes first. */
function openResumable(session: Session): ResumableStream {
  if (session.replays.size >= MAX_STREAMS) {
    const finished = [...session.replays.values()].find((s) => s.closed);
    const evicted = finished ?? session.replays.values().next().value;
    if (evicted) session.replays.delete(evicted.id);
  }
  const stream = new ResumableStream(crypto.randomUUID(), (s) => session.replays.delete(s.id));
  session.replays.set(stream.id, stream);
  return stream;
}

/** The client's answer to a request the gateway relayed to it (sampling, elicitation, roots). */
export function onResponse(
  session: Session,
  message: { id: string | number; result?: unknown; error?: unknown },
): void {
  const reply = session.replies.get(String(message.id));
  if (!reply) return;
  session.replies.delete(String(message.id));
  reply(message);
}

export function onNotification(session: Session, note: JsonRpcNotification): void {
  if (note.method === 'notifications/cancelled') {
    const id = note.params?.requestId;
    if (typeof id === 'string' || typeof id === 'number') {
      session.inflight.find(inflightKey(id))?.abort(new Error('cancelled by the client'));
    }
  }
  // notifications/initialized and others need no action.
}

/** The standalone stream: server-initiated messages such as tools/list_changed. */
export async function legacyGet(edge: Edge, c: HttpIn, principal: Principal): Promise<Reply> {
  const accept = c.header('accept') ?? '';
  if (!accept.includes('text/event-stream')) {
    throw new ManifoldError('ERR_NOT_ACCEPTABLE', 'Accept must include text/event-stream');
  }
  const session = await requireSession(edge, c, principal);
  // A reconnect to a POST stream (2025-11-25: transports, "Resumability and Redelivery"): what
  // the client missed, then the rest. An id the session no longer knows opens the standalone stream.
  const last = parseEventId(c.header('last-event-id'));
  const replay = last ? session.replays.get(last.stream) : undefined;
  if (replay && last) return new Response(replay.resume(last.seq), { status: 200, headers: sseHeaders });
  // A newer stream replaces an older one, so a client reconnecting after a dead socket is never locked out.
  session.stream?.close();
  const stream = new SseStream({ keepaliveMs: 25_000 });
  session.stream = stream;
  stream.onclose = () => {
    if (session.stream === stream) session.stream = undefined;
  };
  return new Response(stream.readable, { status: 200, headers: sseHeaders });
}

export async function legacyDelete(edge: Edge, c: HttpIn, principal: Principal): Promise<Reply> {
  const session = await requireSession(edge, c, principal);
  if (edge.shared) {
    // Answered once the record is gone: every instance then answers the id with 404.
    edge.sessions.drop(session.id);
    await edge.shared.deleted(session.id);
  } else {
    edge.sessions.delete(session.id);
  }
  return new PlainReply(204, null, {});
}

/** How long a legacy client may take to answer a relayed request. */
const ASK_TIMEOUT_MS = 10 * 60_000;
/** Relayed requests a session may have waiting at once. */
const MAX_ASKS = 64;

/**
 * Sends a request (sampling, elicitation, roots) to the client on the stream of the call it
 * belongs to (spec 2025-11-25: transports, "the server MAY send JSON-RPC requests and
 * notifications before sending the response"), and resolves with its answer, which the client
 * POSTs as a JSON-RPC response (`onResponse`). A client that takes only JSON cannot be asked.
 */
export function askClient(
  session: Session,
  answer: Answer,
  method: string,
  params: Record<string, unknown>,
  cancellation: Cancellation,
): Promise<Record<string, unknown>> {
  if (session.replies.size >= MAX_ASKS) {
    return Promise.reject(
      new ManifoldError('ERR_CLIENT_FEATURE', `too many requests are waiting for this client's answers`),
    );
  }
  const id = `manifold-${crypto.randomUUID()}`;
  return new Promise((resolve, reject) => {
    const settle = () => {
      clearTimeout(timer);
      off();
      session.replies.delete(id);
    };
    const timer = setTimeout(() => {
      settle();
      reject(new ManifoldError('ERR_CLIENT_FEATURE', `the client did not answer ${method} in time`));
    }, ASK_TIMEOUT_MS);
    unrefTimer(timer);
    const off = cancellation.onAbort((reason) => {
      settle();
      reject(reason);
    });
    session.replies.set(id, (message) => {
      settle();
      if (message.error !== undefined) {
        const e = message.error as { code?: unknown; message?: unknown };
        reject(
          new ManifoldError(
            'ERR_CLIENT_FEATURE',
            `the client refused ${method}: ${typeof e.message === 'string' ? stripUnsafe(e.message).slice(0, 512) : 'no reason given'}`,
            {
              data: { clientCode: typeof e.code === 'number' ? e.code : -32603 },
            },
          ),
        );
      } else if (isObject(message.result)) {
        resolve(message.result);
      } else {
        reject(
          new ManifoldError('ERR_CLIENT_FEATURE', `the client answered ${method} without a result object`),
        );
      }
    });
    if (!answer.push(JSON.stringify({ jsonrpc: '2.0', id, method, params }))) {
      settle();
      reject(
        new ManifoldError(
          'ERR_CLIENT_FEATURE',
          `the server asked for ${method}, which needs a stream to reach the client: send Accept: application/json, text/event-stream`,
        ),
      );
    }
  });
}
