/**
 * Multi round-trip requests for modern clients (spec 2026-07-28: patterns/mrtr). Two cases:
 *
 * - **wrap**: a modern upstream answered `input_required`. The client gets its input requests and
 *   a requestState of the gateway's own that carries the upstream's state inside; the retry is
 *   unwrapped and sent upstream. Nothing is held: any instance with the same secret can take the
 *   retry.
 * - **held**: a legacy upstream asked (sampling, elicitation, roots) in the middle of a call. The
 *   call stays open here, the client gets `input_required` with a requestState naming it, and the
 *   retry's answers resume it. The state is single-use: each round has its own number.
 *
 * Every state is MACed (auth/seal.ts) and bound to the principal, the method, the tool (or
 * prompt, or URI) and an expiry, and refused otherwise (mrtr, "Server Requirements": principal,
 * expiry, originating request).
 */

import type { Sealer } from '../../../auth/seal.js';
import { ManifoldError } from '../../../errors.js';
import { unrefTimer } from '../../../platform.js';
import type { InputRequests, InputResponses } from '../../../upstream/session.js';
import { CallerBounds, type CallerLimits, type Holder } from '../caller-bounds.js';
import type { Answer } from '../relay/answer.js';

export interface StateBody {
  v: 1;
  /** approve: the gateway asked the user whether the call may run at all (approval.ts). */
  k: 'wrap' | 'held' | 'approve';
  /** Principal key. */
  p: string;
  /** Method and target (exposed tool or prompt name, or URI). */
  m: string;
  n: string;
  /** Expiry (ms since the epoch). */
  x: number;
  /** wrap: the server, and its own requestState. */
  s?: string;
  u?: string;
  /** held: the call's token, and the round this state answers. */
  h?: string;
  r?: number;
  /** held: the instance that holds the call (forward.ts sends a retry that lands elsewhere there). */
  i?: string;
  /** A single-use id, claimed in the store when the state is used: an approval's, or a wrap's of an approved call. */
  a?: string;
  /**
   * The digest of the arguments a person approved: on the approval state, and on every later
   * state of an approved call (wrap, held), so no round of it can run other arguments (SECURITY G1).
   */
  d?: string;
  /** wrap, held: who approved the call (the subject whose client answered) and when (ms). */
  b?: string;
  t?: number;
}

/** A person's yes, as every later round of the call carries it (SECURITY G1). */
export interface Approved {
  /** The digest of the canonical arguments shown and approved (approval.ts). */
  digest: string;
  by: string;
  at: number;
}

/** The fields of a state for a round of an approved call; none for a call that needed no approval. */
export function approvedFields(approved: Approved | undefined): Pick<StateBody, 'd' | 'b' | 't'> {
  return approved ? { d: approved.digest, b: approved.by, t: approved.at } : {};
}

/** The approval a wrap or held state carries, if any: all three fields, or none. */
export function approvedOf(body: StateBody): Approved | undefined {
  if (body.k === 'approve' || body.d === undefined) return undefined;
  return { digest: body.d, by: body.b!, at: body.t! };
}

export const invalidState = () =>
  new ManifoldError(
    'ERR_INVALID_PARAMS',
    'Invalid or expired requestState: send the original request again without it',
  );

/**
 * Opens a client's requestState for this request, or throws -32602 for anything that does not
 * match. An expired approval state is returned (the caller answers "nobody approved in time").
 */
export async function openState(
  sealer: Sealer,
  raw: unknown,
  expect: { principal: string; method: string; target: string; now: number },
): Promise<StateBody> {
  const body = (await sealer.open(raw)) as Partial<StateBody> | undefined;
  if (
    body?.v !== 1 ||
    (body.k !== 'wrap' && body.k !== 'held' && body.k !== 'approve') ||
    body.p !== expect.principal ||
    body.m !== expect.method ||
    body.n !== expect.target ||
    typeof body.x !== 'number' ||
    (body.x < expect.now && body.k !== 'approve') ||
    (body.k === 'approve' && (typeof body.a !== 'string' || typeof body.d !== 'string')) ||
    (body.k !== 'approve' &&
      body.d !== undefined &&
      (typeof body.d !== 'string' || typeof body.b !== 'string' || typeof body.t !== 'number'))
  ) {
    throw invalidState();
  }
  return body as StateBody;
}

/** How long a client may take to answer a request for input (a relayed call's or a program's). */
export const INPUT_TTL_MS = 10 * 60_000;

/** Where a held call's next outcome goes: the exchange that is waiting for it now. */
export interface Waiting {
  answer: Answer;
  id: string | number;
}

/** One call held open while its client gathers input. */
export interface HeldCall {
  token: string;
  round: number;
  expiresAt: number;
  /** The exchange waiting for the call's next outcome (none between a round and its retry). */
  waiting?: Waiting;
  /** Delivers the retry's answers to the upstream's pending question. */
  resume?: (answers: InputResponses) => void;
  /** Ends the call: the client never came back, or the gateway is stopping. */
  abandon: (reason: Error) => void;
}

/**
 * Calls held for modern clients, on this instance. Bounded per principal and per tenant before
 * the total (caller-bounds.ts, SECURITY G4): past a bound, the holder's own oldest call is
 * abandoned first, so one caller's flood never abandons another's question. Each call also
 * expires on its own.
 */
export class HeldCalls {
  private readonly calls = new Map<string, HeldCall>();
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  private readonly bounds: CallerBounds<string>;

  constructor(limits: CallerLimits) {
    this.bounds = new CallerBounds(limits);
  }

  /** Holds `call` for `holder` (again, for its next round: it keeps its place). */
  hold(call: HeldCall, holder: Holder, now: number): void {
    if (!this.calls.has(call.token)) {
      this.bounds.admit(holder, (token) => this.end(token, new Error('too many calls waiting for input')));
      this.bounds.add(call.token, holder);
    }
    this.calls.set(call.token, call);
    this.rearm(call, now);
  }

  rearm(call: HeldCall, now: number): void {
    this.disarm(call.token);
    const timer = setTimeout(
      () => this.end(call.token, new Error('the client did not answer in time')),
      Math.max(0, call.expiresAt - now),
    );
    unrefTimer(timer);
    this.timers.set(call.token, timer);
  }

  private disarm(token: string): void {
    const timer = this.timers.get(token);
    if (timer !== undefined) clearTimeout(timer);
    this.timers.delete(token);
  }

  get(token: unknown): HeldCall | undefined {
    return typeof token === 'string' ? this.calls.get(token) : undefined;
  }

  /** The call is over (answered, failed, abandoned): forget it. */
  release(token: string): void {
    this.disarm(token);
    this.calls.delete(token);
    this.bounds.remove(token);
  }

  end(token: string, reason: Error): void {
    const call = this.calls.get(token);
    this.release(token);
    call?.abandon(reason);
  }

  closeAll(): void {
    for (const token of [...this.calls.keys()]) this.end(token, new Error('the gateway is shutting down'));
  }

  get size(): number {
    return this.calls.size;
  }
}

/** An `input_required` result as the client sees it (never cached: no ttlMs or cacheScope). */
export function inputRequiredResult(
  requests: InputRequests,
  requestState: string,
  serverInfo: { name: string; version: string },
): Record<string, unknown> {
  return {
    resultType: 'input_required',
    inputRequests: requests,
    requestState,
    _meta: { 'io.modelcontextprotocol/serverInfo': serverInfo },
  };
}
