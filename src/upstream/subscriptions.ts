import type { Logger } from '../lib/log.js';
import { brief } from './call-errors.js';
import type { UpstreamSession } from './session.js';

/**
 * The resource URIs someone downstream watches on one upstream (`resources/subscribe`, or the
 * modern listen filter). They outlive a connection: every new session is asked for all of them.
 */
export class Subscriptions {
  readonly watched = new Set<string>();

  /** `live` is the session to ask now, or undefined while the upstream is not ready. */
  constructor(
    private readonly live: () => UpstreamSession | undefined,
    private readonly log: Logger,
  ) {}

  async add(uri: string): Promise<void> {
    this.watched.add(uri);
    await this.live()?.subscribe(uri);
  }

  async remove(uri: string): Promise<void> {
    if (!this.watched.delete(uri)) return;
    await this.live()
      ?.unsubscribe(uri)
      .catch(() => {});
  }

  /** A new session: asks it for every watched URI (a failure is logged, never thrown). */
  renew(session: UpstreamSession): void {
    for (const uri of this.watched) {
      session
        .subscribe(uri)
        .catch((e: unknown) => this.log.warn('upstream.subscribe_failed', { error: brief(e) }));
    }
  }
}
