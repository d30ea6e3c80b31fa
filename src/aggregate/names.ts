/**
 * Exposed tool names. Clients (and some LLM APIs) reject tool names outside `[a-zA-Z0-9_-]{1,64}`,
 * so every name the gateway shows must match, whatever an upstream calls its tools. Names must
 * also be stable across restarts, so everything here is deterministic: no randomness, no clocks.
 */

/** Every name the gateway exposes matches this. */
export const EXPOSED_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

const MAX_NAME = 64;
const HASH_LEN = 8;
/** Room left for the readable part once `_` and the hash are appended. */
const MAX_BASE = MAX_NAME - HASH_LEN - 1;
/** Global and per code point, so an astral character becomes one `_`, not two. */
const ILLEGAL = /[^a-zA-Z0-9_-]/gu;

/** One upstream tool asking for an exposed name. */
export interface NameRequest {
  server: string;
  prefix: string | false;
  tool: string;
}

/** Two requests wanted the same name; the earlier one kept it, the later one got `null`. */
export interface NameCollision {
  name: string;
  kept: { server: string; tool: string };
  dropped: { server: string; tool: string };
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK_64 = (1n << 64n) - 1n;
const HASH_SPACE = 36n ** BigInt(HASH_LEN);

/**
 * FNV-1a 64 over UTF-16 code units (two bytes each), rendered as 8 base36 chars. Code units rather
 * than UTF-8 so that lone surrogates, which UTF-8 encoding would fold into U+FFFD, stay distinct.
 */
function hash8(input: string): string {
  let h = FNV_OFFSET;
  for (let i = 0; i < input.length; i++) {
    const unit = input.charCodeAt(i);
    h = ((h ^ BigInt(unit & 0xff)) * FNV_PRIME) & MASK_64;
    h = ((h ^ BigInt(unit >>> 8)) * FNV_PRIME) & MASK_64;
  }
  return (h % HASH_SPACE).toString(36).padStart(HASH_LEN, '0');
}

/**
 * The identity of the original candidate, fed to the hash. The prefix's length is spelled out so
 * `a_` + `_b` and `a` + `__b` (both `a____b` when joined) hash differently, and unprefixed input
 * is tagged so `prefix:false, tool:'x__y'` differs from `prefix:'x', tool:'y'`.
 */
function originalKey(prefix: string | false, tool: string): string {
  return prefix === false ? `u:${tool}` : `p${prefix.length}:${prefix}__${tool}`;
}

function rewrite(prefix: string | false, tool: string, salt: number): string {
  const joined = prefix === false ? tool : `${prefix}__${tool}`;
  // Sanitize before clamping: the result is ASCII, so slicing cannot split a surrogate pair.
  const base = joined.replace(ILLEGAL, '_').slice(0, MAX_BASE);
  const key = originalKey(prefix, tool);
  const hash = hash8(salt === 0 ? key : `${key}\u0000${salt}`);
  return base === '' ? hash : `${base}_${hash}`;
}

/**
 * The name a tool would get before uniqueness is considered. `verbatim` is true when the plain
 * `prefix__tool` (or bare `tool` when `prefix` is false) is already legal and used unchanged;
 * otherwise the name is sanitized, clamped and suffixed with a hash of the original.
 *
 * @example candidateName('everything', 'echo') // { name: 'everything__echo', verbatim: true }
 */
export function candidateName(prefix: string | false, tool: string): { name: string; verbatim: boolean } {
  const joined = prefix === false ? tool : `${prefix}__${tool}`;
  if (EXPOSED_NAME.test(joined)) return { name: joined, verbatim: true };
  return { name: rewrite(prefix, tool, 0), verbatim: false };
}

/**
 * Assigns exposed names to a list of tools, unique by construction. Verbatim names are placed
 * first so a legal upstream name is never displaced by another tool's rewritten name. Two requests
 * with the same original candidate (same prefix and tool; e.g. two unprefixed servers exposing
 * `search`) really do want the same name: the later one gets `null` and a collision record. A
 * rewritten name that clashes with a different original is re-hashed with a counter salt.
 *
 * Deterministic: the same requests in the same order give the same names. `names` is aligned
 * with `requests`.
 */
export function assignNames(requests: readonly NameRequest[]): {
  names: (string | null)[];
  collisions: NameCollision[];
} {
  const names: (string | null)[] = requests.map(() => null);
  const collisions: NameCollision[] = [];
  /** Name -> index of the request holding it. */
  const taken = new Map<string, number>();
  /** Original candidate -> index of the request that got it, for rewritten requests. */
  const rewrittenOwners = new Map<string, number>();

  const collide = (name: string, keptAt: number, dropped: NameRequest): void => {
    const kept = requests[keptAt]!;
    collisions.push({
      name,
      kept: { server: kept.server, tool: kept.tool },
      dropped: { server: dropped.server, tool: dropped.tool },
    });
  };

  const rewrittenAt: number[] = [];
  requests.forEach((req, i) => {
    const { name, verbatim } = candidateName(req.prefix, req.tool);
    if (!verbatim) {
      rewrittenAt.push(i);
      return;
    }
    const holder = taken.get(name);
    if (holder === undefined) {
      taken.set(name, i);
      names[i] = name;
    } else {
      collide(name, holder, req);
    }
  });

  for (const i of rewrittenAt) {
    const req = requests[i]!;
    const key = originalKey(req.prefix, req.tool);
    const owner = rewrittenOwners.get(key);
    if (owner !== undefined) {
      collide(names[owner]!, owner, req);
      continue;
    }
    let salt = 0;
    let name = rewrite(req.prefix, req.tool, salt);
    // Terminates: each salt gives a fresh hash in a 36^8 space, and only finitely many are taken.
    while (taken.has(name)) name = rewrite(req.prefix, req.tool, ++salt);
    taken.set(name, i);
    rewrittenOwners.set(key, i);
    names[i] = name;
  }

  return { names, collisions };
}

/**
 * The namespace an unprefixed server's name would squat (#13.11): the part before its first `__`
 * when that is another configured server's prefix or the gateway's own (`manifold`). A tenant
 * granted `github__*` must only ever reach server github. Prefixed servers cannot squat: their
 * names start with their own prefix.
 */
export function squattedNamespace(
  prefix: string | false,
  name: string,
  reserved: ReadonlySet<string>,
): string | undefined {
  if (prefix !== false) return undefined;
  const cut = name.indexOf('__');
  if (cut <= 0) return undefined;
  const head = name.slice(0, cut);
  return head === 'manifold' || reserved.has(head) ? head : undefined;
}
