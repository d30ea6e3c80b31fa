/**
 * A tools/call's downstream `_meta`, split into what the gateway maps (the progress token) and
 * what it relays upstream (tools-call.ts).
 */
import { isReservedMetaKey } from '../protocol/versions.js';

interface SplitMeta {
  readonly progressToken: unknown;
  readonly relayed: Readonly<Record<string, unknown>> | undefined;
}

const NO_META: SplitMeta = Object.freeze({ progressToken: undefined, relayed: undefined });
/** Splits of the envelopes the parse shares (envelope-cache.ts, deep-frozen). */
const splits = new WeakMap<object, SplitMeta>();
/** The last shared envelope split, and its split: one client calling, the weak map is not read (#18). */
let lastShared: object = NO_META;
let lastSplit: SplitMeta = NO_META;

/**
 * The downstream `_meta`: its progress token is the gateway's to map, and keys under a reserved
 * MCP prefix describe the client's own request (version, capabilities, identity), so the upstream
 * edge writes its own instead. Everything else (trace context, vendor keys) is relayed. A shared
 * envelope is split once (#18), and its split is frozen like it.
 */
export function splitMeta(meta: unknown): SplitMeta {
  if (meta === lastShared) return lastSplit;
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return NO_META;
  let shared = splits.get(meta);
  if (shared === undefined) {
    if (!Object.isFrozen(meta)) return split(meta as Record<string, unknown>);
    shared = split(meta as Record<string, unknown>);
    if (shared.relayed) Object.freeze(shared.relayed);
    splits.set(meta, Object.freeze(shared));
  }
  lastShared = meta;
  lastSplit = shared;
  return shared;
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
