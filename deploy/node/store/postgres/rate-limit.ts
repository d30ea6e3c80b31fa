/**
 * Rate limits shared by every instance on one Postgres (#15). The count of a tenant's calls lives
 * in one row per (one-minute window, tenant); an instance never asks the database per call. It
 * LEASES a block of the window's budget (one atomic UPDATE whose WHERE is the limit) and spends it
 * locally (src/auth/leased-limit.ts, which also states the bounds); only the call that finds its
 * local block empty awaits the database for the next one.
 */
import type pg from 'pg';
import { type LeaseFn, leasedLimiter, WINDOW_MS } from '../../../../src/auth/leased-limit.js';
import type { CallLimiterFactory } from '../../../../src/auth/shared-limit.js';
import type { Logger } from '../../../../src/lib/log.js';

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

export interface PostgresLimiterOptions {
  log?: Logger;
  /** A driver error in one line without the connection URL (store.ts's safeMessage). */
  describe: (e: unknown) => string;
}

/** One lease: the UPSERT above; a full window (no row returned) grants 0. */
function postgresLease(pool: pg.Pool): LeaseFn {
  let asked = 0;
  return async (tenant, window, block, limit) => {
    const { rows } = await pool.query<{ granted: unknown }>(LEASE, [window, tenant, block, limit]);
    if (++asked % SWEEP_EVERY === 0) void pool.query(SWEEP, [window - WINDOW_MS]).catch(() => {});
    return Number(rows[0]?.granted ?? 0);
  };
}

/**
 * A CallLimiterFactory over a Postgres pool. Calls of a tenant that arrive while its lease is
 * being asked for wait on that one query (I/O outlives a request on Node).
 *
 * @example
 * new Gateway({ ..., callLimiter: postgresRateLimiter(store.pool, { describe }) });
 */
export function postgresRateLimiter(pool: pg.Pool, options: PostgresLimiterOptions): CallLimiterFactory {
  return (inputs) =>
    leasedLimiter({
      lease: postgresLease(pool),
      describe: options.describe,
      ...(options.log ? { log: options.log } : {}),
      shareInFlight: true,
    })(inputs);
}
