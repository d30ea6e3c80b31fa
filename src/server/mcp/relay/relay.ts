/**
 * One relayed request, from the downstream client to its upstream and back, whatever the method
 * (tools/call, prompts/get, resources/read, completion/complete): what reaches the client before
 * the result (progress re-keyed to its token, log messages at the level it asked for, tagged with
 * the server), the upstream's requests to the client (sampling, elicitation, roots, relayed under
 * policy in the client's era), how it cancels, and the answer at the end. Era-specific parts come
 * from the Exchange; the answer is JSON unless something had to be streamed first (answer.ts).
 */

import { ManifoldError } from '../../../errors.js';
import {
  checkInputRequests,
  relayedCapabilities,
  upstreamResponses,
} from '../../../guards/client-features.js';
import { Cancellation } from '../../../lib/cancellation.js';
import { isObject } from '../../../lib/json.js';
import { errorMessage, rawResultMessage } from '../../../protocol/jsonrpc.js';
import { TASKS_EXTENSION } from '../../../protocol/versions.js';
import type { InputHandler, InputRequests, InputResponses, LogMessage } from '../../../upstream/session.js';
import type { CallOptions } from '../../../upstream/types.js';
import type { Upstream } from '../../../upstream/upstream.js';
import type { Edge } from '../edge.js';
import type { Exchange } from '../exchange.js';
import type { MessageBody, Reply } from '../http-in.js';
import { json } from '../http-in.js';
import {
  type ApprovalGate,
  approvalVerdict,
  approvedRound,
  askApprovalLegacy,
  askApprovalModern,
  CLAIM_GRACE_MS,
} from '../rounds/approval.js';
import {
  type Approved,
  approvedFields,
  type HeldCall,
  inputRequiredResult,
  invalidState,
  openState,
  type Waiting,
} from '../rounds/mrtr.js';
import { logNote, progressNote, severe } from './log-relay.js';
import { explainFailure, plainEligible, plainRelay } from './plain.js';

type Result = Record<string, unknown>;

export interface Through {
  upstream: Upstream;
  method: string;
  params: Result;
  /** What a request state is bound to: the exposed tool or prompt name, or the URI. */
  target: string;
  /** The client's own progress token, if it asked for progress. */
  progressToken?: string | number | undefined;
  /** The final message for a result (serialized), answering request `id`; writes the audit line. */
  onResult(result: Result, id: string | number): MessageBody;
  /**
   * A round that reached the upstream ended asking the client for input (the client got the
   * question in `bytesOut` bytes, or was asked on its own stream: 0). Every round that reaches an
   * upstream writes an audit line (SECURITY G3); this one's call goes on in a later round.
   */
  onInputRequired?(bytesOut: number): void;
  /** The final message for a failure, with its HTTP status for a modern client. */
  onError(e: unknown, id: string | number): { body: string; status: number };
  /** A cancelled request: it gets no answer on a stream (spec: cancellation). */
  onCancelled(): void;
  /** The client declared the tasks extension and this request may create or drive a task. */
  tasks?: boolean;
  /** Running it twice does no harm (a `read` tool): it may be resent after a dropped session. */
  repeatable?: boolean;
  /** A person must approve the call before it is sent (approval.ts). */
  approval?: ApprovalGate;
  /** The gateway's id of the task this request belongs to (2025 tasks/result): relayed requests carry it. */
  relatedTask?: string;
  /** The upstream created a task: the client's answer to it (tasks.ts). */
  onTask?: (task: Result, id: string | number) => Promise<string>;
}

const INPUT_TTL_MS = 10 * 60_000; // how long a client may take to answer a request for input

export function runThrough(edge: Edge, ex: Exchange, t: Through): Promise<Reply> {
  // A modern client's retry (patterns/mrtr): its state says which round of which request it answers.
  if (ex.era === 'modern' && ex.request.params?.requestState !== undefined) return resumeRetry(edge, ex, t);
  if (t.approval && ex.era === 'modern')
    return edge.gateway.states.then((sealer) =>
      askApprovalModern(edge, ex, { method: t.method, target: t.target }, t.approval!, sealer),
    );
  // Nothing can reach the client before the result: one upstream request, one answer (#18).
  if (plainEligible(ex, t)) return plainRelay(edge, ex, t);
  return start(edge, ex, t, t.params, t.approval);
}

async function resumeRetry(edge: Edge, ex: Exchange, t: Through): Promise<Reply> {
  const sealer = await edge.gateway.states;
  const params = ex.request.params ?? {};
  let upstreamParams = t.params;
  const gate = t.approval;
  const now = edge.gateway.platform.now();
  const body = await openState(sealer, params.requestState, {
    principal: ex.principal.key,
    method: t.method,
    target: t.target,
    now,
  });
  const answers = isObject(params.inputResponses) ? params.inputResponses : {};
  let approved: Approved | undefined;
  if (body.k === 'approve') {
    // The user's answer to the gateway's own question; nothing of it goes upstream.
    if (gate) {
      const outcome = await approvalVerdict(edge, gate, body, answers, now);
      if (outcome !== 'accepted') return json(gate.refuse(outcome, ex.request.id));
      approved = { digest: gate.digest, by: ex.principal.subject, at: now };
      gate.approved(now, approved.by);
    }
  } else {
    // A later round of a call that needed approval: its state carries the approval of exactly
    // these arguments, or it is refused. A held call's rounds are single-use already; a wrapped
    // state carries an id of its own, claimed here, so replaying it never resends the approved
    // call to its upstream.
    if (gate) approved = approvedRound(gate, body);
    if (gate && body.k === 'wrap') {
      if (body.a === undefined) throw invalidState();
      if (!(await edge.gateway.store.claim(`wrap:${body.a}`, body.x + CLAIM_GRACE_MS, now))) {
        return json(gate.refuse('replayed', ex.request.id));
      }
    }
    // The answers go back under the keys the upstream asked with (client-features.ts clientKey).
    const upstreamAnswers = upstreamResponses(answers) as InputResponses;
    if (body.k === 'held') return resumeHeld(edge, ex, body.h, body.r, upstreamAnswers);
    if (body.s !== t.upstream.name) throw invalidState();
    upstreamParams = {
      ...t.params,
      inputResponses: upstreamAnswers,
      ...(body.u !== undefined ? { requestState: body.u } : {}),
    };
  }
  // Approved (or never needing it): the call goes.
  return start(edge, ex, t, upstreamParams, undefined, approved);
}

function resumeHeld(
  edge: Edge,
  ex: Exchange,
  token: unknown,
  round: unknown,
  answers: InputResponses,
): Promise<Reply> {
  const held = edge.held.get(token);
  if (!held || held.round !== round || !held.resume) throw invalidState();
  const answer = ex.answer();
  // The retry is the request now: closing it, streamed or not yet, cancels the call (patterns/cancellation).
  const closed = new Cancellation();
  closed.onAbort(() => edge.held.end(held.token, new Error('the client closed the request')));
  answer.abortOnClose = closed;
  ex.track(ex.request.id, closed);
  held.waiting = { answer, id: ex.request.id };
  const resume = held.resume;
  held.resume = undefined;
  resume(answers);
  return answer.response;
}

function start(
  edge: Edge,
  ex: Exchange,
  t: Through,
  upstreamParams: Result,
  /** A legacy client's user must approve first, on this request's stream. */
  gate?: ApprovalGate,
  /** A person approved the call: every state minted for a later round carries it (SECURITY G1). */
  approvedBefore?: Approved,
): Promise<Reply> {
  const { gateway } = edge;
  const { request } = ex;
  const first = ex.answer();
  let poll: ReturnType<typeof setTimeout> | undefined;
  const cancellation = new Cancellation();
  const done = ex.track(request.id, cancellation);
  const server = t.upstream.config;
  const waiting: Waiting | undefined = { answer: first, id: request.id };
  let held: HeldCall | undefined;
  let refused: ManifoldError | undefined;
  let approved = approvedBefore;
  // With tracing on, the request's span ends with the call (`end`), not with its first reply.
  const trace = ex.trace?.hold();
  // A stream the client closes is a cancellation in 2026-07-28 (patterns/cancellation); in the
  // legacy era a disconnect is not (2025-11-25: transports), and the call runs to its end.
  if (ex.era === 'modern') first.abortOnClose = cancellation;
  const current = (): Waiting | undefined => (held ? held.waiting : waiting);
  const refuse = (e: ManifoldError, end = true): never => {
    if (end) {
      refused = e;
      cancellation.abort(e);
    }
    throw e;
  };
  // Each request must be one the server may ask and the client declared; bounded before it goes.
  // One only `guessed` to be this call's (on no call's stream) is refused alone: the call runs on.
  const checked = (requests: InputRequests, guessed?: boolean): InputRequests => {
    const c = server.clientFeatures;
    const v = checkInputRequests(server.name, c, ex.clientCapabilities, requests, t.relatedTask);
    return v.ok ? v.requests : refuse(v.error, !guessed);
  };
  const askModern = async (requests: InputRequests): Promise<InputResponses> => {
    const w = current();
    if (!w) throw new ManifoldError('ERR_CLIENT_FEATURE', 'no request is waiting to carry the question');
    const now = gateway.platform.now();
    held ??= {
      token: crypto.randomUUID(),
      round: 0,
      expiresAt: now,
      abandon: (reason) => cancellation.abort(reason),
    };
    // Held for the client's retry: closing the first request no longer cancels the call.
    first.abortOnClose = undefined;
    const call = held;
    call.round++;
    call.expiresAt = now + INPUT_TTL_MS;
    call.waiting = undefined;
    const sealer = await edge.gateway.states;
    const state = await sealer.seal({
      v: 1,
      k: 'held',
      p: ex.principal.key,
      m: t.method,
      n: t.target,
      x: call.expiresAt,
      h: call.token,
      r: call.round,
      i: edge.instance,
      ...approvedFields(approved),
    });
    const reply = new Promise<InputResponses>((resolve, reject) => {
      call.resume = resolve;
      call.abandon = (reason) => {
        cancellation.abort(reason);
        reject(reason);
      };
    });
    edge.held.hold(call, ex.principal, now);
    const body = rawResultMessage(
      w.id,
      JSON.stringify(inputRequiredResult(requests, state, edge.serverInfo)),
    );
    w.answer.finish(body);
    t.onInputRequired?.(body.length);
    return reply;
  };
  const onInput: InputHandler = async (requests, guessed) => {
    const ok = checked(requests, guessed);
    if (ex.era === 'modern') return askModern(ok);
    const w = current();
    const answers: InputResponses = {};
    for (const [key, r] of Object.entries(ok)) {
      if (!w || !ex.ask)
        throw new ManifoldError('ERR_CLIENT_FEATURE', 'no request is waiting to carry the question');
      answers[key] = await ex.ask(w.answer, r.method, r.params ?? {}, cancellation);
    }
    return upstreamResponses(answers);
  };
  const level = ex.logLevel;
  const options: CallOptions = {
    cancellation,
    caller: ex.principal.key,
    onInput,
    inputMode: ex.era === 'modern' ? 'relay' : 'ask',
    repeatable: t.repeatable,
    clientCapabilities: withTasks(relayedCapabilities(server.clientFeatures, ex.clientCapabilities), t.tasks),
    onInputRound: t.onInputRequired ? () => t.onInputRequired?.(0) : undefined,
  };
  const token = t.progressToken;
  if (token !== undefined) options.onprogress = (p) => current()?.answer.push(progressNote(p, token), true);
  if (level !== undefined) {
    options.logLevel = level;
    options.onlog = (m: LogMessage) => {
      if (severe(m.level, level)) current()?.answer.push(logNote(m, server.name), true);
    };
  }
  // The client's error answer for what went wrong (a check that refused, a task answer that failed).
  const lastResort = (e: unknown) => {
    const w = current();
    if (w) finishError(w, e);
  };
  let entered = false;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    if (poll) clearTimeout(poll);
    done();
    if (held) edge.held.release(held.token);
    if (entered) gateway.leave();
    trace?.finish();
  };
  /** The upstream's result, answered; a promise only where more had to be awaited (seal, task). */
  const answerResult = (result: Result): Promise<void> | undefined => {
    const w = current();
    if (!w) return undefined;
    if (result.resultType === 'input_required') {
      // A modern upstream asked; a modern client takes the question as it is, with the
      // gateway's own state wrapped around the upstream's (mrtr.ts, "wrap").
      const requests = checked((isObject(result.inputRequests) ? result.inputRequests : {}) as InputRequests);
      return edge.gateway.states.then(async (sealer) => {
        const state = await sealer.seal({
          v: 1,
          k: 'wrap',
          p: ex.principal.key,
          m: t.method,
          n: t.target,
          x: gateway.platform.now() + INPUT_TTL_MS,
          s: t.upstream.name,
          ...(typeof result.requestState === 'string' ? { u: result.requestState } : {}),
          ...(t.approval ? { a: crypto.randomUUID() } : {}),
          ...approvedFields(approved),
        });
        const body = rawResultMessage(
          w.id,
          JSON.stringify(inputRequiredResult(requests, state, edge.serverInfo)),
        );
        w.answer.finish(body);
        t.onInputRequired?.(body.length);
      });
    }
    if (result.resultType === 'task') {
      if (!t.onTask) {
        throw new ManifoldError(
          'ERR_UPSTREAM_ERROR',
          `server ${server.name} answered with a task nobody asked for`,
        );
      }
      return t.onTask(result, w.id).then((body) => w.answer.finish(body));
    }
    w.answer.finish(t.onResult(result, w.id));
    return undefined;
  };
  const failed = (e: unknown) => {
    const w = current();
    if (refused) {
      if (w) finishError(w, refused);
      return;
    }
    if (cancellation.aborted) {
      t.onCancelled();
      w?.answer.abandon(errorMessage(w.id, -32800, 'request cancelled'));
      return;
    }
    if (w) finishError(w, explainFailure(server, ex, e));
  };
  // One promise reaction per call answers the result or the failure and ends its bookkeeping
  // (#18: a then/catch/finally chain and an async wrapper cost as much as the relay below them).
  const settleResult = (result: Result): void | Promise<void> => {
    let more: Promise<void> | undefined;
    try {
      more = answerResult(result);
    } catch (e) {
      settleFailure(e);
      return;
    }
    if (!more) return end();
    return more.then(end, settleFailure);
  };
  const settleFailure = (e: unknown): void => {
    try {
      lastResort(e);
    } finally {
      end();
    }
  };
  const settleError = (e: unknown): void => {
    try {
      failed(e);
    } catch (again) {
      lastResort(again);
    } finally {
      end();
    }
  };
  const go = () => {
    // A 2025-11-25 client may be told to poll: its stream closes, the call runs on (SEP-1699).
    if (ex.pollMs) poll = setTimeout(() => first.poll(), ex.pollMs);
    let work: Promise<Result>;
    try {
      gateway.enter();
      entered = true;
      work = trace
        ? trace.call(t.upstream, t.method, upstreamParams, options)
        : t.upstream.request(t.method, upstreamParams, options);
    } catch (e) {
      work = Promise.reject(e);
    }
    void work.then(settleResult, settleError);
  };
  if (!gate) go();
  else {
    // The user answers on this stream before anything is sent upstream (approval.ts).
    void askApprovalLegacy(ex, first, gate, cancellation).then(({ outcome, detail }) => {
      if (outcome === 'accepted') {
        const at = gateway.platform.now();
        approved = { digest: gate.digest, by: ex.principal.subject, at };
        gate.approved(at, approved.by);
        go();
        return;
      }
      done();
      if (cancellation.aborted && outcome === 'cancelled' && cancellation.reason !== gate) {
        t.onCancelled();
        first.abandon(errorMessage(request.id, -32800, 'request cancelled'));
      } else first.finish(gate.refuse(outcome, request.id, detail));
      trace?.finish();
    });
  }
  return first.response;

  function finishError(w: Waiting, e: unknown): void {
    trace?.fail(e);
    const f = t.onError(e, w.id);
    // A legacy client reads method errors inside a 200; a modern one also gets the statuses the
    // 2026-07-28 revision requires (400 for a missing client capability…).
    w.answer.finish(f.body, ex.era === 'modern' ? f.status : 200);
  }
}

/** The client capabilities for upstream, with the tasks extension when the request may use it. */
export function withTasks(caps: Result, tasks: boolean | undefined): Result {
  return tasks ? { ...caps, extensions: { [TASKS_EXTENSION]: {} } } : caps;
}
