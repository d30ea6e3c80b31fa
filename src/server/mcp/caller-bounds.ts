import type { Principal } from '../../auth/principal.js';

/** How many entries one instance keeps: in all, for one principal, for one tenant. */
export interface CallerLimits {
  total: number;
  perPrincipal: number;
  perTenant: number;
}

/** Whose an entry is: a principal (tenant and subject) and its tenant. */
export type Holder = Pick<Principal, 'key' | 'tenant'>;

/**
 * The bounds of what one instance keeps for its callers (held calls, tasks awaiting input,
 * listen streams): per principal and per tenant before the total (SECURITY G4). Before a caller
 * may keep one more, `admit` picks what goes, oldest first:
 *
 * - its principal is at its bound: that principal's own oldest;
 * - its tenant is at its bound: that tenant's own oldest;
 * - the instance is full: the oldest of the tenant that keeps the most (the newcomer's own on a
 *   tie), from that tenant's principal that keeps the most.
 *
 * So a flood ends only the flooder's own entries, and a full instance takes room from whoever
 * holds the most, never from a caller with a few. Insertion order is age: Maps and Sets keep it.
 *
 * @example
 * const bounds = new CallerBounds<string>({ total: 10_000, perPrincipal: 100, perTenant: 1000 });
 * bounds.admit(principal, (token) => abandon(token));
 * bounds.add(token, principal);
 * // ... and when the entry ends on its own:
 * bounds.remove(token);
 */
export class CallerBounds<T> {
  private readonly holders = new Map<T, Holder>();
  private readonly byPrincipal = new Map<string, Set<T>>();
  private readonly byTenant = new Map<string, Set<T>>();

  constructor(readonly limits: CallerLimits) {}

  /**
   * Makes room for one more entry of `holder`: each entry that must go is forgotten here first,
   * then handed to `end` (which may call `remove` again: it is a no-op by then).
   */
  admit(holder: Holder, end: (entry: T) => void): void {
    for (let victim = this.victim(holder); victim !== undefined; victim = this.victim(holder)) {
      this.remove(victim);
      end(victim);
    }
  }

  /** Counts `entry` as `holder`'s, newest of all. */
  add(entry: T, holder: Holder): void {
    if (this.holders.has(entry)) return;
    const own = { key: holder.key, tenant: holder.tenant };
    this.holders.set(entry, own);
    index(this.byPrincipal, own.key, entry);
    index(this.byTenant, own.tenant, entry);
  }

  /** Stops counting `entry` (it ended); nothing happens for an entry not counted. */
  remove(entry: T): void {
    const holder = this.holders.get(entry);
    if (!holder) return;
    this.holders.delete(entry);
    unindex(this.byPrincipal, holder.key, entry);
    unindex(this.byTenant, holder.tenant, entry);
  }

  get size(): number {
    return this.holders.size;
  }

  private victim(holder: Holder): T | undefined {
    const { total, perPrincipal, perTenant } = this.limits;
    const own = this.byPrincipal.get(holder.key);
    if (own && own.size >= perPrincipal) return oldest(own);
    const tenant = this.byTenant.get(holder.tenant);
    if (tenant && tenant.size >= perTenant) return oldest(tenant);
    if (this.holders.size < total) return undefined;
    // Full: the room comes from whoever keeps the most. Only a flood of several tenants fills
    // the instance (one tenant stops at perTenant), so this runs rarely and may scan.
    const tenantKey = largest(this.byTenant.keys(), (t) => this.byTenant.get(t)?.size ?? 0, holder.tenant);
    const inTenant = tenantKey === undefined ? undefined : this.byTenant.get(tenantKey);
    if (!inTenant) return this.holders.keys().next().value;
    const principals = new Set<string>();
    for (const entry of inTenant) principals.add(this.holders.get(entry)!.key);
    const principalKey = largest(principals, (p) => this.byPrincipal.get(p)?.size ?? 0, holder.key);
    const mine = principalKey === undefined ? undefined : this.byPrincipal.get(principalKey);
    return mine ? oldest(mine) : oldest(inTenant);
  }
}

/** The key with the largest count; `preferred` wins a tie (the newcomer gives up its own first). */
function largest(
  keys: Iterable<string>,
  count: (key: string) => number,
  preferred: string,
): string | undefined {
  let best: string | undefined;
  let most = 0;
  for (const key of keys) {
    const n = count(key);
    if (n > most || (n === most && key === preferred)) {
      best = key;
      most = n;
    }
  }
  return best;
}

function oldest<T>(entries: Set<T>): T | undefined {
  return entries.values().next().value;
}

function index<T>(map: Map<string, Set<T>>, key: string, entry: T): void {
  let entries = map.get(key);
  if (!entries) {
    entries = new Set();
    map.set(key, entries);
  }
  entries.add(entry);
}

function unindex<T>(map: Map<string, Set<T>>, key: string, entry: T): void {
  const entries = map.get(key);
  if (!entries) return;
  entries.delete(entry);
  if (entries.size === 0) map.delete(key);
}
