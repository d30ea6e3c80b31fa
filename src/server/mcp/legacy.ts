/**
 * The legacy era downstream: revisions 2025-11-25, 2025-06-18 and 2025-03-26 of streamable HTTP
 * (spec 2025-11-25: basic/transports, basic/lifecycle). The initialize handshake opens a session
 * held in the edge's bounded table; the GET stream carries list_changed; DELETE ends a session.
 */
import type { Principal } from '../../auth/principal.js';
import { ManifoldError } from '../../errors.js';
import { byteLength } from '../../guards/result-cap.js';
import { batchAllowed } from '../../protocol/era.js';
import {
  classify,
  type JsonRpcId,
  type JsonRpcNotification,
  type JsonRpcRequest,
  resultMessage,
} from '../../protocol/jsonrpc.js';
import { LATEST_LEGACY, LEGACY_VERSIONS, LOG_LEVELS } from '../../protocol/versions.js';
import { BatchAnswers } from './batch-answers.js';
import { dispatchCommon, type Edge, failBody, json, serverCapabilities } from './dispatch.js';
import { type Exchange, legacyResult } from './exchange.js';
import { type HttpIn, PlainReply, type Reply, replyText } from './http-in.js';
import { askClient } from './legacy-ask.js';
import { Answer } from './relay/answer.js';
import { MAX_STREAMS, parseEventId, ResumableStream } from './resumable.js';
import { inflightKey, type Session } from './sessions.js';
import { SseStream, sseHeaders } from './sse.js';

export const SESSION_HEADER = 'mcp-session-id';

/** A client may ask for any revision; the answer is one the gateway serves (basic/lifecycle). */
export function negotiateVersion(requested: unknown): string {
  return typeof requested === 'string' && (LEGACY_VERSIONS as readonly string[]).includes(requested)
    ? requested
    : LATEST_LEGACY;
}

/**
 * The request's session. A local hit is synchronous; only a miss with a shared store (#15) waits
 * for the database, so a session's requests on the instance that holds it cost what they did.
 */
export function requireSession(edge: Edge, c: HttpIn, principal: Principal): Session | Promise<Session> {
  const id = c.header(SESSION_HEADER);
  if (!id) throw new ManifoldError('ERR_SESSION_REQUIRED', 'Mcp-Session-Id header is required');
  const session = edge.sessions.get(id, principal.key);
  if (session) {
    session.principal = principal;
    edge.shared?.used(session);
    return session;
  }
  if (!edge.shared) throw notFound();
  return edge.shared.find(id, principal).then((found) => {
    if (!found) throw notFound();
    found.principal = principal;
    found.seen = seenBy(edge, principal);
    return found;
  });
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

export interface LegacyPost {
  c: HttpIn;
  principal: Principal;
  message: Record<string, unknown>;
  bytesIn: number;
  canStream: boolean;
}

export async function initialize(edge: Edge, p: LegacyPost, request: JsonRpcRequest): Promise<Reply> {
  const { gateway } = edge;
  if (gateway.isStopping) throw new ManifoldError('ERR_SHUTTING_DOWN', 'the gateway is shutting down');
  const version = negotiateVersion(request.params?.protocolVersion);
  const caps = request.params?.capabilities;
  const session = edge.sessions.create(
    p.principal,
    version,
    gateway.platform.now(),
    typeof caps === 'object' && caps !== null && !Array.isArray(caps)
      ? (caps as Record<string, unknown>)
      : {},
  );
  session.seen = seenBy(edge, p.principal);
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

/**
 * One legacy message that is not an initialize: it needs its session. No async wrapper (#18): a
 * local session is found at once and the message goes on in the same turn.
 */
export function legacyPost(edge: Edge, p: LegacyPost): Reply | Promise<Reply> {
  const incoming = classify(p.message);
  if (incoming.kind === 'request' && incoming.message.method === 'initialize') {
    return initialize(edge, p, incoming.message);
  }
  const found = requireSession(edge, p.c, p.principal);
  // A local hit stays synchronous: the hot path pays no extra await for the shared store.
  return found instanceof Promise
    ? found.then((session) => inSession(edge, p, incoming, session))
    : inSession(edge, p, incoming, found);
}

function inSession(
  edge: Edge,
  p: LegacyPost,
  incoming: ReturnType<typeof classify>,
  session: Session,
): Reply | Promise<Reply> {
  if (incoming.kind === 'response') {
    onResponse(session, incoming.message);
    return new PlainReply(202, null, {});
  }
  if (incoming.kind === 'notification') {
    onNotification(session, incoming.message);
    return new PlainReply(202, null, {});
  }
  const request = incoming.message;
  const fail = (e: unknown) => json(failBody(edge, request.id, e, 'legacy').body);
  try {
    return dispatch(edge, exchange(edge, p, session, request), session).then(undefined, fail);
  } catch (e) {
    return fail(e);
  }
}

/** Its members' order is modern.ts `exchange`'s too: one hidden class for both eras (#18). */
function exchange(edge: Edge, p: LegacyPost, session: Session, request: JsonRpcRequest): Exchange {
  // Resumable streams are 2025-11-25's (SEP-1699): older clients would take a priming event
  // with no data for a message.
  const resumable = p.canStream && session.protocolVersion === LATEST_LEGACY;
  const poll = edge.gateway.config.gateway.streamPollMs;
  return {
    principal: p.principal,
    request,
    era: 'legacy',
    protocolVersion: session.protocolVersion,
    http: p.c,
    clientCapabilities: session.clientCapabilities,
    canStream: p.canStream,
    answer: () => (resumable ? new Answer(true, () => openResumable(session)) : new Answer(p.canStream)),
    pollMs: resumable && poll > 0 ? poll : undefined,
    logLevel: session.logLevel,
    bytesIn: p.bytesIn,
    result: legacyResult.result,
    resultJson: legacyResult.resultJson,
    json: legacyResult.json,
    ask: (answer, method, params, cancellation) => askClient(session, answer, method, params, cancellation),
    track: (id, cancellation) => {
      const entry = session.inflight.add(inflightKey(id), cancellation);
      return () => session.inflight.remove(entry);
    },
  };
}

function dispatch(edge: Edge, ex: Exchange, session?: Session): Promise<Reply> {
  if (ex.request.method === 'ping') return Promise.resolve(json(resultMessage(ex.request.id, {})));
  if (ex.request.method === 'logging/setLevel' && session) {
    // The level applies to this session's later requests (spec 2025-11-25: utilities/logging).
    const level = ex.request.params?.level;
    if (!(LOG_LEVELS as readonly unknown[]).includes(level)) {
      throw new ManifoldError('ERR_INVALID_PARAMS', `level must be one of ${LOG_LEVELS.join(', ')}`);
    }
    session.logLevel = level as string;
    const reply = json(resultMessage(ex.request.id, {}));
    // Shared, so the level holds on whichever instance serves the session's next call.
    return edge.shared
      ? edge.shared.setLogLevel(session, level as string).then(() => reply)
      : Promise.resolve(reply);
  }
  if (
    (ex.request.method === 'resources/subscribe' || ex.request.method === 'resources/unsubscribe') &&
    session
  ) {
    return subscription(edge, ex, session);
  }
  return dispatchCommon(edge, ex);
}

/** resources/subscribe and unsubscribe (spec 2025-11-25: server/resources, "Subscriptions"). */
async function subscription(edge: Edge, ex: Exchange, session: Session): Promise<Reply> {
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
function onResponse(
  session: Session,
  message: { id: string | number; result?: unknown; error?: unknown },
): void {
  const reply = session.replies.get(String(message.id));
  if (!reply) return;
  session.replies.delete(String(message.id));
  reply(message);
}

function onNotification(session: Session, note: JsonRpcNotification): void {
  if (note.method === 'notifications/cancelled') {
    const id = note.params?.requestId;
    if (typeof id === 'string' || typeof id === 'number') {
      session.inflight.find(inflightKey(id))?.abort(new Error('cancelled by the client'));
    }
  }
  // notifications/initialized and others need no action.
}

/**
 * A 2025-03-26 batch: every request is answered, in order, in one JSON array; notifications and
 * responses in it need no answer, and a batch of only those gets 202 (spec 2025-03-26: transports).
 *
 * Bounded (#49.2), since one small batch can ask for many big answers: only the first
 * `maxBatchMessages` messages are taken, and the whole answer stays within
 * `maxBatchAnswerBytes` (batch-answers.ts). Requests run one at a time, so at most one answer
 * beyond those kept is ever held. Each request past the count, and each once the answers are
 * full, is answered with an error and never run; the request whose answer did not fit ran, and
 * its error says so (its outcome is not shown, SECURITY F5). A batch whose errors alone would not
 * fit is refused whole.
 */
export async function legacyBatch(
  edge: Edge,
  p: Omit<LegacyPost, 'message'>,
  batch: unknown[],
): Promise<Reply> {
  const versionHeader = p.c.header('mcp-protocol-version');
  if (batch.length === 0) throw new ManifoldError('ERR_BATCH', 'an empty JSON-RPC batch is not a message');
  const incoming = batch.map((m) => classify(m));
  if (incoming.some((m) => m.kind === 'request' && m.message.method === 'initialize')) {
    throw new ManifoldError('ERR_BATCH', 'initialize must not be part of a JSON-RPC batch');
  }
  const session = await requireSession(edge, p.c, p.principal);
  if (!batchAllowed(versionHeader, session.protocolVersion)) {
    throw new ManifoldError(
      'ERR_BATCH',
      `JSON-RPC batches are part of 2025-03-26 only; this session speaks ${versionHeader ?? session.protocolVersion}: send one message per POST`,
    );
  }
  const g = edge.gateway.config.gateway;
  const maxMessages = g.maxBatchMessages;
  const answers = new BatchAnswers(g.maxBatchAnswerBytes);
  const refusal = batchRefusals(edge, maxMessages, answers.maxBytes);
  const requests: { message: JsonRpcRequest; taken: boolean }[] = [];
  incoming.forEach((m, at) => {
    if (m.kind !== 'request') return;
    const taken = at < maxMessages;
    // The longest error this request may get is set aside before anything runs.
    const worst = taken ? refusal.ran(m.message.id) : refusal.overCount(m.message.id);
    if (!answers.reserve(byteLength(worst))) throw refusal.whole();
    requests.push({ message: m.message, taken });
  });
  let slot = 0;
  let full = false;
  for (const m of incoming.slice(0, maxMessages)) {
    if (m.kind === 'notification') onNotification(session, m.message);
    if (m.kind === 'response') onResponse(session, m.message);
    if (m.kind !== 'request') continue;
    const at = slot++;
    if (full) {
      answers.refuse(at, refusal.notRun(m.message.id));
      continue;
    }
    const ex = exchange(edge, { ...p, canStream: false, message: {} }, session, m.message);
    let reply: Reply;
    try {
      reply = await dispatch(edge, ex, session);
    } catch (e) {
      reply = json(failBody(edge, m.message.id, e, 'legacy').body);
    }
    if (answers.offer(at, await replyText(reply))) continue;
    full = true;
    answers.refuse(at, refusal.ran(m.message.id));
  }
  // Messages past the count are not taken: their requests get an error, the rest is dropped.
  for (const r of requests) if (!r.taken) answers.refuse(slot++, refusal.overCount(r.message.id));
  if (answers.size === 0) return new PlainReply(202, null, {});
  return json(answers.body());
}

/** The errors a batch's requests get past its bounds; fixed texts, so their size is known up front. */
function batchRefusals(edge: Edge, maxMessages: number, maxBytes: number) {
  const error = (id: JsonRpcId, code: 'ERR_BATCH' | 'ERR_OUTCOME_UNKNOWN', message: string) =>
    failBody(edge, id, new ManifoldError(code, message), 'legacy').body;
  return {
    overCount: (id: JsonRpcId) =>
      error(
        id,
        'ERR_BATCH',
        `not run: a batch takes at most ${maxMessages} messages (gateway.maxBatchMessages); send this request again in a later batch or on its own`,
      ),
    notRun: (id: JsonRpcId) =>
      error(
        id,
        'ERR_BATCH',
        `not run: the answers to this batch reached ${maxBytes} bytes (gateway.maxBatchAnswerBytes); send this request again on its own`,
      ),
    ran: (id: JsonRpcId) =>
      error(
        id,
        'ERR_OUTCOME_UNKNOWN',
        `this request ran, but its answer did not fit in the ${maxBytes} bytes of this batch's answers (gateway.maxBatchAnswerBytes), so its outcome is not shown; send it on its own only if running it again is safe`,
      ),
    whole: () =>
      new ManifoldError(
        'ERR_BATCH',
        `this batch holds more requests than ${maxBytes} bytes of answers (gateway.maxBatchAnswerBytes) can answer, even with errors: send at most ${maxMessages} messages per batch`,
      ),
  };
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
