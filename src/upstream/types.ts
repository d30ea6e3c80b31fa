import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { GatewayConfig, ServerConfig } from '../config/types.js';
import type { VerifiedListing } from '../guards/drift/verdict.js';
import type { Logger } from '../lib/log.js';
import type { Platform } from '../platform.js';
import type { Era } from '../protocol/versions.js';
import type { BackoffOptions } from './backoff.js';
import type { UpstreamAuth } from './oauth/auth-fetch.js';
import type { RunningServers } from './running.js';
import type { SessionCallOptions, SessionOpener } from './session.js';

/** Consecutive failures after which a server is reported `failed` (it is still probed at the cap). */
export const FAILED_AFTER = 5;
/** A connection that stayed up this long ends a failure streak when it drops. */
export const STABLE_MS = 30_000;
/** A server's `ttlMs` never makes the gateway list more often than this. */
export const MIN_TTL_RELIST_MS = 5_000;

export type UpstreamState =
  | 'connecting'
  | 'ready'
  | 'backoff'
  | 'failed'
  | 'disabled'
  | 'unsupported'
  /** Stopped while unused (#53): its verified catalog stays listed; the next request that needs it starts it. */
  | 'idle'
  | 'closed';

export interface UpstreamStatus {
  name: string;
  transport: ServerConfig['type'];
  state: UpstreamState;
  tools: number;
  lastError?: string;
  rule?: string;
  consecutiveFailures: number;
  /** Connection attempts after the first (retries, renewals): a reconnect loop shows here. */
  reconnects: number;
  /** The era it speaks and the revision in use, once connected. */
  era?: Era;
  protocolVersion?: string;
  /**
   * Held back by drift (SECURITY C1–C3), by the upstream's own names (`prompt:`/`template:` for
   * prompts and templates): changed since trusted, new and never trusted, or the whole server
   * when its configured identity changed. Absent when nothing is.
   */
  drift?: { quarantined: string[]; withheld: string[]; identityChanged?: true };
  /** A protected server's credentials for the deployment's identity (#19); no token, no secret. */
  auth?: ReturnType<UpstreamAuth['state']>;
}

export interface UpstreamDeps {
  platform: Platform;
  gateway: GatewayConfig;
  log: Logger;
  backoff?: BackoffOptions;
  clientVersion: string;
  /** Opens sessions instead of the probe, and means freshness is pulled (session.ts). */
  openSession?: SessionOpener;
  /** Each protected server's credentials (#19), by server name; an instance's fetch is wrapped with them. */
  auths?: ReadonlyMap<string, UpstreamAuth>;
  /** Which servers run now, idle stop and `maxRunningServers` (#53); absent: every server runs until closed. */
  running?: RunningServers;
}

/** What a caller may attach to a relayed request; the deadlines are the server's own. */
export type CallOptions = Omit<SessionCallOptions, 'timeoutMs' | 'maxTotalMs'>;

/** The verifier of an upstream without a drift gate: everything it lists is trusted. */
export const trustEverything = async (tools: Tool[]): Promise<VerifiedListing> => ({
  trusted: tools,
  quarantined: [],
  removed: [],
  withheld: [],
  identityChanged: false,
});
