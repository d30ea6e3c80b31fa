import type { Config } from '../config/types.js';
import type { Logger } from '../log.js';
import type { Platform } from '../platform.js';
import type { BackoffOptions } from './backoff.js';
import { Upstream } from './upstream.js';
import type { UpstreamStatus } from './upstream-types.js';

export interface PoolDeps {
  platform: Platform;
  log: Logger;
  clientVersion: string;
  backoff?: BackoffOptions;
}

/**
 * Every configured upstream, connected in parallel. A slow or broken one delays nobody: `start`
 * resolves when each first attempt has settled, and each attempt has its own deadlines.
 */
export class UpstreamPool {
  readonly upstreams: readonly Upstream[];
  private readonly byName: Map<string, Upstream>;
  onChange: (upstream: Upstream) => void = () => {};
  private readonly fanout: number | undefined;

  constructor(config: Config, deps: PoolDeps) {
    this.upstreams = config.servers.map(
      (server) =>
        new Upstream(server, {
          platform: deps.platform,
          gateway: config.gateway,
          log: deps.log,
          clientVersion: deps.clientVersion,
          ...(deps.backoff ? { backoff: deps.backoff } : {}),
        }),
    );
    this.byName = new Map(this.upstreams.map((u) => [u.name, u]));
    this.fanout = deps.platform.maxConcurrentConnects;
    for (const u of this.upstreams) u.onChange = () => this.onChange(u);
  }

  async start(): Promise<void> {
    const wave = this.fanout ?? this.upstreams.length;
    // In waves where the runtime caps concurrent subrequests; all at once elsewhere.
    for (let i = 0; i < this.upstreams.length; i += Math.max(1, wave)) {
      await Promise.allSettled(this.upstreams.slice(i, i + Math.max(1, wave)).map((u) => u.start()));
    }
  }

  get(name: string): Upstream | undefined {
    return this.byName.get(name);
  }

  /** Every configured upstream, in config order. */
  all(): readonly Upstream[] {
    return this.upstreams;
  }

  status(): UpstreamStatus[] {
    return this.upstreams.map((u) => u.status());
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.upstreams.map((u) => u.close()));
  }
}
