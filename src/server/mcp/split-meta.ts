/**
 * A tools/call's downstream `_meta`, split into what the gateway maps (the progress token) and
 * what it relays upstream (tools-call.ts).
 */
import { madeOnce } from '../../lib/objects.js';
import { isReservedMetaKey } from '../../protocol/versions.js';

interface SplitMeta {
  readonly progressToken: unknown;
  readonly relayed: Readonly<Record<string, unknown>> | undefined;
}

const NO_META: SplitMeta = Object.freeze({ progressToken: undefined, relayed: undefined });

/** The split of an envelope the parse shares (envelope-cache.ts, deep-frozen): made once, frozen like it (#18). */
const sharedSplit = madeOnce((meta: Record<string, unknown>): SplitMeta => {
  const shared = split(meta);
  if (shared.relayed) Object.freeze(shared.relayed);
  return Object.freeze(shared);
});

/**
 * The last shared envelope and its split, compared before `Object.isFrozen`, a call into the
 * runtime of about 200 instructions (#18): an envelope is frozen before it is shared, so the same
 * object is still frozen and still splits the same.
 */
let lastShared: object | undefined;
let lastSplit: SplitMeta = NO_META;

/**
 * The downstream `_meta`: its progress token is the gateway's to map, and keys under a reserved
 * MCP prefix describe the client's own request (version, capabilities, identity), so the upstream
 * edge writes its own instead. Everything else (trace context, vendor keys) is relayed. A shared
 * envelope is split once; a request's own `_meta` every time.
 */
export function splitMeta(meta: unknown): SplitMeta {
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return NO_META;
  if (meta === lastShared) return lastSplit;
  const m = meta as Record<string, unknown>;
  if (!Object.isFrozen(m)) return split(m);
  lastShared = m;
  lastSplit = sharedSplit(m);
  return lastSplit;
}

function split(m: Record<string, unknown>): SplitMeta {
  let progressToken: unknown;
  let relayed: Record<string, unknown> | undefined;
  for (const key in m) {
    if (!Object.hasOwn(m, key)) continue;
    if (key === 'progressToken') progressToken = m[key];
    else if (!isReservedMetaKey(key)) {
      relayed ??= {};
      relayed[key] = m[key];
    }
  }
  return { progressToken, relayed };
}
