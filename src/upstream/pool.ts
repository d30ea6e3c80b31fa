import type { Config, GatewayConfig, ServerConfig } from '../config/types.js';
import type { Logger } from '../lib/log.js';
import type { Platform } from '../platform.js';
import type { BackoffOptions } from './backoff.js';
import type { UpstreamAuth } from './oauth/auth-fetch.js';
import type { RunningServers } from './running.js';
import type { SessionOpener } from './session.js';
import type { UpstreamDeps, UpstreamStatus } from './types.js';
import { Upstream } from './upstream.js';

export interface PoolDeps {
  platform: Platform;
  log: Logger;
  clientVersion: string;
  backoff?: BackoffOptions;
  openSession?: SessionOpener;
  /** Protected servers' credentials (#19). */
  auths?: ReadonlyMap<string, UpstreamAuth>;
  /** Which servers run now (#53). */
  running?: RunningServers;
}

/**
 * Every configured upstream, connected in parallel. A slow or broken one delays nobody: `start`
 * resolves when each first attempt has settled, and each attempt has its own deadlines.
 */
export class UpstreamPool {
  private list: readonly Upstream[];
  private byName: Map<string, Upstream>;
  onChange: (upstream: Upstream) => void = () => {};
  private readonly fanout: number | undefined;
  private started = false;
  /** One object shared by every upstream, so a reload's gateway settings reach them all at once. */
  private readonly deps: UpstreamDeps;

  constructor(config: Config, deps: PoolDeps) {
    this.deps = {
      platform: deps.platform,
      gateway: config.gateway,
      log: deps.log,
      clientVersion: deps.clientVersion,
      ...(deps.backoff ? { backoff: deps.backoff } : {}),
      ...(deps.openSession ? { openSession: deps.openSession } : {}),
      ...(deps.auths ? { auths: deps.auths } : {}),
      ...(deps.running ? { running: deps.running } : {}),
    };
    // A login (or logout) of the deployment's identity: the shared upstream connects again with it.
    for (const [name, auth] of deps.auths ?? []) {
      auth.onChange((subject) => {
        if (subject === '') void this.get(name)?.reopen();
      });
    }
    this.list = config.servers.map((server) => this.create(server));
    this.byName = new Map(this.list.map((u) => [u.name, u]));
    this.fanout = deps.platform.maxConcurrentConnects;
  }

  /** Sessions come from the runtime's opener, which pulls freshness per request (no timers). */
  get pulled(): boolean {
    return this.deps.openSession !== undefined;
  }

  /** Every configured upstream, in config order. */
  get upstreams(): readonly Upstream[] {
    return this.list;
  }

  /** The gateway settings upstreams read (deadlines, list bounds): read at each use, so a change applies next time. */
  set gateway(gateway: GatewayConfig) {
    this.deps.gateway = gateway;
  }

  /** A new upstream for `server` that reports to this pool, not yet one of its members (see `replace`). */
  create(server: ServerConfig): Upstream {
    const u = new Upstream(server, this.deps);
    u.onChange = () => this.onChange(u);
    return u;
  }

  /** The pool becomes exactly these upstreams, in this order (a reload; the caller closes the others). */
  replace(upstreams: readonly Upstream[]): void {
    this.list = upstreams;
    this.byName = new Map(upstreams.map((u) => [u.name, u]));
  }

  /** Starts an upstream a reload adds, unless the pool's own start is still to come (it starts them all). */
  startAdded(u: Upstream): Promise<void> {
    return this.started ? this.startOne(u) : Promise.resolve();
  }

  /**
   * `listed`: whether a server's verified catalog is known (stored, #53). A `lazy` server with one
   * is not started; one without is started once, listed and verified (its catalog stored), then
   * stopped. Everything else starts now.
   */
  async start(listed: (u: Upstream) => boolean = () => false): Promise<void> {
    this.listed = listed;
    this.started = true;
    const all = this.list;
    const wave = this.fanout ?? all.length;
    // In waves where the runtime caps concurrent subrequests; all at once elsewhere.
    for (let i = 0; i < all.length; i += Math.max(1, wave)) {
      await Promise.allSettled(all.slice(i, i + Math.max(1, wave)).map((u) => this.startOne(u)));
    }
  }

  private listed: (u: Upstream) => boolean = () => false;

  private async startOne(u: Upstream): Promise<void> {
    if (u.config.start !== 'lazy') return u.start();
    if (this.listed(u)) return u.park();
    await u.start();
    await u.stop('listed');
  }

  get(name: string): Upstream | undefined {
    return this.byName.get(name);
  }

  /** Every configured upstream, in config order. */
  all(): readonly Upstream[] {
    return this.list;
  }

  status(): UpstreamStatus[] {
    return this.list.map((u) => u.status());
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.list.map((u) => u.close()));
  }
}
