/**
 * The snapshot an upstream object publishes (#15): what the server offers, verified against its
 * baseline in that object's store, and how long an isolate may serve it before asking again.
 */

import type { Gateway } from '../../src/gateway/gateway.js';
import type { VerifiedListing } from '../../src/guards/drift/verdict.js';
import type { Era } from '../../src/protocol/versions.js';
import type { Listing } from '../../src/upstream/listing.js';

/**
 * How long an isolate serves a snapshot at most: the bound on how soon every isolate sees a
 * re-trust or a drift quarantine (docs/deploy-workers.md). A server's own `ttlMs` can shorten it,
 * never lengthen it: the object's verdict can change (a re-trust) while the listing does not.
 */
export const DEFAULT_SNAPSHOT_TTL_MS = 5_000;
/** Snapshots are asked for again at most this often, whatever the server's `ttlMs` (or the variable) says. */
export const MIN_SNAPSHOT_TTL_MS = 1_000;

/** A snapshot's ttl: the server's own hint when shorter than the deployment's bound, never under 1 s. */
export function snapshotTtlFor(own: number | undefined, bound: number): number {
  return Math.max(MIN_SNAPSHOT_TTL_MS, Math.min(own ?? bound, bound));
}

export interface Snapshot {
  server: string;
  /** The upstream's state in its object; only `ready` publishes a listing. */
  state: string;
  lastError?: string;
  /** Why it is not served when policy says so (egress-denied, unsupported-transport). */
  rule?: string;
  era?: Era;
  protocolVersion?: string;
  capabilities: Record<string, unknown>;
  /** As listed (tools, prompts, resources, templates), without its ttl. */
  listing: Listing;
  verified?: VerifiedListing;
  /** While not ready: the stored listing, verified against the baseline (warm start). */
  stored?: VerifiedListing;
  ttlMs: number;
  /** Upstream tool name -> the name the object's own catalog exposes it under. */
  names: Record<string, string>;
  /** A protected server's credentials state for the deployment identity (#19): no token in it. */
  auth?: { state: string; rule?: string; issuer?: string; scopes?: string[]; expiresAt?: number };
}

/** The object's side: its one upstream as it is now. */
export async function takeSnapshot(
  gateway: Gateway,
  server: string,
  defaultTtlMs = DEFAULT_SNAPSHOT_TTL_MS,
): Promise<Snapshot> {
  await gateway.ready;
  const u = gateway.pool.get(server);
  if (!u) {
    const listing = emptyish();
    return { server, state: 'unknown', capabilities: {}, listing, ttlMs: defaultTtlMs, names: {} };
  }
  const names: Record<string, string> = {};
  for (const e of gateway.catalog.entries) if (e.server === server && !e.meta) names[e.original] = e.name;
  const ttlMs = snapshotTtlFor(u.listing.ttlMs, defaultTtlMs);
  const { ttlMs: _own, ...listing } = u.listing;
  const snap: Snapshot = {
    server,
    state: u.state,
    capabilities: u.capabilities,
    listing,
    ttlMs,
    names,
  };
  if (u.lastError) snap.lastError = u.lastError;
  const auth = gateway.upstreamAuth.get(server);
  if (auth) snap.auth = auth.state('');
  if (u.rule) snap.rule = u.rule;
  if (u.state === 'ready') {
    if (u.era) snap.era = u.era;
    const status = u.status();
    if (status.protocolVersion) snap.protocolVersion = status.protocolVersion;
    if (u.verified) snap.verified = u.verified;
  } else {
    const stored = await storedListing(gateway, server);
    if (stored) snap.stored = stored;
  }
  return snap;
}

function emptyish(): Listing {
  return { tools: [], prompts: [], resources: [], templates: [] };
}

/** The last listing the store holds for a server that is down, verified now (as a warm start does). */
async function storedListing(gateway: Gateway, server: string): Promise<VerifiedListing | undefined> {
  const u = gateway.pool.get(server);
  if (!u || u.config.disabled) return undefined;
  const cached = await gateway.drift.cachedTools(u.config).catch(() => undefined);
  if (!cached) return undefined;
  return gateway.drift.verify(u.config, cached, { save: false });
}

/** `MANIFOLD_SNAPSHOT_TTL_MS`, when set to a whole number of milliseconds; the default otherwise. */
export function snapshotTtl(value: unknown): number {
  const n = typeof value === 'string' && /^[0-9]{1,9}$/.test(value) ? Number(value) : Number.NaN;
  return Number.isFinite(n) ? Math.max(MIN_SNAPSHOT_TTL_MS, n) : DEFAULT_SNAPSHOT_TTL_MS;
}
