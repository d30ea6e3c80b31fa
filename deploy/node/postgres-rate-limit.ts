/**
 * Rate limits shared by every instance on one Postgres (#15). The count of a tenant's calls lives
 * in one row per (one-minute window, tenant); an instance never asks the database per call. It
 * LEASES a block of the window's budget (one atomic UPDATE whose WHERE is the limit) and spends it
 * locally; only the call that finds its local block empty awaits the database for the next one.
 *
 * Bounds, per tenant and window (window = floor(instance clock / 60 s)):
 * - granted across all instances <= the limit, exactly: the database caps each lease at what is left;
 * - a lease not spent by the window's end expires with it, so up to N x (block - 1) calls may be
 *   refused early with N instances holding unspent leases (block = max(1, floor(limit / 20)));
 * - a limit lowered mid-window: blocks already leased are still spent (at most N x block over).
 * If the database cannot be reached when a lease is needed, the call is refused (fail closed,
 * Retry-After 1 s) and logged; calls from tenants without a limit never touch the database.
 */
import { LRUCache } from 'lru-cache';
import type pg from 'pg';
import type { LimiterInputs, TakeCall, TakeResult } from '../../src/auth/shared-limit.js';
import type { Logger } from '../../src/log.js';

export const WINDOW_MS = 60_000;
/** How many tenants' leases are remembered; an evicted lease's rest is lost (refuses early, never over). */
const MAX_TENANTS = 10_000;
/** After a failed lease, how long calls that need one are refused without asking again. */
const DOWN_MS = 1000;
/** Sweep windows older than the previous one once per this many leases. */
export const SWEEP_EVERY = 256;

// SET's right-hand sides all read the row before the update: `granted` is what this lease got.
const LEASE = `INSERT INTO manifold_rate_windows AS w (window_start, tenant, used, granted)
  VALUES ($1, $2, LEAST($3::bigint, $4::bigint), LEAST($3::bigint, $4::bigint))
  ON CONFLICT (window_start, tenant) DO UPDATE
  SET used = LEAST(w.used + $3, $4), granted = LEAST($3, $4 - w.used)
  WHERE w.used < $4
  RETURNING granted`;
const SWEEP = 'DELETE FROM manifold_rate_windows WHERE window_start < $1';

/** The calls one lease asks for: a twentieth of the limit, so one instance cannot hold it all. */
export const blockOf = (limit: number): number => Math.max(1, Math.floor(limit / 20));

export interface PostgresLimiterOptions {
  log?: Logger;
  /** A driver error in one line without the connection URL (postgres-store.ts's safeMessage). */
  describe: (e: unknown) => string;
}

interface Lease {
  /** The window's start (ms); a lease from another window is worth nothing. */
  window: number;
  /** Calls leased and not yet spent on this instance. */
  left: number;
  /** The limit at which the database granted nothing more in this window (a raised one asks again). */
  fullAt: number;
  /** The lease being asked for; every call waiting on it shares it. */
  pending?: Promise<void> | undefined;
}

const OK: TakeResult = { ok: true };

/**
 * A CallLimiterFactory over a Postgres pool.
 *
 * @example
 * new Gateway({ ..., callLimiter: postgresRateLimiter(store.pool, { describe }) });
 */
export function postgresRateLimiter(pool: pg.Pool, options: PostgresLimiterOptions) {
  return ({ perTenant, now }: LimiterInputs): TakeCall => {
    const leases = new LRUCache<string, Lease>({ max: MAX_TENANTS });
    let downUntil = Number.NEGATIVE_INFINITY;
    let asked = 0;

    const renew = async (tenant: string, lease: Lease, limit: number): Promise<void> => {
      try {
        const { rows } = await pool.query<{ granted: unknown }>(LEASE, [
          lease.window,
          tenant,
          blockOf(limit),
          limit,
        ]);
        const granted = Number(rows[0]?.granted ?? 0);
        if (granted > 0) lease.left += granted;
        else lease.fullAt = limit;
        if (++asked % SWEEP_EVERY === 0) void pool.query(SWEEP, [lease.window - WINDOW_MS]).catch(() => {});
      } catch (e) {
        downUntil = now() + DOWN_MS;
        options.log?.warn('rate_limit.store_unavailable', { error: options.describe(e) });
      }
    };

    const take = (tenant: string): TakeResult | Promise<TakeResult> => {
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
      // Until the next window: Retry-After in whole seconds, at least 1 (RFC 9110 §10.2.3).
      if (limit <= lease.fullAt)
        return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((window + WINDOW_MS - t) / 1000)) };
      if (t < downUntil) return { ok: false, retryAfterSeconds: 1 };
      const current = lease;
      current.pending ??= renew(tenant, current, limit).finally(() => {
        current.pending = undefined;
      });
      return current.pending.then(() => take(tenant));
    };
    return take;
  };
}
