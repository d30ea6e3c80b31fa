/**
 * How a Worker isolate (and a tenant object) opens an upstream (#15): not by connecting to it,
 * but by reading the snapshot its upstream object publishes. The session lists nothing itself:
 * its listing and verdict are the snapshot's. Calls to a modern HTTP upstream go straight to it
 * with `fetch`, from the request that makes them; a legacy upstream's calls are its object's
 * business (the Worker forwards them there), or, in a tenant object, a legacy session of its own.
 */
import { ManifoldError } from '../../src/errors.js';
import type { Era } from '../../src/protocol/versions.js';
import { ModernSession } from '../../src/upstream/modern/session.js';
import {
  NotServing,
  type SessionDeps,
  type SessionEvents,
  type SessionOpener,
  type UpstreamSession,
} from '../../src/upstream/session.js';
import { sessions } from '../../src/upstream/upstream.js';
import { INTERNAL, INTERNAL_ORIGIN, SERVER_HEADER } from './boot.js';
import { PublishedSession } from './published-session.js';
import type { Snapshot } from './snapshot.js';

/** When each server's snapshot was read, for how long it holds, and its object's names. */
export interface Freshness {
  at: number;
  ttlMs: number;
  names: Record<string, string>;
  era?: Era;
}

export interface SnapshotOpener {
  open: SessionOpener;
  /** Per server: when its snapshot was read (or last tried) and how long it holds. */
  readonly fresh: Map<string, Freshness>;
}

/**
 * `legacyCalls`: whether this place may hold a legacy session of its own for calls (a Durable
 * Object may; an isolate may not, since a stream cannot outlive the request that opened it).
 */
export function snapshotOpener(
  upstreams: DurableObjectNamespace,
  now: () => number,
  legacyCalls: boolean,
  /** Sees every snapshot read (a protected server's credentials state, #19). */
  onSnapshot?: (snap: Snapshot) => void,
): SnapshotOpener {
  const fresh = new Map<string, Freshness>();
  /** One legacy session per server for every snapshot of it (a new snapshot is not a new session). */
  const legacy = new Map<string, () => Promise<UpstreamSession>>();
  const open: SessionOpener = async (deps: SessionDeps, events: SessionEvents) => {
    const name = deps.config.name;
    const at = now();
    let snap: Snapshot;
    try {
      const stub = upstreams.get(upstreams.idFromName(name));
      const res = await stub.fetch(`${INTERNAL_ORIGIN}${INTERNAL}snapshot`, {
        headers: { [SERVER_HEADER]: name },
      });
      if (!res.ok) throw new Error(`the upstream object answered ${res.status}`);
      snap = (await res.json()) as Snapshot;
    } catch (e) {
      // An object that cannot be reached is asked again on the next request.
      fresh.set(name, { at, ttlMs: 0, names: {} });
      throw new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', 'the upstream object did not answer', { cause: e });
    }
    fresh.set(name, { at, ttlMs: snap.ttlMs, names: snap.names, ...(snap.era ? { era: snap.era } : {}) });
    onSnapshot?.(snap);
    if (snap.state !== 'ready' || !snap.verified || !snap.era) {
      if (snap.rule) {
        throw new ManifoldError(
          'ERR_UPSTREAM_UNAVAILABLE',
          snap.lastError ?? `server ${name} is not served`,
          {
            data: { rule: snap.rule },
          },
        );
      }
      throw new NotServing(snap.lastError ?? `server ${name} is ${snap.state}`, snap.stored);
    }
    const info = { version: snap.protocolVersion ?? '', capabilities: snap.capabilities };
    const published = { listing: snap.listing, verified: snap.verified };
    let calls: () => Promise<UpstreamSession>;
    if (snap.era === 'modern' && deps.config.type !== 'stdio') {
      const direct = ModernSession.published(deps, info, events);
      calls = async () => direct;
    } else if (legacyCalls) {
      let opener = legacy.get(name);
      if (!opener) {
        opener = legacyOpener(deps);
        legacy.set(name, opener);
      }
      calls = opener;
    } else {
      calls = async () => {
        throw new ManifoldError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `server ${name} is served by its upstream object`,
        );
      };
    }
    return new PublishedSession(snap.era, info, published, calls);
  };
  return { open, fresh };
}

/** A legacy session of this object's own, opened at the first call and again after it closed. */
function legacyOpener(deps: SessionDeps): () => Promise<UpstreamSession> {
  let current: Promise<UpstreamSession> | undefined;
  const events: SessionEvents = {
    // Its object lists and verifies; this session only carries calls.
    onListChanged: () => {},
    onResourceUpdated: () => {},
    onClosed: () => {
      current = undefined;
    },
    onSuspect: () => {},
  };
  return () => {
    current ??= sessions()
      .then((layer) => layer.openSession(deps, events, 'legacy'))
      .catch((e) => {
        current = undefined;
        throw e;
      });
    return current;
  };
}
