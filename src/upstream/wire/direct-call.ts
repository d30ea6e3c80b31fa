/**
 * Requests relayed without the SDK's per-message machinery: tools/call over streamable HTTP in one
 * POST in the legacy era, and every request of a modern upstream, over HTTP or stdio.
 *
 * The SDK Client still owns the connection: it does the handshake, holds the session id and the
 * negotiated protocol version, lists tools, keeps the standalone GET stream and answers server
 * requests. Only the hot path, relaying one request, skips it: the SDK's per-request Headers, zod
 * validation and timeout bookkeeping cost more CPU than the HTTP hop itself.
 *
 * Calls made here carry string ids with a `manifold:` prefix, which the SDK never uses (its ids
 * are numbers), so every stream the transport reads can route their answers back here: the POST's
 * own JSON or SSE answer, the standalone GET stream, and a resumed stream (Last-Event-ID).
 */

import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ErrorCode,
  type JSONRPCMessage,
  McpError,
  type MessageExtraInfo,
} from '@modelcontextprotocol/sdk/types.js';
import { admitMessage } from '../../guards/depth.js';
import { isObject } from '../../lib/json.js';
import type { Logger } from '../../lib/log.js';
import { IdTable } from '../../lib/tables.js';
import { type PostJson, unrefTimer } from '../../platform.js';
import { UpstreamInvalidAnswer, UpstreamProtocolError, UpstreamRpcError } from '../call-errors.js';
import type { InputHandler, LogMessage, SessionCallOptions } from '../session.js';
import { type PostOptions, postMessage, type StreamEnd, type Wire } from './http.js';

export interface DirectCallerOptions {
  /** Streamable HTTP: each request is a POST on this wire (`post`: the platform's, egress-guarded). */
  http?: { url: string; post: PostJson; wire: Wire };
  /** stdio: each request is written to the child (its answers reach `route`). */
  send?: (message: JSONRPCMessage) => Promise<void>;
  /** The params as sent (modern upstreams: the gateway's own per-request `_meta`). */
  stamp?: (params: Record<string, unknown>, options: SessionCallOptions) => Record<string, unknown>;
  /** A result as the call resolves with it (modern: undressed); throwing fails the call instead. */
  complete?: (result: Record<string, unknown>) => Record<string, unknown>;
  /** Where every message that is not an answer to a direct call goes (the SDK client, or a listener). */
  deliver: Deliver;
  /** A server request arrived on the stream of call `callId` (legacy: the SDK client answers it). */
  noteServerRequest?: (requestId: string | number, callId: string) => void;
  /** Tells the upstream a call was abandoned (notifications/cancelled). */
  cancel: (requestId: string, reason: string) => void;
  now: () => number;
  log: Logger;
}

type Result = Record<string, unknown>;

const PREFIX = 'manifold:';

type Deliver = (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;

/** The callers of a connection once more than one has sent a request on it. */
const MANY = Symbol('many callers');

/**
 * Puts a router in front of the SDK client on `transport`: answers to direct calls go to the
 * caller `makeDirect` builds (if any), everything else to the client. Responses reach the client
 * one microtask late: the SDK runs notification handlers a microtask late but settles responses
 * at once, so a progress notification in the same chunk as its response would find its handler
 * gone. Delaying responses keeps the wire order (B7).
 */
export function routeMessages(
  transport: Transport,
  makeDirect: (deliver: Deliver) => DirectCaller,
): DirectCaller {
  const deliver = transport.onmessage;
  if (!deliver) throw new Error('the transport has no client connected');
  const sdk: Deliver = (message, extra) => {
    if ('id' in message && !('method' in message)) queueMicrotask(() => deliver(message, extra));
    else deliver(message, extra);
  };
  const direct = makeDirect(sdk);
  transport.onmessage = (given, extra) => {
    const message = admitMessage(given);
    if (!message) return;
    if (!direct.route(message)) sdk(message, extra);
  };
  return direct;
}

export class DirectCaller implements CallHost {
  /** Calls in flight by the number in their id (not a Map: see tables.ts). */
  private readonly pending = new IdTable<Pending>();
  private seq = 0;
  /**
   * Whose requests this connection has carried: none yet, one caller's key, or MANY. Only a
   * connection that one caller ever used can say whose a message that names no request is.
   */
  private callers: string | typeof MANY | undefined;
  /** How this connection POSTs (HTTP only), its endpoint parsed once. */
  private readonly posting: PostOptions | undefined;

  constructor(private readonly o: DirectCallerOptions) {
    const { http } = o;
    this.posting = http && {
      url: new URL(http.url),
      post: http.post,
      wire: http.wire,
      log: o.log,
      receive: (m, via) => this.receive(m, via),
    };
  }

  /**
   * Takes the messages that belong to direct calls (answers and progress) and returns true;
   * anything else is the SDK client's. Late ones (after a timeout) are dropped here, not handed
   * to the SDK, which would report an unknown id as a transport error.
   */
  route(message: JSONRPCMessage, via?: string): boolean {
    const m = message as Record<string, unknown>;
    if ('method' in m) {
      if (m.method === 'notifications/message') {
        // On the request's own stream it is that request's; elsewhere (stdio, a GET stream) only
        // when it can be attributed to one caller (`unnamed`), else it reaches nobody.
        const target = via !== undefined ? this.byId(via) : this.unnamed();
        if (target?.log && isObject(m.params)) target.log(m.params as unknown as LogMessage);
        else if (target === undefined) this.o.log.debug('upstream.unattributed', { method: m.method });
        return true;
      }
      if ('id' in m && via !== undefined && this.byId(via)) {
        // A request from the server, on a call's stream: its answer belongs to that call.
        this.o.noteServerRequest?.(m.id as string | number, via);
        return false;
      }
      if (m.method !== 'notifications/progress') return false;
      const params = m.params as Record<string, unknown> | undefined;
      const token = params?.progressToken;
      if (typeof token !== 'string' || !token.startsWith(PREFIX)) return false;
      this.byId(token)?.progress(params!);
      return true;
    }
    const id = m.id;
    if (typeof id !== 'string' || !id.startsWith(PREFIX)) return false;
    this.byId(id)?.answer(m);
    return true;
  }

  /**
   * The call a message that names no request belongs to (one on stdio or a GET stream): the one
   * call in flight, and only while every request this connection carried was its caller's. A
   * shared server may log or ask about an earlier caller's call after answering it, so "the only
   * call in flight" alone could be another tenant's (SECURITY G5): once two callers have used the
   * connection, such a message is nobody's.
   */
  unnamed(): Pending | undefined {
    if (this.pending.size !== 1 || typeof this.callers !== 'string') return undefined;
    const only = this.pending.list()[0];
    return only?.whose === this.callers ? only : undefined;
  }

  /** The call in flight under one of our ids: `manifold:<n>`, exactly as we wrote it. */
  private byId(id: string): Pending | undefined {
    const digits = id.slice(PREFIX.length);
    const n = Number(digits);
    if (!Number.isSafeInteger(n) || n <= 0 || String(n) !== digits) return undefined;
    return this.pending.get(n);
  }

  /** The input handler of a call in flight (by its id), or of the one `unnamed` attributes to. */
  inputFor(callId: string | undefined): InputHandler | undefined {
    return (callId !== undefined ? this.byId(callId) : this.unnamed())?.input;
  }

  /** Fails every call in flight (the connection closed under them). */
  closeAll(error: unknown): void {
    for (const p of this.pending.list()) p.fail(error);
  }

  request(method: string, params: Record<string, unknown>, options: SessionCallOptions): Promise<Result> {
    const n = ++this.seq;
    const id = `${PREFIX}${n}`;
    const { cancellation, onprogress, caller } = options;
    if (caller !== undefined && caller !== this.callers) {
      this.callers = this.callers === undefined ? caller : MANY;
    }
    let callParams = this.o.stamp ? this.o.stamp(params, options) : params;
    if (onprogress) {
      const given = callParams._meta;
      callParams = { ...callParams, _meta: { ...(isObject(given) ? given : {}), progressToken: id } };
    }
    const message = { jsonrpc: '2.0' as const, id, method, params: callParams };
    if (cancellation?.aborted) return Promise.reject(cancellation.reason);
    const http = this.posting;
    // A POST has a signal of its own: a call that times out or is cancelled frees its connection.
    // A stdio request has no connection of its own to free.
    const controller = http ? new AbortController() : undefined;
    const call = new DirectCall(this, n, id, options, this.o.now(), controller);
    const answered = new Promise<Result>((resolve, reject) => {
      call.resolve = resolve;
      call.reject = reject;
    });
    // Abandoned calls are cancelled upstream too (spec: utilities/cancellation), and their
    // request is aborted so its connection is freed.
    if (cancellation)
      call.off = cancellation.onAbort((reason) => call.abandon(reason, 'cancelled by the client'));
    this.pending.set(n, call);
    call.arm();
    if (!http || !controller) {
      // stdio: the line is written (its answer reaches `route`); a failed write fails the call.
      this.o.send!(message as JSONRPCMessage).then(undefined, (e: unknown) => {
        if (call.finish()) call.reject(e);
      });
      return answered;
    }
    this.post(http, message, controller.signal).then(
      (end) => {
        // Answered, or a 202 (the answer comes on another stream; the timeout bounds the wait).
        const resume = http.wire.resume;
        if (call.settled || end?.lastEventId === undefined || !resume) return;
        // The server ended a resumable stream before answering: the SDK resumes it (GET with
        // Last-Event-ID) after the delay the server asked for with `retry:` (spec 2025-11-25:
        // transports, resumability), and the answer reaches route() from there.
        const from = end.lastEventId;
        const again = () => {
          if (call.settled) return;
          resume(message, from).catch((e: unknown) => {
            if (call.finish()) call.reject(e);
          });
        };
        if (end.retryMs && end.retryMs > 0) setTimeout(again, Math.min(end.retryMs, options.maxTotalMs));
        else again();
      },
      (e: unknown) => {
        if (call.finish()) call.reject(e);
      },
    );
    return answered;
  }

  /**
   * The calls' deadlines share one timer, armed for the earliest: a timer per call cost more than
   * the rest of a call's bookkeeping. A call whose deadline is later than the armed one arms
   * nothing, and a finished call clears nothing; when it fires, the calls past their deadline time
   * out and it is armed again for the earliest left.
   */
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  /**
   * Whether the timer holds the process. Where it could be unref'd (Node) it holds nothing and
   * stays armed when the last call ends; where it could not (Workers), it goes with the last call.
   */
  private timerHeld = false;

  /** A call's deadline (ms since the epoch): its `expire` runs once that has passed. */
  schedule(at: number): void {
    if (at >= this.timerAt) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.sweep(), Math.max(0, at - this.o.now()));
    this.timerHeld = !unrefTimer(this.timer);
  }

  /** A call ended; with none left, a timer that would hold the process goes too. */
  ended(n: number): void {
    this.pending.delete(n);
    if (this.pending.size === 0 && this.timerHeld && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Number.POSITIVE_INFINITY;
    }
  }

  private sweep(): void {
    // The timer fired for `timerAt`: that deadline has passed even if the wall clock, read now,
    // says a millisecond less (timers may fire that early by it).
    const now = Math.max(this.o.now(), this.timerAt);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    let next = Number.POSITIVE_INFINITY;
    for (const call of this.pending.list()) {
      if (!(call instanceof DirectCall)) continue;
      if (call.deadline <= now) call.expire();
      else if (call.deadline < next) next = call.deadline;
    }
    if (next !== Number.POSITIVE_INFINITY) this.schedule(next);
  }

  /** Tells the upstream a call was abandoned (notifications/cancelled). */
  cancelUpstream(id: string, reason: string): void {
    this.o.cancel(id, reason);
  }

  now(): number {
    return this.o.now();
  }

  complete(result: Record<string, unknown>): Record<string, unknown> {
    return this.o.complete ? this.o.complete(result) : result;
  }

  /** Sends one request as a POST; resolves with where to resume from when a resumable stream ended unanswered. */
  private async post(
    http: PostOptions,
    message: { jsonrpc: '2.0'; id: string; method: string; params: Record<string, unknown> },
    signal: AbortSignal,
  ): Promise<StreamEnd | undefined> {
    const end = await postMessage(http, message, signal);
    if (end === 'accepted' || !this.byId(message.id)) return undefined;
    if (end.json) throw new UpstreamProtocolError('the JSON answer did not answer the call');
    if (end.lastEventId !== undefined && http.wire.resume) return end;
    throw new UpstreamProtocolError('the upstream closed its event stream before answering');
  }

  private receive(given: unknown, via?: string): void {
    const m = isMessage(given) ? admitMessage(given) : undefined;
    if (!m) {
      this.o.log.debug('upstream.bad_message');
      return;
    }
    if (!this.route(m, via)) this.o.deliver(m);
  }
}

function isMessage(m: unknown): m is JSONRPCMessage {
  return isObject(m) && m.jsonrpc === '2.0';
}

/** What reaches a call in flight: its answer, progress, log messages and questions, or a failure. */
export interface Pending {
  answer(message: Record<string, unknown>): void;
  progress(params: Record<string, unknown>): void;
  /** Whose call it is (the principal's key), when a caller made it. */
  readonly whose?: string | undefined;
  log?: ((m: LogMessage) => void) | undefined;
  input?: InputHandler | undefined;
  fail(error: unknown): void;
}

/** What a call asks of the caller that made it. */
export interface CallHost {
  /** Arms the shared timer for this deadline if it is the earliest; `expire` runs once it has passed. */
  schedule(at: number): void;
  /** The call `n` ended: it leaves the table of calls in flight. */
  ended(n: number): void;
  /** Tells the upstream call `id` was abandoned. */
  cancelUpstream(id: string, reason: string): void;
  now(): number;
  /** The result a call resolves with (the caller's `complete`); may throw. */
  complete(result: Result): Result;
}

/**
 * One direct call in flight (direct-call.ts): its deadline, read by its caller's one shared timer,
 * how it settles, and what reaches it.
 */
export class DirectCall implements Pending {
  settled = false;
  /** When the armed deadline passes (ms since the epoch), and whether it is the absolute one. */
  deadline = 0;
  private forTotal = false;
  resolve!: (result: Result) => void;
  reject!: (error: unknown) => void;
  off: (() => void) | undefined;
  readonly log: ((m: LogMessage) => void) | undefined;
  readonly input: InputHandler | undefined;
  readonly whose: string | undefined;

  constructor(
    private readonly caller: CallHost,
    private readonly n: number,
    private readonly id: string,
    private readonly options: SessionCallOptions,
    private readonly started: number,
    private readonly controller: AbortController | undefined,
  ) {
    this.log = options.onlog;
    this.input = options.onInput;
    this.whose = options.caller;
  }

  /** Ends the call's bookkeeping; false when it had already ended. */
  finish(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.caller.ended(this.n);
    this.off?.();
    return true;
  }

  abandon(error: unknown, reason: string): void {
    if (!this.finish()) return;
    this.caller.cancelUpstream(this.id, reason);
    this.controller?.abort(error);
    this.reject(error);
  }

  /**
   * (Re)starts the idle deadline, capped by the absolute one. Which of the two it is is decided
   * here: timers may fire a millisecond early by the wall clock, so the elapsed time cannot tell
   * them apart later.
   */
  arm(): void {
    const { timeoutMs, maxTotalMs } = this.options;
    const now = this.caller.now();
    const left = maxTotalMs - (now - this.started);
    this.forTotal = left < timeoutMs;
    this.deadline = now + Math.max(0, this.forTotal ? left : timeoutMs);
    this.caller.schedule(this.deadline);
  }

  expire(): void {
    const { timeoutMs, maxTotalMs } = this.options;
    const error = this.forTotal
      ? new McpError(ErrorCode.RequestTimeout, 'Maximum total timeout exceeded', {
          maxTotalTimeout: maxTotalMs,
          totalElapsed: this.caller.now() - this.started,
        })
      : new McpError(ErrorCode.RequestTimeout, 'Request timed out', { timeout: timeoutMs });
    this.abandon(error, String(error.message));
  }

  answer(m: Record<string, unknown>): void {
    if (!this.finish()) return;
    const error = m.error as { code?: unknown; message?: unknown; data?: unknown } | undefined;
    if (error && typeof error === 'object') {
      const code = typeof error.code === 'number' ? error.code : ErrorCode.InternalError;
      this.reject(new UpstreamRpcError(code, String(error.message ?? 'error'), error.data));
    } else if (isObject(m.result)) {
      let result: Result;
      try {
        result = this.caller.complete(m.result as Result);
      } catch (e) {
        this.reject(e);
        return;
      }
      this.resolve(result);
    } else {
      this.reject(new UpstreamInvalidAnswer('the answer has no result object'));
    }
  }

  progress(p: Record<string, unknown>): void {
    if (this.settled || typeof p.progress !== 'number') return;
    this.arm();
    const { progressToken: _token, ...rest } = p;
    this.options.onprogress?.(rest as { progress: number });
  }

  fail(error: unknown): void {
    if (!this.finish()) return;
    this.controller?.abort(error);
    this.reject(error);
  }
}
