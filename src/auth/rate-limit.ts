/**
 * Per-tenant rate limit for tools/call: one token bucket per tenant, held in memory.
 *
 * The limit is per gateway instance (per isolate on Workers): it protects upstreams from one noisy
 * tenant, it is not a global quota.
 */
import { LRUCache } from 'lru-cache';

export interface RateLimiterOptions {
  /** The tenant's calls per minute; undefined means unlimited. Read on every call, so it may change. */
  perTenant: (tenant: string) => number | undefined;
  /** How many tenants' buckets are remembered (least recently used go first). Default 10000. */
  max?: number;
  /** Milliseconds, monotonic enough (Date.now-like); injected so tests need no real time. */
  now: () => number;
}

export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number };

interface Bucket {
  /**
   * Fill level in token-milliseconds-per-minute units: one call costs 60 000 units and the bucket
   * gains `callsPerMinute` units per millisecond. With integer limits and millisecond clocks every
   * step is an integer, so no floating-point drift ever turns a due token into 0.9999….
   */
  units: number;
  /** When `units` was last brought up to date. */
  at: number;
}

/** Units one call costs: a minute in milliseconds. */
const CALL = 60_000;
const DEFAULT_MAX = 10_000;

/**
 * A token bucket per tenant: capacity `callsPerMinute`, refilled continuously at
 * `callsPerMinute / 60` tokens per second, starting full. A call takes one token or is refused with
 * how long until one is back (for `Retry-After`, RFC 9110 §10.2.3).
 *
 * Forgetting a bucket (LRU eviction) only ever refills it, which is what time would do anyway for
 * a tenant that has been quiet longest; the cache bounds memory however many tenants tokens name.
 * A limit of 0, a negative one or NaN admits nothing (fail closed); Infinity admits everything.
 *
 * @example
 * const take = rateLimiter({ perTenant: () => 60, now: () => Date.now() });
 * take('acme'); // { ok: true } … 60 times in a burst, then
 * take('acme'); // { ok: false, retryAfterSeconds: 1 }
 */
export function rateLimiter(options: RateLimiterOptions): (tenant: string) => TakeResult {
  if (!options || typeof options !== 'object') throw new TypeError('options must be an object');
  const { perTenant, now } = options;
  if (typeof perTenant !== 'function') throw new TypeError('"perTenant" option must be a function');
  if (typeof now !== 'function') throw new TypeError('"now" option must be a function');
  const max = options.max ?? DEFAULT_MAX;
  if (!Number.isSafeInteger(max) || max < 1) throw new TypeError('"max" option must be a positive integer');

  const buckets = new LRUCache<string, Bucket>({ max });

  return function take(tenant: string): TakeResult {
    const limit = perTenant(tenant);
    if (limit === undefined || limit === Number.POSITIVE_INFINITY) return { ok: true };
    if (!(limit > 0)) return { ok: false, retryAfterSeconds: 60 };

    const t = now();
    // Burst = callsPerMinute, but at least one call, so a limit below 1/min still admits some.
    const capacity = Math.max(limit, 1) * CALL;
    let bucket = buckets.get(tenant);
    if (!bucket) {
      bucket = { units: capacity, at: t };
      buckets.set(tenant, bucket);
    } else {
      // A clock that steps backwards refills nothing rather than draining or overflowing.
      const elapsed = Math.max(0, t - bucket.at);
      // min(): a bucket never holds more than its capacity, even if the limit was just lowered.
      bucket.units = Math.min(capacity, bucket.units + elapsed * limit);
      bucket.at = t;
    }
    if (bucket.units >= CALL) {
      bucket.units -= CALL;
      return { ok: true };
    }
    // Whole seconds, at least 1: Retry-After is an integer number of seconds.
    const retryAfterSeconds = Math.max(1, Math.ceil((CALL - bucket.units) / limit / 1000));
    return { ok: false, retryAfterSeconds };
  };
}
