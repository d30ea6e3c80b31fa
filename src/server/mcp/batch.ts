/** 2025-03-26 JSON-RPC batches, bounded (#49.2). */
import { ManifoldError } from '../../errors.js';
import { byteLength } from '../../guards/result-cap.js';
import { batchAllowed, readMeta, unsupportedVersion } from '../../protocol/era.js';
import { classify, type JsonRpcId, type JsonRpcRequest } from '../../protocol/jsonrpc.js';
import { isModernVersion, SUPPORTED_VERSIONS } from '../../protocol/versions.js';
import { dispatch } from './dispatch.js';
import type { Edge } from './edge.js';
import { errorAnswer } from './errors.js';
import { type HttpIn, json, PlainReply, type Reply, replyText } from './http-in.js';
import { legacyExchange, onNotification, onResponse, requireSession } from './legacy.js';

/**
 * A 2025-03-26 batch: every request is answered, in order, in one JSON array; notifications and
 * responses in it need no answer, and a batch of only those gets 202 (spec 2025-03-26: transports).
 *
 * Bounded (#49.2), since one small batch can ask for many big answers: only the first
 * `maxBatchMessages` messages are taken, and the whole answer stays within
 * `maxBatchAnswerBytes` (BatchAnswers). Requests run one at a time, so at most one answer
 * beyond those kept is ever held. Each request past the count, and each once the answers are
 * full, is answered with an error and never run; the request whose answer did not fit ran, and
 * its error says so (its outcome is not shown, SECURITY F5). A batch whose errors alone would not
 * fit is refused whole.
 */
export async function legacyBatch(edge: Edge, c: HttpIn, batch: unknown[], bytesIn: number): Promise<Reply> {
  const versionHeader = c.header('mcp-protocol-version');
  if (isModernVersion(versionHeader))
    throw new ManifoldError(
      'ERR_BATCH',
      `JSON-RPC batches are not part of ${versionHeader}: send one message per POST`,
    );
  if (versionHeader !== undefined && !SUPPORTED_VERSIONS.includes(versionHeader))
    throw unsupportedVersion(versionHeader);
  if (batch.length === 0) throw new ManifoldError('ERR_BATCH', 'an empty JSON-RPC batch is not a message');
  const incoming = batch.map((m) => {
    const one = classify(m);
    // Each request's `_meta` is read here, so a malformed one refuses the whole batch up front.
    return one.kind === 'request' ? { ...one, meta: readMeta(one.message.params?._meta) } : one;
  });
  if (incoming.some((m) => m.kind === 'request' && m.message.method === 'initialize')) {
    throw new ManifoldError('ERR_BATCH', 'initialize must not be part of a JSON-RPC batch');
  }
  const session = await requireSession(edge, c, c.principal);
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
    const ex = legacyExchange(edge, c, session, m.message, m.meta, bytesIn, false);
    let reply: Reply;
    try {
      reply = await dispatch(edge, ex);
    } catch (e) {
      reply = json(errorAnswer(edge.gateway, m.message.id, e, 'legacy').body);
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
    errorAnswer(edge.gateway, id, new ManifoldError(code, message), 'legacy').body;
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

/**
 * The answers to one 2025-03-26 JSON-RPC batch, within a byte budget (#49.2): the whole answer
 * never holds more than `maxBytes`, whatever the batch asks for. Each request gets a slot in
 * order, and each slot reserves, up front, the bytes of the error that would answer it instead.
 * So every request can always be answered (with its result if that fits in place of its
 * reservation, else with its error), and the total stays in budget.
 *
 * @example
 * const answers = new BatchAnswers(4 * 1024 * 1024);
 * if (!answers.reserve(refusal.length)) ... // even the errors do not fit: refuse the batch
 * if (!answers.offer(0, result)) answers.refuse(0, refusal);
 * const body = answers.body();
 */
export class BatchAnswers {
  private readonly texts: (string | undefined)[] = [];
  private readonly reserved: number[] = [];
  /** Bytes of the answers so far, plus those reserved for the slots not answered yet. */
  private held = 0;

  constructor(readonly maxBytes: number) {}

  /**
   * A slot for the next request, with the bytes of its error answer set aside; false (and no
   * slot) when even that would take the answer past its budget.
   */
  reserve(errorBytes: number): boolean {
    const comma = this.reserved.length > 0 ? 1 : 0;
    if (this.held + 2 + comma + errorBytes > this.maxBytes) return false;
    this.held += comma + errorBytes;
    this.reserved.push(errorBytes);
    this.texts.push(undefined);
    return true;
  }

  /** Answers `slot` with `text` when it fits in place of the slot's reservation; false if not. */
  offer(slot: number, text: string): boolean {
    const bytes = byteLength(text);
    const room = this.maxBytes - 2 - this.held + (this.reserved[slot] ?? 0);
    if (bytes > room) return false;
    this.settle(slot, text, bytes);
    return true;
  }

  /** Answers `slot` with its error, which must be no longer than what the slot reserved. */
  refuse(slot: number, error: string): void {
    this.settle(slot, error, byteLength(error));
  }

  /** The JSON array of every answer, in order (all slots must have been answered). */
  body(): string {
    return `[${this.texts.join(',')}]`;
  }

  get size(): number {
    return this.texts.length;
  }

  private settle(slot: number, text: string, bytes: number): void {
    if (this.texts[slot] !== undefined) throw new Error(`batch slot ${slot} is already answered`);
    this.held += bytes - (this.reserved[slot] ?? 0);
    this.reserved[slot] = bytes;
    this.texts[slot] = text;
  }
}
