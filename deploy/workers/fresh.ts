import type { Gateway } from '../../src/gateway/gateway.js';
import type { SnapshotOpener } from './opener.js';

/**
 * Freshness is pulled, per request, before it is served (#15): each snapshot older than its
 * `ttlMs` is read again in this request's own context, so no request ever waits on I/O another
 * request started, and nothing runs on a timer. A request that finds a refresh already started
 * (by a concurrent request) serves the snapshot it has, which is at most one ttl older.
 */
export async function refreshStale(gateway: Gateway, opener: SnapshotOpener, now: number): Promise<void> {
  const due = gateway.pool.upstreams.filter((u) => {
    if (u.config.disabled || u.state === 'unsupported' || u.state === 'closed') return false;
    const f = opener.fresh.get(u.name);
    if (f && now - f.at < f.ttlMs) return false;
    // Claimed for this request: the opener records the real time and ttl once it has read.
    opener.fresh.set(u.name, { at: now, ttlMs: Number.POSITIVE_INFINITY, names: f?.names ?? {} });
    return true;
  });
  if (due.length === 0) return;
  await Promise.allSettled(due.map((u) => u.reopen()));
}
