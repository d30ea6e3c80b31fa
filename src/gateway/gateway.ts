import { type Catalog, type CatalogEntry, emptyCatalog } from '../aggregate/catalog.js';
import { CursorSealer } from '../aggregate/cursor.js';
import { ListPages } from '../aggregate/pages.js';
import { ProfileSet } from '../aggregate/profiles.js';
import { emptySurface, type Surface } from '../aggregate/surface.js';
import { SurfaceViews } from '../aggregate/surface-views.js';
import { ToolViews } from '../aggregate/tool-views.js';
import type { Principal } from '../auth/principal.js';
import { Sealer } from '../auth/seal.js';
import { type CallLimiterFactory, callLimiter, type TakeCall } from '../auth/shared-limit.js';
import type { Config } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import type { VerifiedListing } from '../guards/drift/verdict.js';
import type { PolicyRules, Ruling } from '../guards/policy/rules.js';
import type { Logger } from '../lib/log.js';
import { type Redactor, redactor } from '../lib/redact.js';
import { PolicyMetrics } from '../observe/policy-metrics.js';
import { Observers } from '../observe/record.js';
import type { Platform } from '../platform.js';
import { MemoryApprovalStore } from '../store/approvals.js';
import { MemoryStateStore, type StateStore } from '../store/state.js';
import { MemoryServerStore } from '../store/stored-servers.js';
import { MemoryTokenStore } from '../store/tokens.js';
import type { BackoffOptions } from '../upstream/backoff.js';
import { IsolatedInstances } from '../upstream/isolation.js';
import type { UpstreamAuth } from '../upstream/oauth/auth-fetch.js';
import { SecretBox } from '../upstream/oauth/box.js';
import { UpstreamPool } from '../upstream/pool.js';
import { RunningServers } from '../upstream/running.js';
import type { SessionOpener } from '../upstream/session.js';
import type { UpstreamStatus } from '../upstream/types.js';
import type { Upstream } from '../upstream/upstream.js';
import { ApprovalsQueue } from './approvals-queue.js';
import { CallGuards } from './call-guards.js';
import { nextCatalogs, reservedPrefixes } from './catalog-build.js';
import { DriftGate } from './drift-gate.js';
import { Guardrails } from './guardrails.js';
import {
  coldDeadline,
  gatewayHealth,
  type Health,
  loadWarm,
  reverifyWarm,
  withIsolation,
} from './lifecycle.js';
import { ManagedServers } from './managed-servers.js';
import { policyOf, policyPrincipal } from './policy.js';
import { Reloader } from './reload.js';
import { TokenRegistry } from './token-registry.js';

/** The lists a client can be told changed. */
export type ChangeKind = 'tools' | 'prompts' | 'resources';

export interface GatewayOptions {
  config: Config;
  platform: Platform;
  version: string;
  backoff?: BackoffOptions;
  /** Shared by instances that must accept each other's cursors. Random per process otherwise. */
  cursorSecret?: Uint8Array;
  /** Drift baselines and the catalog cache. In memory when absent. */
  store?: StateStore;
  /** How often to look for a re-trust made by another process (ms). Default 2000. */
  trustPollMs?: number;
  /** Interpolated ${VAR} values from the config, never to be stored. */
  secrets?: readonly string[];
  /** Counts tenants' calls (shared-limit.ts); the in-memory bucket, per instance, when absent. */
  callLimiter?: CallLimiterFactory;
  /** Opens upstream sessions instead of the probe; freshness is then pulled, no timers (session.ts). */
  openSession?: SessionOpener;
  upstreamAuth?: ReadonlyMap<string, UpstreamAuth>; // protected upstreams' credentials (#19), by server
  /**
   * The origin clients reach the gateway at, where the host knows it and has no bound address
   * (Workers): the base of the links the gateway sends (#52's approval link) when
   * `gateway.advertiseUrl` is not set. Absent: the bound address.
   */
  clientOrigin?: () => string | undefined;
}

/**
 * The gateway's state: upstream pool, current catalog snapshot, sessions. The HTTP layer
 * (server/http/app.ts) is a thin translation on top; nothing here knows about HTTP.
 */
export class Gateway {
  /** The running config; a reload (reload.ts) installs the next one. */
  config: Config;
  readonly platform: Platform;
  readonly version: string;
  readonly pool: UpstreamPool;
  readonly log: Logger;
  /** Per-tenant and per-subject instances of servers with `isolation`. */
  readonly isolated: IsolatedInstances;
  /** Protected upstreams' credentials (#19): login, logout, state. Empty when none is protected. */
  readonly upstreamAuth: ReadonlyMap<string, UpstreamAuth>;
  /** The host's origin clients use, for the links the gateway sends (`GatewayOptions.clientOrigin`). */
  readonly clientOrigin: () => string | undefined;
  /** Replaces configured secret values in text a client will see (error messages). */
  redact: Redactor;
  /** Every configured secret so far (a reload adds its own): the redactor's and drift's list. */
  private readonly secrets: string[];
  catalog: Catalog = emptyCatalog;
  /** Prompts, resources and templates: the rest of the merged catalog. */
  surface: Surface = emptySurface;
  /** Per-principal views of `surface`, and where its requests go. */
  readonly views = new SurfaceViews(
    () => this.surface,
    () => this.policy,
  );
  /** Settles when every upstream's first attempt has settled. */
  ready: Promise<void> = Promise.resolve();
  private started = false;
  private stopping = false;
  private inflight = 0;
  private drained: (() => void) | undefined;
  /** Seals the gateway's MRTR request states (bound to the principal and the request). */
  readonly states: Promise<Sealer>;
  /** Seals the task ids the gateway hands out (bound to the principal, the server and the tool). */
  readonly taskIds: Promise<Sealer>;
  /** Per-principal views of `catalog` (aggregate/tool-views.ts): what each may list, call and search. */
  private readonly tools: ToolViews;
  /** Named profiles (#17): their catalogs, their principals, their catalog settings. */
  private readonly profileSet: ProfileSet;
  /** Quarantine refusal, argument validation and the result cap for tools/call. */
  readonly guards: CallGuards;
  /** The config's policy rules (#51), compiled once per config; `configurePolicy` on reload. */
  policy: PolicyRules;
  /** The config's guardrails (#51): detectors and webhooks, on requests and responses. */
  guardrails: Guardrails;
  /** tools/list and the surface lists, a page at a time, behind sealed cursors (aggregate/pages.ts). */
  readonly pages: ListPages;
  /** Who hears of each audited request (metrics, the status page's recent calls). */
  readonly observers = new Observers();
  /** What rules and guardrails decided (#51), for metrics. */
  readonly policyMetrics = new PolicyMetrics();
  /** Per-tenant rate limit for tools/call. */
  readonly takeCall: TakeCall;
  /** Listeners for a verified catalog change (downstream list_changed). */
  private listeners = new Set<(catalog: Catalog, changed: ReadonlySet<ChangeKind>) => void>();
  private shutdownListeners: (() => void)[] = [];
  private updateListeners: ((server: string, uri: string) => void)[] = [];
  readonly store: StateStore;
  /** The approvals queue (#52), in the store when it has one. */
  readonly approvals: ApprovalsQueue;
  /** Servers added through the admin API (#52), merged over the file's. */
  readonly managed: ManagedServers;
  /** Tokens seen and revoked (#52): every request's token is checked against it. */
  readonly tokens: TokenRegistry;
  readonly drift: DriftGate;
  /** Verified listings from the store, served until each upstream answers (warm start). */
  private warm = new Map<string, VerifiedListing>();
  private timers: ReturnType<typeof setInterval>[] = [];
  private epoch = 0;
  private readonly trustPollMs: number;
  private live: Promise<void> = Promise.resolve();
  /** A cold start's first attempts, before `ready` (nothing sees the catalog): built once, at the end. */
  private coldDiscovery = false;
  /** Applies a new config without a restart (reload.ts). */
  readonly reloader: Reloader;
  /** Which servers run now: idle stop and gateway.maxRunningServers (#53). */
  readonly running = new RunningServers(
    () => this.config.gateway,
    () => this.platform.now(),
  );

  constructor(options: GatewayOptions) {
    this.config = options.config;
    this.platform = options.platform;
    this.version = options.version;
    this.log = options.platform.log;
    this.secrets = [...(options.secrets ?? [])];
    this.redact = redactor(this.secrets);
    this.upstreamAuth = options.upstreamAuth ?? new Map();
    this.clientOrigin = options.clientOrigin ?? (() => undefined);
    const shared = {
      platform: options.platform,
      log: options.platform.log,
      clientVersion: options.version,
      ...(options.backoff ? { backoff: options.backoff } : {}),
      ...(options.upstreamAuth ? { auths: options.upstreamAuth } : {}),
      running: this.running,
    };
    this.isolated = new IsolatedInstances({ ...shared, gateway: options.config.gateway });
    this.pool = new UpstreamPool(options.config, {
      ...shared,
      ...(options.openSession ? { openSession: options.openSession } : {}),
    });
    this.pool.onChange = () => {
      if (!this.coldDiscovery) this.rebuild();
    };
    this.guards = new CallGuards(options.config, this.log);
    this.policy = policyOf(options.config);
    this.guardrails = new Guardrails(options.config, options.platform, this.policyMetrics);
    this.profileSet = new ProfileSet(options.config, this.log);
    this.tools = new ToolViews(
      () => this.catalog,
      this.profileSet,
      undefined,
      undefined,
      () => this.policy,
    );
    this.store = options.store ?? new MemoryStateStore();
    this.drift = new DriftGate(this.store, this.log, () => options.platform.now(), this.secrets);
    this.trustPollMs = options.trustPollMs ?? 2000;
    this.takeCall = callLimiter(
      () => this.config,
      () => options.platform.now(),
      options.callLimiter,
    );
    const lent = { warm: this.warm, secrets: this.secrets, profiles: this.profileSet };
    this.reloader = new Reloader(this, { ...lent, updateListeners: this.updateListeners });
    for (const u of this.pool.upstreams) this.reloader.wire(u);
    // One deployment secret (gateway.cursorSecret, or random per process) under every MAC.
    const secret = options.cursorSecret ?? crypto.getRandomValues(new Uint8Array(32));
    this.pages = new ListPages(this, this.tools, CursorSealer.create(secret));
    this.states = Sealer.create(secret, 'manifold/request-state');
    this.taskIds = Sealer.create(secret, 'manifold/task-id');
    this.managed = new ManagedServers(this, this.store.storedServers ?? new MemoryServerStore());
    this.tokens = new TokenRegistry(this.store.tokens ?? new MemoryTokenStore(), options.platform, this.log);
    this.approvals = new ApprovalsQueue(
      this.store.approvals ?? new MemoryApprovalStore(),
      options.platform,
      this.log,
      Sealer.create(secret, 'manifold/approval-link'),
      { store: this.store, box: SecretBox.create(secret, 'manifold/queued-call/v1') },
    );
  }

  /** The stored catalog first (warm start), then every upstream connected in parallel, reconciled in the background. */
  start(): Promise<void> {
    if (this.started) return this.ready;
    this.started = true;
    const warmed = this.loadWarm();
    const live = warmed
      .then((count) => {
        this.coldDiscovery = count === 0;
        // Stopped while the stored listings were read: nothing is started.
        if (this.stopping) return;
        // A lazy server with a stored catalog is listed from it and not started (#53).
        return this.pool.start((u) => this.warm.has(u.name));
      })
      .finally(() => this.endColdDiscovery(false));
    this.live = live;
    const { coldStartMs } = this.config.gateway;
    this.ready = warmed
      .then((count) =>
        count > 0 ? undefined : coldDeadline(coldStartMs, live, () => this.endColdDiscovery(true)),
      )
      .then(() => {
        this.log.info('gateway.catalog', {
          tools: this.catalog.entries.length,
          version: this.catalog.version,
          warm: this.warm.size,
        });
      });
    void live.then(() => this.startTimers());
    return this.ready;
  }

  /** The catalog built once the first attempts settled, or the cold start's deadline passed. */
  private endColdDiscovery(deadline: boolean): void {
    if (!this.coldDiscovery) return;
    this.coldDiscovery = false;
    this.rebuild();
    if (!deadline) return;
    const waiting = this.pool.upstreams.filter((u) => u.status().state === 'connecting').map((u) => u.name);
    this.log.warn('gateway.cold_start_partial', { waitedMs: this.config.gateway.coldStartMs, waiting });
  }

  /** Settles once every first connection attempt has settled (used by `check` and tests). */
  async settled(): Promise<void> {
    await this.ready;
    await this.live;
  }

  /** The trust epoch first (unreadable: -1, so the first poll re-verifies), then each stored listing verified. */
  private async loadWarm(): Promise<number> {
    this.epoch = await this.drift.trustEpoch().catch(() => -1);
    const count = await loadWarm(this.pool, this.drift, this.warm, this.log);
    if (count > 0) this.rebuild();
    return count;
  }

  private startTimers(): void {
    if (this.stopping || this.pool.pulled) return;
    const recheck = this.config.gateway.drift.recheckSeconds;
    if (recheck > 0) {
      // list_changed is a security event, and so is silence: re-list on a timer too (C4).
      this.timers.push(setInterval(() => void this.recheck(), recheck * 1000));
    }
    this.timers.push(setInterval(() => void this.pollTrust(), this.trustPollMs));
    // #52: servers added through the admin API, by this instance or another sharing the store.
    void this.managed.poll();
    this.timers.push(setInterval(() => void this.managed.poll(), this.trustPollMs));
  }

  /** Re-lists every ready upstream; each listing is verified before it can change the catalog. */
  async recheck(): Promise<void> {
    await Promise.allSettled(this.pool.upstreams.map((u) => u.refresh()));
  }

  /** Picks up a re-trust written by `manifold retrust` in another process. */
  async pollTrust(): Promise<void> {
    let epoch: number;
    try {
      epoch = await this.drift.trustEpoch();
    } catch {
      return;
    }
    if (epoch === this.epoch) return;
    this.epoch = epoch;
    this.drift.forget();
    this.log.info('drift.retrust_seen', { epoch });
    await reverifyWarm(this.pool, this.drift, this.warm);
    await Promise.allSettled(this.pool.upstreams.map((u) => u.reverify()));
    this.rebuild();
  }

  /** `notifications/resources/updated` from any upstream (its name and its own URI). */
  onResourceUpdated(listener: (server: string, uri: string) => void): void {
    this.updateListeners.push(listener);
  }

  /** Runs once the gateway has drained, before upstreams close (the edge ends its streams). */
  onShutdown(listener: () => void): void {
    this.shutdownListeners.push(listener);
  }

  onCatalogChange(listener: (catalog: Catalog, changed: ReadonlySet<ChangeKind>) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Recomputes the merged catalog; announces each list only if what clients would see of it changed.
   * `reconfigured`: a reload changed settings views are cut with (profiles, catalog mode): every
   * view is cut again, and each client's own digest decides what it is told.
   */
  rebuild(reconfigured = false): void {
    const reserved = reservedPrefixes(this.config);
    const next = nextCatalogs({
      upstreams: this.pool.upstreams,
      warm: this.warm,
      gateway: this.config.gateway,
      reserved,
      catalog: this.catalog,
      surface: this.surface,
      log: this.log,
    });
    if (next.catalog) this.catalog = next.catalog;
    if (next.catalog || reconfigured) {
      this.profileSet.rebuild(next.inputs, this.catalog.version, reserved);
      this.tools.clear();
    }
    if (next.surface) this.surface = next.surface;
    if (reconfigured) {
      this.views.clear();
      for (const kind of ['tools', 'prompts', 'resources'] as const) next.changed.add(kind);
    }
    if (next.changed.size === 0) return;
    for (const l of this.listeners) l(this.catalog, next.changed);
  }

  /** The catalog a principal's requests are served from: its profile's, or the gateway's. */
  catalogOf(principal: Principal): Catalog {
    return this.tools.catalogOf(principal);
  }

  /** The principal as served at `/mcp/<profile>` (profiles.ts): 404 unknown, 403 foreign. */
  profilePrincipal(principal: Principal, pathProfile: string | undefined): Principal {
    return policyPrincipal(this.profileSet.principal(principal, pathProfile), this.policy);
  }

  /** A reload's rules and guardrails (#51): every view is cut again by the caller's rebuild. */
  configurePolicy(config: Config): void {
    this.policy = policyOf(config);
    this.guardrails = new Guardrails(config, this.platform, this.policyMetrics);
  }

  /** What the policy rules that read no arguments decided for a tool this principal can see. */
  ruling(principal: Principal, entry: CatalogEntry): Ruling {
    return this.tools.ruling(principal, entry);
  }

  /** What tools/list shows a principal, cached per catalog version (filter after the cache). */
  visibleEntries(principal: Principal): CatalogEntry[] {
    return this.tools.entries(principal);
  }

  /** What a search finds for this principal: only tools it may see, best first, at most `limit`. */
  searchTools(principal: Principal, query: string, limit?: number): CatalogEntry[] {
    return this.tools.search(principal, query, limit);
  }

  /** A digest of what a principal can see now: a change it cannot see is never announced to it. */
  viewDigest(principal: Principal, kind: ChangeKind = 'tools'): string {
    return kind === 'tools' ? this.tools.digest(principal) : this.views.digest(principal, kind);
  }

  /** Whether this principal can see the exposed name (config filters, then grants). */
  isVisible(principal: Principal, name: string): boolean {
    return this.tools.isVisible(principal, name);
  }

  /** Resolves an exposed name for this principal; invisible and unknown fail identically (A13). */
  resolve(principal: Principal, name: unknown): CatalogEntry {
    return this.tools.resolve(principal, name);
  }

  /** Code mode (#50): the principal's view is in it; its programs may call these names. */
  codeMode(principal: Principal): boolean {
    return this.tools.codeMode(principal);
  }

  callable(principal: Principal, name: string): boolean {
    return this.tools.callable(principal, name);
  }

  callableNames(principal: Principal): string[] {
    return this.tools.callableNames(principal);
  }

  /** The upstream that owns a server name, connected or waiting for its first attempt. */
  async owner(server: string): Promise<Upstream> {
    const owner = this.pool.get(server);
    if (!owner) throw new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', `server ${server} is not configured`);
    if (owner.state === 'connecting') await owner.firstAttempt;
    return owner;
  }

  /** The upstream for this principal: the shared one, or its own instance of a server with `isolation`. */
  async callee(server: string, principal: Principal): Promise<Upstream> {
    const owner = await this.owner(server);
    if (owner.config.isolation === 'shared') {
      // Stopped while unused (#53): started for this request, within connectTimeoutMs.
      if (owner.state === 'idle') await owner.wake();
      return owner;
    }
    return this.isolated.instance(owner.config, principal);
  }

  /** Counts one call in flight, so that shutdown can drain them; refused once stopping. Pair with `leave`. */
  enter(): void {
    if (this.stopping) throw new ManifoldError('ERR_SHUTTING_DOWN', 'the gateway is shutting down');
    this.inflight++;
  }

  /** The call counted by `enter` is over. */
  leave(): void {
    this.inflight--;
    if (this.inflight === 0) this.drained?.();
  }

  /** Calls relayed and not yet answered. */
  get inflightCalls(): number {
    return this.inflight;
  }

  get isStopping(): boolean {
    return this.stopping;
  }

  health(): Health {
    const isolation = (name: string) => this.pool.get(name)?.config.isolation;
    const view = (u: UpstreamStatus) =>
      withIsolation(u, isolation(u.name), this.isolated, this.upstreamAuth.get(u.name));
    const upstreams = this.pool.status().map(view);
    return gatewayHealth(upstreams, this.stopping, this.version, this.catalog.diagnostics);
  }

  /** Stop accepting calls, let in-flight ones finish within `graceMs`, then close everything. */
  async close(graceMs = this.config.gateway.shutdownGraceMs): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    if (this.inflight > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.drained = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    for (const l of this.shutdownListeners) l();
    this.running.close();
    await Promise.allSettled([this.pool.close(), this.isolated.close(), this.reloader.close()]);
    await this.store.close?.();
  }
}
