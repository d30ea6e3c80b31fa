/** The bookkeeping of one call relayed by `DirectCaller` (direct-call.ts). */
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { UpstreamInvalidAnswer, UpstreamRpcError } from '../call-errors.js';
import type { InputHandler, LogMessage } from '../session.js';
import type { DirectCallOptions } from './direct-call.js';

type Result = Record<string, unknown>;

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
 * One direct call in flight (direct-call.ts): its deadline, how it settles, and what reaches it.
 * One object per call with methods, rather than a closure per event, and a deadline read by its
 * caller's one shared timer instead of a timer per call (#18).
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
    private readonly options: DirectCallOptions,
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
    } else if (typeof m.result === 'object' && m.result !== null && !Array.isArray(m.result)) {
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
