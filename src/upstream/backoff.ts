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
