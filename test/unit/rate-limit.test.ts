import { describe, expect, it } from 'vitest';
import { rateLimiter } from '../../src/auth/rate-limit.js';

/** A clock the test moves by hand: no real time passes anywhere in this file. */
function manualClock(start = 1_000_000) {
  let t = start;
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
    set: (ms: number) => {
      t = ms;
    },
  };
}

function drain(take: (tenant: string) => unknown, tenant: string, n: number) {
  for (let i = 0; i < n; i++) expect(take(tenant), `call ${i + 1}`).toEqual({ ok: true });
}

describe('rateLimiter', () => {
  it('validates its options', () => {
    const now = () => 0;
    expect(() => rateLimiter({ perTenant: undefined as never, now })).toThrow(
      '"perTenant" option must be a function',
    );
    expect(() => rateLimiter({ perTenant: () => 1, now: undefined as never })).toThrow(
      '"now" option must be a function',
    );
    expect(() => rateLimiter({ perTenant: () => 1, now, max: 0 })).toThrow(
      '"max" option must be a positive integer',
    );
    expect(() => rateLimiter({ perTenant: () => 1, now, max: 1.5 })).toThrow(TypeError);
  });

  it('a bucket starts full: a burst of callsPerMinute, then refusals with Retry-After', () => {
    const clock = manualClock();
    const take = rateLimiter({ perTenant: () => 60, now: clock.now });
    drain(take, 'acme', 60);
    expect(take('acme')).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(take('acme')).toEqual({ ok: false, retryAfterSeconds: 1 });
  });

  it('refills callsPerMinute/60 per second, continuously', () => {
    const clock = manualClock();
    const take = rateLimiter({ perTenant: () => 6, now: clock.now }); // one call per 10 s
    drain(take, 't', 6);
    expect(take('t')).toEqual({ ok: false, retryAfterSeconds: 10 });
    clock.advance(4_000);
    expect(take('t')).toEqual({ ok: false, retryAfterSeconds: 6 });
    clock.advance(5_999);
    expect(take('t')).toEqual({ ok: false, retryAfterSeconds: 1 });
    clock.advance(1);
    expect(take('t')).toEqual({ ok: true });
    expect(take('t')).toEqual({ ok: false, retryAfterSeconds: 10 });
    // Half a minute refills three calls, no more.
    clock.advance(30_000);
    drain(take, 't', 3);
    expect(take('t').ok).toBe(false);
  });

  it('never holds more than its capacity, however long it idles', () => {
    const clock = manualClock();
    const take = rateLimiter({ perTenant: () => 10, now: clock.now });
    drain(take, 't', 10);
    clock.advance(24 * 3600 * 1000);
    drain(take, 't', 10);
    expect(take('t').ok).toBe(false);
  });

  it('exact at every step: no floating-point drift loses a due call', () => {
    const clock = manualClock();
    // 7/min does not divide a minute into whole milliseconds; integer units keep it exact anyway.
    const take = rateLimiter({ perTenant: () => 7, now: clock.now });
    for (let minute = 0; minute < 200; minute++) {
      drain(take, 't', 7);
      expect(take('t').ok).toBe(false);
      clock.advance(60_000);
    }
  });

  it('tenants have separate buckets and separate limits', () => {
    const clock = manualClock();
    const limits: Record<string, number> = { small: 1, big: 100 };
    const take = rateLimiter({ perTenant: (t) => limits[t], now: clock.now });
    expect(take('small')).toEqual({ ok: true });
    expect(take('small')).toEqual({ ok: false, retryAfterSeconds: 60 });
    drain(take, 'big', 100);
    expect(take('big')).toEqual({ ok: false, retryAfterSeconds: 1 });
  });

  it('undefined means unlimited; Infinity too', () => {
    const clock = manualClock();
    const take = rateLimiter({
      perTenant: (t) => (t === 'inf' ? Number.POSITIVE_INFINITY : undefined),
      now: clock.now,
    });
    drain(take, 'free', 10_000);
    drain(take, 'inf', 10_000);
  });

  it('0, negative and NaN limits admit nothing (fail closed)', () => {
    const clock = manualClock();
    for (const limit of [0, -5, Number.NaN]) {
      const take = rateLimiter({ perTenant: () => limit, now: clock.now });
      expect(take('t')).toEqual({ ok: false, retryAfterSeconds: 60 });
    }
  });

  it('a limit below one per minute still admits one call, then waits', () => {
    const clock = manualClock();
    const take = rateLimiter({ perTenant: () => 0.5, now: clock.now }); // one call per two minutes
    expect(take('t')).toEqual({ ok: true });
    expect(take('t')).toEqual({ ok: false, retryAfterSeconds: 120 });
    clock.advance(120_000);
    expect(take('t')).toEqual({ ok: true });
  });

  it('a limit change applies at once, and lowering it clamps the bucket', () => {
    const clock = manualClock();
    let limit = 100;
    const take = rateLimiter({ perTenant: () => limit, now: clock.now });
    drain(take, 't', 1);
    limit = 2;
    drain(take, 't', 2);
    expect(take('t')).toEqual({ ok: false, retryAfterSeconds: 30 });
  });

  it('a clock that steps backwards refills nothing', () => {
    const clock = manualClock(1_000_000);
    const take = rateLimiter({ perTenant: () => 60, now: clock.now });
    drain(take, 't', 60);
    clock.set(0);
    expect(take('t').ok).toBe(false);
    // Time counts again from the new reading.
    clock.set(1_000);
    expect(take('t').ok).toBe(true);
  });

  it('the LRU bounds memory; an evicted tenant starts over with a full bucket', () => {
    const clock = manualClock();
    const take = rateLimiter({ perTenant: () => 1, now: clock.now, max: 2 });
    expect(take('a').ok).toBe(true);
    expect(take('a').ok).toBe(false);
    expect(take('b').ok).toBe(true);
    expect(take('c').ok).toBe(true); // evicts 'a', the least recently used
    expect(take('a').ok).toBe(true);
    // 'b' was evicted by 'a' in turn; 'c' is still remembered.
    expect(take('c').ok).toBe(false);
  });
});
