/**
 * Warm start: the verified listings from the store, served until each upstream answers, so the
 * first tools/list needs no upstream round trip. Split from gateway.ts, which holds the map.
 */

import type { Logger } from '../lib/log.js';
import type { UpstreamPool } from '../upstream/pool.js';
import type { DriftGate, VerifiedListing } from './drift-gate.js';

/** Verifies each stored listing whose identity still matches into `warm`; returns how many there are. */
export async function loadWarm(
  pool: UpstreamPool,
  drift: DriftGate,
  warm: Map<string, VerifiedListing>,
  log: Logger,
): Promise<number> {
  await Promise.all(
    pool.upstreams.map(async (u) => {
      if (u.config.disabled) return;
      try {
        const cached = await drift.cachedTools(u.config);
        if (!cached) return;
        warm.set(u.name, await drift.verify(u.config, cached, { save: false }));
      } catch (e) {
        log.warn('store.warm_failed', { server: u.name, error: String(e).slice(0, 200) });
      }
    }),
  );
  return warm.size;
}

/** Verifies the warm listings again (after a re-trust changed the baselines). */
export async function reverifyWarm(
  pool: UpstreamPool,
  drift: DriftGate,
  warm: Map<string, VerifiedListing>,
): Promise<void> {
  for (const [name] of warm) {
    const u = pool.get(name);
    const cached = u && (await drift.cachedTools(u.config));
    if (u && cached) warm.set(name, await drift.verify(u.config, cached, { save: false }));
  }
}
