import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import type { VerifiedListing } from '../guards/drift/verdict.js';
import { reachedOverSse } from './legacy/transports.js';
import type { UpstreamSession } from './session.js';
import type { UpstreamState, UpstreamStatus } from './types.js';

/** The parts of an upstream its status is made of. */
interface StatusSource {
  readonly name: string;
  readonly config: ServerConfig;
  readonly state: UpstreamState;
  readonly tools: readonly Tool[];
  readonly consecutiveFailures: number;
  readonly reconnects: number;
  readonly lastError?: string;
  readonly rule?: string;
  readonly verified: VerifiedListing | undefined;
}

/** What /healthz and `manifold check` show of one upstream. */
export function upstreamStatus(u: StatusSource, session: UpstreamSession | undefined): UpstreamStatus {
  return {
    name: u.name,
    transport: reachedOverSse(u.config) ? 'sse' : u.config.type,
    state: u.state,
    tools: u.state === 'ready' ? u.tools.length : 0,
    consecutiveFailures: u.consecutiveFailures,
    reconnects: u.reconnects,
    ...(u.lastError ? { lastError: u.lastError } : {}),
    ...(u.rule ? { rule: u.rule } : {}),
    ...(session ? { era: session.era, protocolVersion: session.protocolVersion } : {}),
    ...driftStatus(u.verified),
  };
}

/** What drift holds back from an upstream, for /healthz and `manifold check` (names only). */
export function driftStatus(v: VerifiedListing | undefined): Pick<UpstreamStatus, 'drift'> {
  if (!v || (v.quarantined.length === 0 && v.withheld.length === 0 && !v.identityChanged)) return {};
  return {
    drift: {
      quarantined: v.quarantined.map((t) => t.name),
      withheld: v.withheld,
      ...(v.identityChanged ? { identityChanged: true } : {}),
    },
  };
}
