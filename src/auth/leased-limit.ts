/**
 * Rate limits counted in a shared store by leased blocks of a fixed one-minute window (#15), the
 * runtime-neutral half: what an instance (or Worker isolate) does with its leases. The store half is
 * one function, `lease`, that atomically takes up to `block` calls from a tenant's window and says
 * how many it took: a Postgres UPSERT on Node (deploy/node/store/postgres/rate-limit.ts), the tenant's
 * Durable Object on Workers (deploy/workers/tenant-limit.ts).
 *
 * Bounds, per tenant and window (window = floor(clock / 60 s)):
 * - granted across all holders <= the limit, exactly: the store caps each lease at what is left;
 * - a lease not spent by the window's end expires with it, so up to N x (block - 1) calls may be
 *   refused early with N holders keeping unspent leases (block = max(1, floor(limit / 20)));
 * - a limit lowered mid-window: blocks already leased are still spent (at most N x block over).
 * If the store cannot be reached when a lease is needed, the call is refused (fail closed,
 * Retry-After 1 s) and logged; calls from tenants without a limit never touch the store.
 */
import { LRUCache } from 'lru-cache';
import type { Logger } from '../lib/log.js';
import type { TakeResult } from './rate-limit.js';
import type { CallLimiterFactory, LimiterInputs, TakeCall } from './shared-limit.js';

export const WINDOW_MS = 60_000;
/** How many tenants' leases are remembered; an evicted lease's rest is lost (refuses early, never over). */
const MAX_TENANTS = 10_000;
/** After a failed lease, how long calls that need one are refused without asking again. */
export const DOWN_MS = 1000;

/** The calls one lease asks for: a twentieth of the limit, so one holder cannot take it all. */
export const blockOf = (limit: number): number => Math.max(1, Math.floor(limit / 20));

/**
 * Takes up to `block` calls from `tenant`'s window starting at `windowStart` (ms), never letting the
 * window's total pass `limit`; resolves to how many it took (0 when the window is full). Rejects
 * when the store cannot answer.
 */
export type LeaseFn = (tenant: string, windowStart: number, block: number, limit: number) => Promise<number>;

export interface LeasedLimiterOptions {
  lease: LeaseFn;
  log?: Logger;
  /** A store error in one line, without secrets (a connection URL); the error's name when absent. */
  describe?: (e: unknown) => string;
  /**
   * Whether a call that finds its tenant's lease being asked for may wait on that request instead
   * of sending its own. True where I/O outlives the request that started it (Node, a Durable
   * Object). False in a Worker isolate: the lease's subrequest belongs to the request that sent it,
   * and when that request ends or is cancelled the runtime cancels its I/O, so another request
   * awaiting it could hang. Unshared, each such call asks for one call of its own (not a block),
   * so a burst in one isolate does not hoard the budget.
   */
  shareInFlight: boolean;
}

interface Lease {
  /** The window's start (ms); a lease from another window is worth nothing. */
  window: number;
  /** Calls leased and not yet spent here. */
  left: number;
  /** The limit at which the store granted nothing more in this window (a raised one asks again). */
  fullAt: number;
  /** The lease being asked for; with shareInFlight, every call waiting on it shares it. */
  pending?: Promise<void> | undefined;
}

const OK: TakeResult = { ok: true };
const DOWN: TakeResult = { ok: false, retryAfterSeconds: 1 };

const errorName = (e: unknown): string => (e instanceof Error ? e.name : typeof e);

/**
 * A CallLimiterFactory that spends leased blocks locally and asks `lease` only when its block for
 * the tenant is empty.
 *
 * @example
 * const factory = leasedLimiter({ lease: (t, w, b, l) => store.lease(t, w, b, l), shareInFlight: true });
 * new Gateway({ ..., callLimiter: factory });
 */
export function leasedLimiter(options: LeasedLimiterOptions): CallLimiterFactory {
  if (!options || typeof options !== 'object') throw new TypeError('options must be an object');
  const { lease, log, shareInFlight } = options;
  if (typeof lease !== 'function') throw new TypeError('"lease" option must be a function');
  if (typeof shareInFlight !== 'boolean') throw new TypeError('"shareInFlight" option must be a boolean');
  const describe = options.describe ?? errorName;

  return ({ perTenant, now }: LimiterInputs): TakeCall => {
    const leases = new LRUCache<string, Lease>({ max: MAX_TENANTS });
    let downUntil = Number.NEGATIVE_INFINITY;

    const failed = (e: unknown): void => {
      downUntil = now() + DOWN_MS;
      log?.warn('rate_limit.store_unavailable', { error: describe(e) });
    };

    /**
     * Asks the store for `block` calls; what it grants goes into `lease`, less one when `spend` (the
     * asking call's own, taken in the same step so no other call can spend it first). Resolves to
     * the calls granted, -1 when the store failed; never rejects.
     */
    const ask = async (tenant: string, lease: Lease, limit: number, block: number, spend: boolean) => {
      try {
        const granted = await options.lease(tenant, lease.window, block, limit);
        // A store that answers something other than 0..block is broken: refuse, as when it is down.
        if (!Number.isSafeInteger(granted) || granted < 0 || granted > block)
          throw new RangeError(`lease granted ${String(granted)} of ${block}`);
        if (granted > 0) lease.left += spend ? granted - 1 : granted;
        else lease.fullAt = limit;
        return granted;
      } catch (e) {
        failed(e);
        return -1;
      }
    };

    /** Until the window's end: Retry-After in whole seconds, at least 1 (RFC 9110 §10.2.3). */
    const full = (window: number, t: number): TakeResult => ({
      ok: false,
      retryAfterSeconds: Math.max(1, Math.ceil((window + WINDOW_MS - t) / 1000)),
    });

    const take = async (tenant: string): Promise<TakeResult> => {
      const given = perTenant(tenant);
      if (given === undefined || given === Number.POSITIVE_INFINITY) return OK;
      if (!(given > 0)) return { ok: false, retryAfterSeconds: 60 };
      // Whole calls per window, at least one (config limits are integers already).
      const limit = Math.max(1, Math.floor(given));
      const t = now();
      const window = Math.floor(t / WINDOW_MS) * WINDOW_MS;
      let lease = leases.get(tenant);
      if (lease?.window !== window) {
        lease = { window, left: 0, fullAt: 0 };
        leases.set(tenant, lease);
      }
      if (lease.left > 0) {
        lease.left--;
        return OK;
      }
      if (limit <= lease.fullAt) return full(window, t);
      if (t < downUntil) return DOWN;
      const current = lease;
      if (shareInFlight) {
        current.pending ??= ask(tenant, current, limit, blockOf(limit), false).then(() => {
          current.pending = undefined;
        });
        await current.pending;
        return take(tenant);
      }
      // Unshared: this call's own lease, spent by this call first. The first asker takes a block;
      // while it is out, the others take one call each.
      const block = current.pending ? 1 : blockOf(limit);
      const mine = ask(tenant, current, limit, block, true);
      if (!current.pending) {
        const marker = mine.then(() => {
          if (current.pending === marker) current.pending = undefined;
        });
        current.pending = marker;
      }
      const granted = await mine;
      if (granted < 0) return DOWN;
      return granted === 0 ? full(window, now()) : OK;
    };
    return take;
  };
}
