/**
 * Applying a new config to a running gateway (#16): the plan (reload-plan.ts) carried out without
 * dropping sessions or calls to the servers it leaves alone. Unchanged servers keep their Upstream
 * (connection, stdio child, isolated instances); retuned ones keep it with their new config; added
 * and replaced ones are connected first, while the old ones still serve, then everything switches
 * at once and the catalog is built once, so clients hear at most one list_changed per list. Old
 * upstreams close once their calls are done (or the shutdown grace has passed).
 */

import type { ProfileSet } from '../aggregate/profiles.js';
import type { Config, ServerConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import type { VerifiedListing } from '../guards/drift/verdict.js';
import { redactor } from '../lib/redact.js';
import type { Upstream } from '../upstream/upstream.js';
import type { Gateway } from './gateway.js';
import { planReload, type ReloadPlan, runningConfig } from './reload-plan.js';

/** What the gateway lends its reloader: state that is otherwise its own. */
export interface ReloadHooks {
  /** Warm listings: a server that leaves or reconnects must not be served from its old one. */
  warm: Map<string, VerifiedListing>;
  /** Every configured secret (drift identities and the redactor read it); a reload adds its own. */
  secrets: string[];
  profiles: ProfileSet;
  /** Who hears `notifications/resources/updated`, from any upstream. */
  updateListeners: readonly ((server: string, uri: string) => void)[];
}

export interface ReloadOutcome {
  plan: ReloadPlan;
  /** Settles once every upstream the reload let go of is closed. */
  retired: Promise<void>;
}

/** How often a retiring upstream is looked at for its last call to end. */
const DRAIN_POLL_MS = 50;

export class Reloader {
  /** Reloads run one at a time, each planned against the config the previous one left. */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly retiring = new Set<Upstream>();
  private closed = false;

  constructor(
    private readonly gateway: Gateway,
    private readonly hooks: ReloadHooks,
  ) {}

  /** The wiring every upstream gets, at start and when a reload adds one. */
  wire(u: Upstream): void {
    // Reads u.config at each listing: a retuned server is verified with its new settings.
    u.verify = (tools) => this.gateway.drift.verify(u.config, tools, { save: true });
    u.onResourceUpdated = (uri) => {
      for (const l of this.hooks.updateListeners) l(u.name, uri);
    };
  }

  /**
   * Applies `next` (already validated: a config with errors never gets here). `secrets` are its
   * interpolated values, redacted from now on. Rejects, changing nothing, once the gateway stops.
   */
  apply(next: Config, secrets: readonly string[] = []): Promise<ReloadOutcome> {
    // #52: the servers added through the admin API are merged over every config the file gives.
    const run = this.queue.then(() => {
      this.gateway.managed.fileConfig = next;
      const merged = this.gateway.managed.merge(next);
      return this.applyNow(merged.config, [...secrets, ...merged.secrets]);
    });
    this.queue = run.catch(() => {});
    return run;
  }

  private async applyNow(next: Config, secrets: readonly string[]): Promise<ReloadOutcome> {
    const g = this.gateway;
    const stopping = () => new ManifoldError('ERR_SHUTTING_DOWN', 'the gateway is shutting down');
    if (g.isStopping) throw stopping();
    const old = g.config;
    const plan = planReload(old, next);
    const running = runningConfig(old, next, plan);
    if (plan.restart.length > 0) {
      g.log.warn('config.reload_restart_needed', {
        keys: plan.restart,
        message: `${plan.restart.join(', ')} changed: the running values stay until the gateway restarts`,
      });
    }
    for (const s of secrets) if (!this.hooks.secrets.includes(s)) this.hooks.secrets.push(s);
    const byName = new Map(next.servers.map((s) => [s.name, s]));
    // New connections first: the servers they replace keep serving until these have had their
    // first attempt (each bounded by its own deadlines).
    const fresh = new Map<string, Upstream>();
    for (const name of [...plan.added, ...plan.replaced]) {
      const u = g.pool.create(byName.get(name)!);
      this.wire(u);
      // Clients' resource subscriptions on a replaced server are asked for again on the new connection.
      for (const uri of g.pool.get(name)?.watched ?? []) u.watched.add(uri);
      fresh.set(name, u);
    }
    await Promise.allSettled([...fresh.values()].map((u) => g.pool.startAdded(u)));
    if (g.isStopping) {
      await Promise.allSettled([...fresh.values()].map((u) => u.close()));
      throw stopping();
    }
    this.install(old, running);
    for (const name of plan.retuned) this.retune(g.pool.get(name)!, byName.get(name)!);
    const leaving: Upstream[] = [];
    for (const name of [...plan.removed, ...plan.replaced]) {
      leaving.push(g.pool.get(name)!, ...g.isolated.retire(name));
      this.hooks.warm.delete(name);
    }
    g.pool.replace(next.servers.map((s) => fresh.get(s.name) ?? g.pool.get(s.name)!));
    g.rebuild(plan.live.length > 0);
    const changed = [...plan.replaced, ...plan.retuned];
    g.log.info('config.reloaded', {
      added: plan.added,
      removed: plan.removed,
      changed,
      unchanged: plan.unchanged.length,
      ...(plan.live.length > 0 ? { live: plan.live } : {}),
    });
    const retired = Promise.allSettled(leaving.map((u) => this.retire(u))).then(() => {});
    return { plan, retired };
  }

  /** The running config into everything the gateway derives from the config. */
  private install(old: Config, running: Config): void {
    const g = this.gateway;
    const was = old.gateway.auth;
    const now = running.gateway.auth;
    // The authenticator holds the running auth object: it stays, with the tenants' new call limits.
    if (was && now && was !== now) {
      was.tenants = now.tenants;
      running.gateway.auth = was;
    }
    g.config = running;
    g.redact = redactor(this.hooks.secrets);
    g.guards.configure(running);
    g.configurePolicy(running);
    this.hooks.profiles.configure(running);
    g.pool.gateway = running.gateway;
    g.isolated.gateway = running.gateway;
  }

  /** Only what the gateway makes of the server changed: the same connection, the new config. */
  private retune(u: Upstream, config: ServerConfig): void {
    const trust = u.config.trustAnnotations;
    u.config = config;
    this.gateway.isolated.retune(config);
    // Annotations decide drift verdicts: the listing already held is verified again.
    if (trust !== config.trustAnnotations) void u.reverify();
  }

  /** Closes an upstream the reload let go of, once its calls have ended or the grace has passed. */
  private async retire(u: Upstream): Promise<void> {
    this.retiring.add(u);
    const until = this.gateway.platform.now() + this.gateway.config.gateway.shutdownGraceMs;
    // One poll at least: a call that picked this upstream just before the switch reaches it a turn later.
    do {
      await new Promise((r) => setTimeout(r, DRAIN_POLL_MS));
    } while (!this.closed && u.inflight > 0 && this.gateway.platform.now() < until);
    this.retiring.delete(u);
    await u.close();
  }

  /** The gateway is closing (its own drain is over): whatever is still retiring closes now. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.retiring].map((u) => u.close()));
  }
}
