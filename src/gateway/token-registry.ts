/**
 * Which tokens the gateway has seen, and which an operator revoked before their expiry (#52,
 * SECURITY I4). The revocation list lives in the store; each instance keeps a copy that every
 * request is checked against, refreshed from the store when its `tokens_epoch` moved, looked at
 * whenever the copy is older than the poll interval: a revocation on one instance is refused by
 * every other within seconds, on Node and on Workers alike, without a store read per request.
 */
import type { Principal } from '../auth/principal.js';
import type { Logger } from '../lib/log.js';
import type { Platform } from '../platform.js';
import type { TokenStore } from '../store/tokens.js';

/** How stale the copy of the revocation list may get before it is refreshed. */
export const REVOCATION_POLL_MS = 2000;
/** Token ids recorded by this instance, remembered so that a token is written once, not per request. */
const MAX_NOTED = 10_000;

export class TokenRegistry {
  private revoked = new Set<string>();
  private epoch = -1;
  private polledAt = Number.NEGATIVE_INFINITY;
  private polling: Promise<void> | undefined;
  private readonly noted = new Set<string>();
  /**
   * Set by a host whose places refresh the copy themselves with `pull`, in each request's own
   * context (Workers: I/O belongs to the request that starts it, so no request may wait on a read
   * another began): a check then never starts a refresh of its own.
   */
  pulled = false;

  constructor(
    readonly store: TokenStore,
    private readonly platform: Platform,
    private readonly log: Logger,
  ) {}

  /** Whether the token was revoked (as far as the copy knows); starts a refresh of a stale copy. */
  isRevoked(id: string): boolean {
    if (!this.pulled && this.platform.now() - this.polledAt > REVOCATION_POLL_MS) void this.poll();
    return this.revoked.has(id);
  }

  /** The host's refresh of a stale copy (`pulled`): a read of its own, shared with no other request. */
  async pull(): Promise<void> {
    if (this.platform.now() - this.polledAt > REVOCATION_POLL_MS) await this.refresh();
  }

  /** Reads the epoch, and the list when it moved. One refresh at a time. */
  poll(): Promise<void> {
    this.polling ??= this.refresh().finally(() => {
      this.polling = undefined;
    });
    return this.polling;
  }

  private async refresh(): Promise<void> {
    const now = this.platform.now();
    try {
      const epoch = await this.store.epoch();
      this.polledAt = now;
      if (epoch === this.epoch) return;
      this.revoked = new Set(await this.store.revoked(now));
      this.epoch = epoch;
    } catch {
      // The store is away: the copy stays as it was, and the next request tries again.
    }
  }

  /** Records a principal's token on its first request here (never the token: its id). */
  note(principal: Principal): void {
    const id = principal.tokenId;
    if (id === undefined || principal.tokenExpiresAt === undefined || this.noted.has(id)) return;
    if (this.noted.size >= MAX_NOTED) this.noted.clear();
    this.noted.add(id);
    const now = this.platform.now();
    const row = {
      id,
      subject: principal.subject,
      tenant: principal.tenant,
      expiresAt: principal.tokenExpiresAt,
      firstSeen: now,
    };
    this.store.seen(row, now).catch(() => {
      this.noted.delete(id);
      this.log.warn('tokens.record_failed', { tenant: principal.tenant });
    });
  }

  /** Revokes one token everywhere; false when it is unknown, expired or revoked already. */
  async revoke(id: string, by: string): Promise<boolean> {
    const done = await this.store.revoke(id, by, this.platform.now());
    if (done) this.revoked.add(id);
    return done;
  }
}
