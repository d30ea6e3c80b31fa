/**
 * One relayed request, from the downstream client to its upstream and back, whatever the method
 * (tools/call, prompts/get, resources/read, completion/complete, tasks/result): what reaches the
 * client before the result (progress re-keyed to its token, log messages at the level it asked
 * for, tagged with the server), the upstream's requests to the client (sampling, elicitation,
 * roots, relayed under policy in the client's era), how it cancels, and the answer at the end.
 * Era-specific parts come from the Exchange; the answer is JSON unless something had to be
 * streamed first (answer.ts). What only some calls need (a stream, a held call for a modern
 * client's retry) is made when it is needed.
 */

import { ManifoldError } from '../../../errors.js';
import {
  checkInputRequests,
  explainMissing,
  relayedCapabilities,
  upstreamResponses,
} from '../../../guards/client-features.js';
import { stripStrings, stripUnsafe } from '../../../guards/text.js';
import { Cancellation } from '../../../lib/cancellation.js';
import { isObject } from '../../../lib/json.js';
import { errorMessage, resultMessage } from '../../../protocol/jsonrpc.js';
import { LOG_LEVELS, TASKS_EXTENSION } from '../../../protocol/versions.js';
import type { InputRequests, InputResponses, LogMessage } from '../../../upstream/session.js';
import type { CallOptions } from '../../../upstream/types.js';
import type { Upstream } from '../../../upstream/upstream.js';
import type { Edge } from '../edge.js';
import { errorAnswer } from '../errors.js';
import type { Exchange } from '../exchange.js';
import { json, type Reply } from '../http-in.js';
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
  INPUT_TTL_MS,
  inputRequiredResult,
  invalidState,
  openState,
  type Waiting,
} from '../rounds/mrtr.js';
import type { RequestTrace } from '../tracing.js';
import type { Answer } from './answer.js';

type Result = Record<string, unknown>;

/** What a handler asks of the relay for one request: where it goes, and how its answer is made. */
export interface RelayRequest {
  upstream: Upstream;
  method: string;
  params: Result;
  /** What a request state is bound to: the exposed tool or prompt name, or the URI. */
  target: string;
  /** The client's own progress token, if it asked for progress. */
  progressToken?: string | number | undefined;
  /**
   * The final message for a result (serialized), answering request `id`; a promise when response
   * guardrails must run first (a webhook, #51).
   */
  onResult(result: Result, id: string | number): string | Promise<string>;
  /** A failure that belongs to the answer rather than to the protocol, as an isError result. */
  errorResult?(e: unknown): Result | undefined;
  /**
   * Writes the request's audit line: how it ended, with the bytes the client got. Every round that
   * reaches an upstream writes one (SECURITY G3): a round that ended asking the client for input
   * (`inputRequired`: the question took `bytesOut` bytes, or 0 when asked on the client's own
   * stream) goes on in a later round.
   */
  audit(verdict: 'allowed' | 'error', bytesOut: number, inputRequired?: boolean): void;
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

/** Relays `t` for request `ex`; resolves with the first reply (a stream as soon as one is needed). */
export async function relayRequest(edge: Edge, ex: Exchange, t: RelayRequest): Promise<Reply> {
  // A modern client's retry (patterns/mrtr): its state says which round of which request it answers.
  if (ex.era === 'modern' && ex.request.params?.requestState !== undefined) return resumeRetry(edge, ex, t);
  if (t.approval && ex.era === 'modern') {
    const sealer = await edge.gateway.states;
    return askApprovalModern(edge, ex, { method: t.method, target: t.target }, t.approval, sealer);
  }
  return new RelayedCall(edge, ex, t).start(t.params, t.approval);
}

async function resumeRetry(edge: Edge, ex: Exchange, t: RelayRequest): Promise<Reply> {
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
  return new RelayedCall(edge, ex, t, approved).start(upstreamParams);
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

/** One relayed request on its way: its upstream call, what the client gets meanwhile, its answer. */
class RelayedCall {
  /** The answer to the request that started the call. */
  private readonly first: Answer;
  /** Where the call's outcome goes while no held call has taken it over. */
  private readonly waiting: Waiting;
  private readonly cancellation = new Cancellation();
  /** Removes the cancellation from the client's reach (Exchange `track`). */
  private readonly untrack: () => void;
  /** With tracing on, the request's span ends with the call, not with its first reply. */
  private readonly trace: RequestTrace | undefined;
  /** Held for a modern client's retry, once the upstream asked something of it (mrtr.ts). */
  private held: HeldCall | undefined;
  /** The gateway refused what the upstream asked: this is the call's answer. */
  private refused: ManifoldError | undefined;
  private poll: ReturnType<typeof setTimeout> | undefined;
  private entered = false;
  private ended = false;

  constructor(
    private readonly edge: Edge,
    private readonly ex: Exchange,
    private readonly t: RelayRequest,
    /** A person approved the call: every state minted for a later round carries it (SECURITY G1). */
    private approved?: Approved,
  ) {
    this.first = ex.answer();
    this.waiting = { answer: this.first, id: ex.request.id };
    this.untrack = ex.track(ex.request.id, this.cancellation);
    this.trace = ex.trace?.hold();
    // A stream the client closes is a cancellation in 2026-07-28 (patterns/cancellation); in the
    // legacy era a disconnect is not (2025-11-25: transports), and the call runs to its end.
    if (ex.era === 'modern') this.first.abortOnClose = this.cancellation;
  }

  /**
   * Sends the call, once a legacy client's user approved it on this request's stream when `gate`
   * asks for that; resolves with the first reply (a stream as soon as something is streamed).
   */
  start(params: Result, gate?: ApprovalGate): Promise<Reply> {
    if (gate) void this.askFirst(gate, params);
    else this.send(params);
    return this.first.response;
  }

  private async askFirst(gate: ApprovalGate, params: Result): Promise<void> {
    const { ex, first, cancellation } = this;
    const { outcome, detail } = await askApprovalLegacy(ex, first, gate, cancellation);
    if (outcome === 'accepted') {
      const at = this.edge.gateway.platform.now();
      this.approved = { digest: gate.digest, by: ex.principal.subject, at };
      gate.approved(at, this.approved.by);
      this.send(params);
      return;
    }
    this.untrack();
    if (cancellation.aborted && outcome === 'cancelled' && cancellation.reason !== gate) {
      this.t.audit('error', 0);
      first.abandon(errorMessage(ex.request.id, -32800, 'request cancelled'));
    } else first.finish(gate.refuse(outcome, ex.request.id, detail));
    this.trace?.finish();
  }

  private send(params: Result): void {
    const { gateway } = this.edge;
    const { ex, t } = this;
    // A 2025-11-25 client may be told to poll: its stream closes, the call runs on (SEP-1699).
    if (ex.pollMs) this.poll = setTimeout(() => this.first.poll(), ex.pollMs);
    let work: Promise<Result>;
    try {
      gateway.enter();
      this.entered = true;
      const options = this.options();
      work = this.trace
        ? this.trace.call(t.upstream, t.method, params, options)
        : t.upstream.request(t.method, params, options);
    } catch (e) {
      work = Promise.reject(e);
    }
    work.then(
      (result) => this.settle(result),
      (e: unknown) => this.fail(e),
    );
  }

  private options(): CallOptions {
    const { ex, t } = this;
    const server = t.upstream.config;
    const options: CallOptions = {
      cancellation: this.cancellation,
      caller: ex.principal.key,
      onInput: (requests, guessed) => this.onInput(requests, guessed),
      inputMode: ex.era === 'modern' ? 'relay' : 'ask',
      repeatable: t.repeatable,
      clientCapabilities: withTasks(
        relayedCapabilities(server.clientFeatures, ex.clientCapabilities),
        t.tasks,
      ),
      onInputRound: () => t.audit('allowed', 0, true),
    };
    const token = t.progressToken;
    if (token !== undefined) {
      options.onprogress = (p) => this.current()?.answer.push(progressNote(p, token), true);
    }
    const level = ex.logLevel;
    if (level !== undefined) {
      options.logLevel = level;
      options.onlog = (m: LogMessage) => {
        if (severe(m.level, level)) this.current()?.answer.push(logNote(m, server.name), true);
      };
    }
    return options;
  }

  /** The request now waiting for the call's outcome: the first one, or a held call's retry. */
  private current(): Waiting | undefined {
    return this.held ? this.held.waiting : this.waiting;
  }

  /**
   * Each request must be one the server may ask and the client declared; bounded before it goes.
   * One only `guessed` to be this call's (on no call's stream) is refused alone: the call runs on.
   */
  private checked(requests: InputRequests, guessed?: boolean): InputRequests {
    const server = this.t.upstream.config;
    const v = checkInputRequests(
      server.name,
      server.clientFeatures,
      this.ex.clientCapabilities,
      requests,
      this.t.relatedTask,
    );
    if (v.ok) return v.requests;
    if (!guessed) {
      this.refused = v.error;
      this.cancellation.abort(v.error);
    }
    throw v.error;
  }

  /** The upstream asks the client something: on its stream (legacy), or in an MRTR round (modern). */
  private async onInput(requests: InputRequests, guessed?: boolean): Promise<InputResponses> {
    const ok = this.checked(requests, guessed);
    const { ex } = this;
    if (ex.era === 'modern') return this.askModern(ok);
    const w = this.current();
    const answers: InputResponses = {};
    for (const [key, r] of Object.entries(ok)) {
      if (!w || !ex.ask)
        throw new ManifoldError('ERR_CLIENT_FEATURE', 'no request is waiting to carry the question');
      answers[key] = await ex.ask(w.answer, r.method, r.params ?? {}, this.cancellation);
    }
    return upstreamResponses(answers);
  }

  /** A legacy upstream asked mid-call: the call is held here, the client answers on a retry. */
  private async askModern(requests: InputRequests): Promise<InputResponses> {
    const { edge, ex, t, cancellation } = this;
    const w = this.current();
    if (!w) throw new ManifoldError('ERR_CLIENT_FEATURE', 'no request is waiting to carry the question');
    const now = edge.gateway.platform.now();
    this.held ??= {
      token: crypto.randomUUID(),
      round: 0,
      expiresAt: now,
      abandon: (reason) => cancellation.abort(reason),
    };
    // Held for the client's retry: closing the first request no longer cancels the call.
    this.first.abortOnClose = undefined;
    const call = this.held;
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
      ...approvedFields(this.approved),
    });
    const reply = new Promise<InputResponses>((resolve, reject) => {
      call.resume = resolve;
      call.abandon = (reason) => {
        cancellation.abort(reason);
        reject(reason);
      };
    });
    edge.held.hold(call, ex.principal, now);
    const body = resultMessage(w.id, inputRequiredResult(requests, state, edge.serverInfo));
    t.audit('allowed', body.length, true);
    w.answer.finish(body);
    return reply;
  }

  /** The upstream's result, answered (a modern upstream's question or task after more awaits). */
  private async settle(result: Result): Promise<void> {
    try {
      const w = this.current();
      if (w) await this.answer(w, result);
    } catch (e) {
      // A check that refused, a task answer that failed: the client's error answer for it.
      const w = this.current();
      if (w) this.finishError(w, e);
    } finally {
      this.end();
    }
  }

  private async answer(w: Waiting, result: Result): Promise<void> {
    const { edge, ex, t } = this;
    const asks = result.resultType === 'input_required';
    let body: string;
    if (asks) {
      // A modern upstream asked; a modern client takes the question as it is, with the
      // gateway's own state wrapped around the upstream's (mrtr.ts, "wrap").
      const requests = this.checked(
        (isObject(result.inputRequests) ? result.inputRequests : {}) as InputRequests,
      );
      const sealer = await edge.gateway.states;
      const state = await sealer.seal({
        v: 1,
        k: 'wrap',
        p: ex.principal.key,
        m: t.method,
        n: t.target,
        x: edge.gateway.platform.now() + INPUT_TTL_MS,
        s: t.upstream.name,
        ...(typeof result.requestState === 'string' ? { u: result.requestState } : {}),
        ...(t.approval ? { a: crypto.randomUUID() } : {}),
        ...approvedFields(this.approved),
      });
      body = resultMessage(w.id, inputRequiredResult(requests, state, edge.serverInfo));
    } else if (result.resultType === 'task') {
      if (!t.onTask) {
        throw new ManifoldError(
          'ERR_UPSTREAM_ERROR',
          `server ${t.upstream.name} answered with a task nobody asked for`,
        );
      }
      body = await t.onTask(result, w.id);
    } else body = await t.onResult(result, w.id);
    t.audit('allowed', body.length, asks || undefined);
    w.answer.finish(body);
  }

  /** The upstream call failed, was cancelled, or the gateway refused what it asked. */
  private fail(e: unknown): void {
    const w = this.current();
    try {
      if (this.refused) {
        if (w) this.finishError(w, this.refused);
      } else if (this.cancellation.aborted) {
        this.t.audit('error', 0);
        w?.answer.abandon(errorMessage(w.id, -32800, 'request cancelled'));
      } else if (w) {
        this.finishError(w, explainFailure(this.t.upstream.config, this.ex, e));
      }
    } catch (again) {
      if (w) this.finishError(w, again);
    } finally {
      this.end();
    }
  }

  private finishError(w: Waiting, e: unknown): void {
    this.trace?.fail(e);
    const { ex, t } = this;
    const asResult = t.errorResult?.(e);
    const f = asResult
      ? { body: resultMessage(w.id, ex.dress(asResult)), status: 200 }
      : errorAnswer(this.edge.gateway, w.id, e, ex.era);
    t.audit('error', f.body.length);
    // A legacy client reads method errors inside a 200; a modern one also gets the statuses the
    // 2026-07-28 revision requires (400 for a missing client capability…).
    w.answer.finish(f.body, ex.era === 'modern' ? f.status : 200);
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.poll) clearTimeout(this.poll);
    this.untrack();
    if (this.held) this.edge.held.release(this.held.token);
    if (this.entered) this.edge.gateway.leave();
    this.trace?.finish();
  }
}

/** An upstream's MissingRequiredClientCapability, said from where the gateway stands. */
function explainFailure(server: Upstream['config'], ex: Exchange, e: unknown): unknown {
  if (!(e instanceof ManifoldError) || e.code !== 'ERR_MISSING_CAPABILITY') return e;
  const required = e.data?.requiredCapabilities;
  const why = explainMissing(server.name, server.clientFeatures, ex.clientCapabilities, required);
  if (!why) return e;
  return why.why === 'off'
    ? new ManifoldError('ERR_CLIENT_FEATURE', why.reason, { cause: e })
    : new ManifoldError('ERR_MISSING_CAPABILITY', why.reason, {
        cause: e,
        data: { requiredCapabilities: { [why.feature]: {} } },
      });
}

/** The client capabilities for upstream, with the tasks extension when the request may use it. */
export function withTasks(caps: Result, tasks: boolean | undefined): Result {
  return tasks ? { ...caps, extensions: { [TASKS_EXTENSION]: {} } } : caps;
}

const MAX_LOG_DATA = 8192;

/** RFC 5424 severity: a message is sent when it is at least as severe as the level asked for. */
export function severe(level: unknown, atLeast: string): boolean {
  const at = LOG_LEVELS.indexOf(atLeast as never);
  const got = LOG_LEVELS.indexOf(level as never);
  return got !== -1 && at !== -1 && got >= at;
}

/** Upstream log data is untrusted: every string in it is stripped, and the whole is bounded. */
export function boundLogData(data: unknown): unknown {
  let text: string;
  try {
    text = JSON.stringify(data) ?? 'null';
  } catch {
    return '[unserializable log data]';
  }
  if (text.length > MAX_LOG_DATA) return `${stripUnsafe(text).slice(0, MAX_LOG_DATA)}…`;
  // Parsed again from its bounded text, so its depth is what that text can hold.
  return stripStrings(JSON.parse(text));
}

/** A progress notification for the client, re-keyed to its own token. */
export function progressNote(
  p: { progress: number; total?: number; message?: string },
  token: string | number,
): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    method: 'notifications/progress',
    // Only the fields the protocol defines, each checked: an upstream's extras never ride along.
    params: {
      progressToken: token,
      progress: typeof p.progress === 'number' && Number.isFinite(p.progress) ? p.progress : 0,
      ...(typeof p.total === 'number' && Number.isFinite(p.total) ? { total: p.total } : {}),
      ...(typeof p.message === 'string' ? { message: stripUnsafe(p.message).slice(0, 1024) } : {}),
    },
  });
}

/** An upstream's log message for the client, tagged with the server's name. */
export function logNote(m: LogMessage, server: string): string {
  const logger = typeof m.logger === 'string' ? `${server}/${stripUnsafe(m.logger).slice(0, 128)}` : server;
  return JSON.stringify({
    jsonrpc: '2.0',
    method: 'notifications/message',
    params: { level: m.level, logger, data: boundLogData(m.data) },
  });
}
