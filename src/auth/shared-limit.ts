/**
 * The seam between tools/call and whatever counts a tenant's calls (#15). In memory by default
 * (rate-limit.ts, per instance); on Node with a Postgres store, a limiter that leases blocks of the
 * tenant's budget from the database (deploy/node/store/postgres/rate-limit.ts) so every instance spends
 * from one count.
 */
import type { Config } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import { rateLimiter, type TakeResult } from './rate-limit.js';

/** Takes one call from a tenant's budget. */
export type TakeCall = (tenant: string) => Promise<TakeResult>;

/** What a limiter is built from: the running limit per tenant (read per call) and the clock. */
export interface LimiterInputs {
  /** The tenant's calls per minute now; undefined means unlimited. Follows a reloaded config. */
  perTenant: (tenant: string) => number | undefined;
  now: () => number;
}

/** Builds the limiter a gateway uses (GatewayOptions.callLimiter); the in-memory bucket when absent. */
export type CallLimiterFactory = (inputs: LimiterInputs) => TakeCall;

/**
 * The limiter for a gateway: the tenant's `callsPerMinute`, else the gateway's, read from the
 * running config on every call, so a reload's limits apply to the next call.
 */
export function callLimiter(
  config: () => Config,
  now: () => number,
  factory: CallLimiterFactory = inMemory,
): TakeCall {
  const perTenant = (tenant: string) => {
    const g = config().gateway;
    return (g.auth ? g.auth.tenants[tenant]?.callsPerMinute : undefined) ?? g.callsPerMinute;
  };
  return factory({ perTenant, now });
}

function inMemory(inputs: LimiterInputs): TakeCall {
  const take = rateLimiter(inputs);
  return async (tenant) => take(tenant);
}

/** The refusal a client sees: ERR_RATE_LIMITED with when to retry (Retry-After, RFC 9110 §10.2.3). */
export function rateLimited(retryAfterSeconds: number): ManifoldError {
  return new ManifoldError(
    'ERR_RATE_LIMITED',
    `rate limit for tenant exceeded: retry after ${retryAfterSeconds} s`,
    {
      data: { retryAfterSeconds },
    },
  );
}
