/**
 * Requests relayed without the SDK's per-message machinery: tools/call over streamable HTTP in one
 * POST in the legacy era, and every request of a modern upstream, over HTTP or stdio.
 *
 * The SDK Client still owns the connection: it does the handshake, holds the session id and the
 * negotiated protocol version, lists tools, keeps the standalone GET stream and answers server
 * requests. Only the hot path, relaying one tools/call, skips it: the SDK builds a Headers object,
 * validates every message with zod, and runs its timeout and progress bookkeeping per request,
 * which together cost more CPU than the HTTP hop itself (measured in docs/design.md).
 *
 * Calls made here carry string ids with a `manifold:` prefix, which the SDK never uses (its ids
 * are numbers), so every stream the transport reads can route their answers back here: the POST's
 * own JSON or SSE answer, the standalone GET stream, and a resumed stream (Last-Event-ID).
 */

import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import { admitMessage } from '../../guards/depth.js';
import type { Cancellation } from '../../lib/cancellation.js';
import { isObject } from '../../lib/json.js';
import type { Logger } from '../../lib/log.js';
import { IdTable } from '../../lib/tables.js';
import { unrefTimer } from '../../platform.js';
import { withMeta, withMetaField } from '../../protocol/versions.js';
import { UpstreamProtocolError } from '../call-errors.js';
import type { StampOptions } from '../modern/wire.js';
import type { InputHandler, LogMessage } from '../session.js';
import { type CallHost, DirectCall, type Pending } from './direct-pending.js';
import { type PostOptions, postMessage, type StreamEnd, type Wire } from './http.js';

export interface DirectCallerOptions {
  /** Streamable HTTP: each request is a POST on this wire. */
  /** `perRequest`: no I/O object outlives its request (a Worker isolate): no signal is reused. */
  http?: { url: string; fetch: typeof fetch; wire: Wire; perRequest?: boolean };
  /** stdio: each request is written to the child (its answers reach `route`). */
  send?: (message: JSONRPCMessage) => Promise<void>;
  /** The params as sent (modern upstreams: the gateway's own per-request `_meta`). */
  stamp?: (params: Record<string, unknown>, options: StampOptions) => Record<string, unknown>;
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

export interface DirectCallOptions extends StampOptions {
  cancellation?: Cancellation | undefined;
  /** Whose request it is (the principal's key): see `DirectCaller.unnamed`. */
  caller?: string | undefined;
  onprogress?: ((p: { progress: number; total?: number; message?: string }) => void) | undefined;
  onlog?: ((m: LogMessage) => void) | undefined;
  onInput?: InputHandler | undefined;
  /** Idle timeout, restarted by each progress notification. */
  timeoutMs: number;
  /** Absolute cap, progress notwithstanding. */
  maxTotalMs: number;
}

type Result = Record<string, unknown>;

const PREFIX = 'manifold:';
/** Unused request signals kept for reuse (see `signals`). */
const SPARE_SIGNALS = 64;
/**
 * Requests one signal serves at most. Node's fetch provably leaves no listener behind; a runtime
 * whose fetch did would grow a reused signal's listener list, so each signal retires after this
 * many (bounding any such growth while keeping almost all of the saving).
 */
export const MAX_SIGNAL_USES = 256;

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
  makeDirect: (deliver: Deliver) => DirectCaller | undefined,
): DirectCaller | undefined {
  const deliver = transport.onmessage;
  if (!deliver) return undefined;
  const sdk: Deliver = (message, extra) => {
    if ('id' in message && !('method' in message)) queueMicrotask(() => deliver(message, extra));
    else deliver(message, extra);
  };
  const direct = makeDirect(sdk);
  transport.onmessage = (given, extra) => {
    const message = admitMessage(given);
    if (!message) return;
    if (!direct?.route(message)) sdk(message, extra);
  };
  return direct;
}

export class DirectCaller implements CallHost {
  /** Calls in flight by the number in their id (not a Map: see tables.ts). */
  private readonly pending = new IdTable<Pending>();
  private seq = 0;
  /**
   * Controllers whose signal never fired, for the next POST. Each request needs a signal of its
   * own (a timed-out or cancelled call must free its connection), but making an AbortSignal on
   * Node 20 costs more than the rest of the request bookkeeping; a finished request leaves its
   * signal clean (the fetch removes its listener), so it is reused.
   */
  private readonly signals: AbortController[] = [];
  private readonly uses = new WeakMap<AbortController, number>();
  /**
   * Whose requests this connection has carried: none yet, one caller's key, or MANY. Only a
   * connection that one caller ever used can say whose a message that names no request is.
   */
  private callers: string | typeof MANY | undefined;

  constructor(private readonly o: DirectCallerOptions) {}

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

  /**
   * The call in flight under one of our ids (`manifold:<n>`, exactly as we wrote it). The digits
   * are compared with `String(n)`, not the whole id with one built again: an id of 13 characters
   * or more is built as a cons string, which V8 flattens to compare (about 700 instructions a
   * call, #18).
   */
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

  call(params: Record<string, unknown>, options: DirectCallOptions): Promise<Result> {
    return this.request('tools/call', params, options);
  }

  request(method: string, params: Record<string, unknown>, options: DirectCallOptions): Promise<Result> {
    const n = ++this.seq;
    const id = `${PREFIX}${n}`;
    const { cancellation, onprogress, caller } = options;
    if (caller !== undefined && caller !== this.callers) {
      this.callers = this.callers === undefined ? caller : MANY;
    }
    let callParams = this.o.stamp ? this.o.stamp(params, options) : params;
    if (onprogress) {
      const given = callParams._meta;
      const meta = typeof given === 'object' && given !== null && !Array.isArray(given) ? given : {};
      callParams = withMetaField(
        callParams,
        withMeta(meta as Record<string, unknown>, { progressToken: id }),
      );
    }
    const message = { jsonrpc: '2.0' as const, id, method, params: callParams };
    if (cancellation?.aborted) return Promise.reject(cancellation.reason);
    // Only a POST needs a signal (stdio requests have no connection of their own to free).
    const http = this.o.http;
    const controller = http
      ? ((http.perRequest ? undefined : this.signals.pop()) ?? new AbortController())
      : undefined;
    const used = controller ? (this.uses.get(controller) ?? 0) + 1 : 0;
    if (controller) this.uses.set(controller, used);
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
    // The request is over and the call answered: a signal that never fired serves the next
    // call. (A call still waiting, after a 202 or on a resumed stream, keeps its signal, since
    // a timeout may yet abort it.) Runs as soon as the answer is read, before the caller
    // resumes, so back-to-back calls share one signal.
    let over = false;
    const requestOver = () => {
      if (over) return;
      over = true;
      if (
        call.settled &&
        !controller.signal.aborted &&
        used < MAX_SIGNAL_USES &&
        !http.perRequest &&
        this.signals.length < SPARE_SIGNALS
      ) {
        this.signals.push(controller);
      }
    };
    this.post(message, controller.signal, requestOver).then(
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
   * The calls' deadlines share one timer, armed for the earliest (#18): a call whose deadline is
   * later than the armed one (almost every call, since they share a timeout) arms nothing, and a
   * finished call clears nothing. When it fires, the calls past their deadline time out and it is
   * armed again for the earliest left.
   */
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  /**
   * Whether the timer holds the process. Where it could be unref'd (Node) it holds nothing, and
   * stays armed when the last call ends (#18). Node files timers in a list per duration and drops a list its last ref'd
   * timer leaves: a client calling one at a time made a list and dropped it on every call, about
   * 3,800 instructions a call under callgrind. Where a timer has no `unref` (Workers), it is
   * cleared with the last call, as before.
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

  /** The POST options, built once: per-call state travels as arguments. */
  private postOptions: PostOptions | undefined;

  /**
   * Sends one request. Resolves once its answer is read (HTTP) or written (stdio); with where to
   * resume from when a resumable stream ended before the call was answered.
   */
  private post(
    message: { jsonrpc: '2.0'; id: string; method: string; params: Record<string, unknown> },
    signal: AbortSignal | undefined,
    requestOver: () => void,
  ): Promise<StreamEnd | undefined> {
    const http = this.o.http;
    if (!http || !signal) return this.o.send!(message as JSONRPCMessage).then(() => undefined);
    this.postOptions ??= { ...http, log: this.o.log, receive: (m, via) => this.receive(m, via) };
    // The request is over as soon as its answer is read: its signal is released before the
    // caller resumes, so back-to-back calls share one.
    const onRead = () => {
      if (!this.byId(message.id)) requestOver();
    };
    return postMessage(this.postOptions, message, signal, onRead).then((end) => {
      if (end === 'accepted' || !this.byId(message.id)) return undefined;
      if (end.json) throw new UpstreamProtocolError('the JSON answer did not answer the call');
      if (end.lastEventId !== undefined && http.wire.resume) return end;
      throw new UpstreamProtocolError('the upstream closed its event stream before answering');
    });
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
  return (
    typeof m === 'object' && m !== null && !Array.isArray(m) && (m as { jsonrpc?: unknown }).jsonrpc === '2.0'
  );
}
