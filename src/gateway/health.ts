/** What `/healthz` reports: the gateway's state from its upstreams', and the catalog's diagnostics. */
import type { Diagnostic } from '../aggregate/catalog.js';
import type { UpstreamAuth } from '../upstream/oauth/auth-fetch.js';
import type { UpstreamStatus } from '../upstream/types.js';

export interface Health {
  status: 'ok' | 'degraded' | 'down' | 'starting' | 'stopping';
  version: string;
  upstreams: UpstreamStatus[];
  diagnostics: readonly Diagnostic[];
}

/**
 * ok when every enabled upstream is ready, down when none is, starting while none is ready and
 * some are still connecting, degraded otherwise; stopping once shutdown began.
 */
export function gatewayHealth(
  upstreams: UpstreamStatus[],
  stopping: boolean,
  version: string,
  diagnostics: readonly Diagnostic[],
): Health {
  const enabled = upstreams.filter((u) => u.state !== 'disabled');
  const ready = enabled.filter((u) => u.state === 'ready').length;
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
