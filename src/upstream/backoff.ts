export interface BackoffOptions {
  baseMs: number;
  capMs: number;
  /** Fraction of the delay that is randomised either way (0.25 means ±25%). */
  jitter: number;
  random?: () => number;
}

export const defaultBackoff: BackoffOptions = { baseMs: 1000, capMs: 60_000, jitter: 0.25 };

/**
 * Exponential backoff with jitter: 1 s, 2 s, 4 s … capped, each spread by ±jitter so that many
 * gateways restarting together do not hammer an upstream in lockstep.
 *
 * @example backoffDelay(3, defaultBackoff) // ≈ 4000 ± 1000
 */
export function backoffDelay(attempt: number, options: BackoffOptions = defaultBackoff): number {
  const n = Math.max(1, Math.floor(attempt));
  const raw = Math.min(options.capMs, options.baseMs * 2 ** Math.min(n - 1, 30));
  const r = (options.random ?? Math.random)();
  return Math.max(0, Math.round(raw * (1 - options.jitter + 2 * options.jitter * r)));
}

/**
 * While a resend waits for the connection to come back, reconnects follow this quicker schedule
 * (100 ms, 200 ms … 2 s after each failure) instead of the normal backoff (#14).
 */
const QUICK_RECONNECT: BackoffOptions = { baseMs: 100, capMs: 2_000, jitter: 0.1 };

/** An upstream's pending reconnect: when it is due, and when the attempt before it failed. */
export class ReconnectTimer {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private at = 0;
  private failedAt = 0;

  constructor(
    private readonly now: () => number,
    private readonly run: () => void,
  ) {}

  /** An attempt failed: the next one in `delay`. */
  afterFailure(delay: number): void {
    this.failedAt = this.now();
    this.schedule(delay);
  }

  /**
   * A resend waits on the reconnect: brings it forward from the normal backoff to the quick
   * schedule for `failures`, counted from the last failure (so a server that stays down is not
   * hammered).
   */
  hurry(failures: number): void {
    if (!this.timer) return;
    const at = this.failedAt + backoffDelay(failures, QUICK_RECONNECT);
    if (at >= this.at) return;
    this.schedule(Math.max(0, at - this.now()));
  }

  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(delay: number): void {
    this.cancel();
    this.at = this.now() + delay;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.run();
    }, delay);
  }
}
