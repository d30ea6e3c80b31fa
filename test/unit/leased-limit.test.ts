import { describe, expect, it } from 'vitest';
import { blockOf, DOWN_MS, type LeaseFn, leasedLimiter, WINDOW_MS } from '../../src/auth/leased-limit.js';
import type { TakeResult } from '../../src/auth/rate-limit.js';
import type { TakeCall } from '../../src/auth/shared-limit.js';
import { createJsonLogger } from '../../src/lib/log.js';

/** A clock the test moves by hand, starting 10 s into a window. */
function manualClock(start = 1_000 * WINDOW_MS + 10_000) {
  let t = start;
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
}

/**
 * The store half, faked: one count per (window, tenant) capped at the limit, answered after a
 * macrotask, as a store across a network would, so concurrent leases interleave.
 */
function fakeStore() {
  const used = new Map<string, number>();
  const asked: { tenant: string; window: number; block: number; limit: number }[] = [];
  const lease: LeaseFn = async (tenant, window, block, limit) => {
    asked.push({ tenant, window, block, limit });
    await new Promise((r) => setTimeout(r, 0));
    const key = `${window}|${tenant}`;
    const before = used.get(key) ?? 0;
    const granted = Math.max(0, Math.min(block, limit - before));
    used.set(key, before + granted);
    return granted;
  };
  return { lease, asked, used: (tenant: string, window: number) => used.get(`${window}|${tenant}`) ?? 0 };
}

const okCount = (results: TakeResult[]) => results.filter((r) => r.ok).length;

/** Takes one call at a time until the first refusal; how many were allowed. */
async function drain(take: TakeCall, tenant: string): Promise<number> {
  let n = 0;
  while ((await take(tenant)).ok) n++;
  return n;
}

for (const shareInFlight of [true, false]) {
  describe(`leasedLimiter (shareInFlight: ${shareInFlight})`, () => {
    it('a block is spent locally: only the call that finds it empty awaits the store', async () => {
      const store = fakeStore();
      const clock = manualClock();
      const take = leasedLimiter({ lease: store.lease, shareInFlight })({
        perTenant: () => 200,
        now: clock.now,
      });
      expect(blockOf(200)).toBe(10);
      for (let i = 0; i < 30; i++) expect(await take('acme')).toEqual({ ok: true });
      expect(store.asked).toHaveLength(3);
      expect(store.asked[0]).toEqual({ tenant: 'acme', window: 1_000 * WINDOW_MS, block: 10, limit: 200 });
    });

    it('two holders taking concurrently never pass the limit together; drained, they allow exactly the limit', async () => {
      const store = fakeStore();
      const clock = manualClock();
      const limit = 100;
      const takes = [0, 1].map(() =>
        leasedLimiter({ lease: store.lease, shareInFlight })({ perTenant: () => limit, now: clock.now }),
      );
      const burst = await Promise.all(Array.from({ length: 300 }, (_, i) => takes[i % 2]!('acme')));
      expect(okCount(burst)).toBeLessThanOrEqual(limit);
      expect(store.used('acme', 1_000 * WINDOW_MS)).toBe(limit);
      // What a holder leased and did not spend yet is spent by it, never by the other.
      const rest = (await drain(takes[0]!, 'acme')) + (await drain(takes[1]!, 'acme'));
      expect(okCount(burst) + rest).toBe(limit);
      // Refused until the window ends (50 s away), then the next window grants again.
      expect(await takes[0]!('acme')).toEqual({ ok: false, retryAfterSeconds: 50 });
      clock.advance(WINDOW_MS);
      expect((await drain(takes[0]!, 'acme')) + (await drain(takes[1]!, 'acme'))).toBe(limit);
    });

    it('tenants are counted apart; a tenant without a limit never asks the store', async () => {
      const store = fakeStore();
      const clock = manualClock();
      const perTenant = (t: string) => (t === 'free' ? undefined : t === 'inf' ? Infinity : 3);
      const take = leasedLimiter({ lease: store.lease, shareInFlight })({ perTenant, now: clock.now });
      expect(await drain(take, 'a')).toBe(3);
      expect(await drain(take, 'b')).toBe(3);
      const before = store.asked.length;
      for (let i = 0; i < 50; i++) {
        expect(await take('free')).toEqual({ ok: true });
        expect(await take('inf')).toEqual({ ok: true });
      }
      expect(store.asked).toHaveLength(before);
      expect(store.asked.every((a) => a.tenant === 'a' || a.tenant === 'b')).toBe(true);
    });

    it('a limit raised in the window asks again; a lowered one grants nothing more; 0 admits nothing', async () => {
      const store = fakeStore();
      const clock = manualClock();
      let limit = 4;
      const take = leasedLimiter({ lease: store.lease, shareInFlight })({
        perTenant: () => limit,
        now: clock.now,
      });
      expect(await drain(take, 'acme')).toBe(4);
      const asked = store.asked.length;
      // Known full at 4: refused locally, without asking.
      expect(await take('acme')).toEqual({ ok: false, retryAfterSeconds: 50 });
      expect(store.asked).toHaveLength(asked);
      limit = 6;
      expect(await drain(take, 'acme')).toBe(2);
      limit = 3;
      expect(await drain(take, 'acme')).toBe(0);
      limit = 0;
      expect(await take('acme')).toEqual({ ok: false, retryAfterSeconds: 60 });
    });

    it('a store that fails: refused with Retry-After 1 s (fail closed), logged once, not asked again for a second', async () => {
      const lines: string[] = [];
      const log = createJsonLogger({ level: 'debug', write: (l) => lines.push(l) });
      const clock = manualClock();
      let calls = 0;
      let up = false;
      const good = fakeStore();
      const lease: LeaseFn = (...args) => {
        calls++;
        return up
          ? good.lease(...args)
          : Promise.reject(new Error('connect to postgres://u:s3cret@db failed'));
      };
      const take = leasedLimiter({ lease, log, shareInFlight })({ perTenant: () => 40, now: clock.now });
      expect(await take('acme')).toEqual({ ok: false, retryAfterSeconds: 1 });
      expect(await take('acme')).toEqual({ ok: false, retryAfterSeconds: 1 });
      expect(calls).toBe(1);
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ event: 'rate_limit.store_unavailable', error: 'Error' });
      // Without a `describe`, only the error's name is logged: a store's message may carry a secret.
      expect(lines[0]).not.toContain('s3cret');
      up = true;
      clock.advance(DOWN_MS);
      expect(await take('acme')).toEqual({ ok: true });
      // Blocks already leased are spent even when the store goes down again.
      up = false;
      expect(await take('acme')).toEqual({ ok: true });
    });

    it('a store answering outside 0..block is treated as down', async () => {
      const clock = manualClock();
      for (const answer of [Number.NaN, -1, 1.5, 3, Infinity]) {
        const take = leasedLimiter({ lease: async () => answer, shareInFlight })({
          perTenant: () => 40,
          now: clock.now,
        });
        expect(await take('acme')).toEqual({ ok: false, retryAfterSeconds: 1 });
      }
    });
  });
}

describe('leasedLimiter: in-flight leases', () => {
  /** A store whose answers the test releases by hand. */
  function heldStore() {
    const held: { block: number; grant: (n: number) => void }[] = [];
    const lease: LeaseFn = (_tenant, _window, block) =>
      new Promise<number>((resolve) => {
        held.push({ block, grant: resolve });
      });
    return { lease, held };
  }

  it('shared: calls of a tenant arriving while its lease is out wait on that one lease', async () => {
    const store = heldStore();
    const take = leasedLimiter({ lease: store.lease, shareInFlight: true })({
      perTenant: () => 200,
      now: manualClock().now,
    });
    const answers = Array.from({ length: 5 }, () => take('acme'));
    expect(store.held).toHaveLength(1);
    store.held[0]!.grant(10);
    expect(await Promise.all(answers)).toEqual(Array(5).fill({ ok: true }));
    expect(store.held).toHaveLength(1);
  });

  it('unshared (Workers): no call waits on another call’s lease; the first asks a block, the others one call each', async () => {
    const store = heldStore();
    const take = leasedLimiter({ lease: store.lease, shareInFlight: false })({
      perTenant: () => 200,
      now: manualClock().now,
    });
    const first = take('acme');
    const others = Array.from({ length: 3 }, () => take('acme'));
    expect(store.held.map((h) => h.block)).toEqual([10, 1, 1, 1]);
    // The first call's lease never comes back (its request was cancelled): the others are answered.
    for (const h of store.held.slice(1)) h.grant(1);
    expect(await Promise.all(others)).toEqual(Array(3).fill({ ok: true }));
    // Nothing was left over to spend: the next call asks again, for a block while none is out.
    store.held[0]!.grant(10);
    expect(await first).toEqual({ ok: true });
    // The first lease's other 9 calls are spent locally.
    for (let i = 0; i < 9; i++) expect(await take('acme')).toEqual({ ok: true });
    expect(store.held).toHaveLength(4);
    void take('acme');
    expect(store.held).toHaveLength(5);
    expect(store.held.at(-1)!.block).toBe(10);
  });
});

describe('leasedLimiter: options', () => {
  it('are checked when the factory is built, with exact messages', () => {
    expect(() => leasedLimiter(undefined as never)).toThrow('options must be an object');
    expect(() => leasedLimiter({ shareInFlight: true } as never)).toThrow(
      '"lease" option must be a function',
    );
    expect(() => leasedLimiter({ lease: async () => 0 } as never)).toThrow(
      '"shareInFlight" option must be a boolean',
    );
  });
});
