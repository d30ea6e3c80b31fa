/**
 * The gateway's lifecycle around its upstreams: a cold start bounded by a deadline, a warm start
 * from the verified listings in the store, and the health verdict that `/healthz` reports.
 */
import type { Diagnostic } from '../aggregate/catalog.js';
import type { VerifiedListing } from '../guards/drift/verdict.js';
import type { Logger } from '../lib/log.js';
import { unrefTimer } from '../platform.js';
import type { UpstreamAuth } from '../upstream/oauth/auth-fetch.js';
import type { UpstreamPool } from '../upstream/pool.js';
import type { UpstreamStatus } from '../upstream/types.js';
import type { DriftGate } from './drift-gate.js';

/**
 * A cold start waits for the upstreams' first connection attempts at most `ms`: one hung upstream
 * must not hold every client's first tools/list for its whole connect timeout. Resolves when
 * `live` settles or the deadline passes, whichever is first; `onDeadline` runs only in the second
 * case (the gateway builds its catalog from the upstreams that are ready, and each later one
 * changes it, announced with list_changed, as it comes).
 */
export function coldDeadline(ms: number, live: Promise<void>, onDeadline: () => void): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const passed = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      onDeadline();
      resolve();
    }, ms);
  });
  // The timer must not hold a stopping process, nor outlive the attempts it waits for.
  unrefTimer(timer);
  const clear = () => {
    if (timer !== undefined) clearTimeout(timer);
  };
  live.then(clear, clear);
  return Promise.race([live, passed]);
}

/**
 * Warm start: the verified listings from the store, served until each upstream answers, so the
 * first tools/list needs no upstream round trip. Split from gateway.ts, which holds the map.
 */

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

/** What `/healthz` reports: the gateway's state from its upstreams', and the catalog's diagnostics. */

export interface Health {
  status: 'ok' | 'degraded' | 'down' | 'starting' | 'stopping';
  version: string;
  upstreams: UpstreamStatus[];
  diagnostics: readonly Diagnostic[];
}

/**
 * ok when every enabled upstream is ready (or idle), down when none is, starting while none is ready and
 * some are still connecting, degraded otherwise; stopping once shutdown began.
 */
export function gatewayHealth(
  upstreams: UpstreamStatus[],
  stopping: boolean,
  version: string,
  diagnostics: readonly Diagnostic[],
): Health {
  const enabled = upstreams.filter((u) => u.state !== 'disabled');
  // An idle server (#53) serves its stored catalog and starts on demand: as good as ready.
  const ready = enabled.filter((u) => u.state === 'ready' || u.state === 'idle').length;
  let status: Health['status'];
  if (stopping) status = 'stopping';
  else if (enabled.some((u) => u.state === 'connecting') && ready === 0) status = 'starting';
  else if (ready === enabled.length) status = 'ok';
  else status = ready === 0 ? 'down' : 'degraded';
  return { status, version, upstreams, diagnostics };
}

/** An upstream's status, with its isolation and live instances when it is not shared. */
export function withIsolation(
  u: UpstreamStatus,
  isolation: string | undefined,
  instances: { count(name: string): number },
  auth?: UpstreamAuth,
): UpstreamStatus & { isolation?: string; instances?: number } {
  const v = withAuth(u, auth);
  return isolation && isolation !== 'shared' ? { ...v, isolation, instances: instances.count(u.name) } : v;
}

/**
 * An upstream's status with its credentials' state for the deployment's identity (#19): never a
 * token, a secret or a state, only the state, the rule, the issuer, the scopes and the expiry.
 */
export function withAuth<U extends UpstreamStatus>(u: U, auth: UpstreamAuth | undefined): U {
  if (!auth) return u;
  const st = auth.state('');
  if (st.state === 'static') return u;
  return { ...u, auth: st };
}
