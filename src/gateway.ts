import {
  buildCatalog,
  type Catalog,
  type CatalogEntry,
  type Diagnostic,
  digestOf,
  emptyCatalog,
} from './aggregate/catalog.js';
import { CursorSealer } from './aggregate/cursor.js';
import { indexOf, searchMetaEntries } from './aggregate/search.js';
import { buildSurface, emptySurface, type Surface, type SurfaceInput } from './aggregate/surface.js';
import { grantsMatcher, mayNameServer } from './auth/grants.js';
import type { Principal } from './auth/principal.js';
import { rateLimiter } from './auth/rate-limit.js';
import { Sealer } from './auth/seal.js';
import { CallGuards } from './call-guards.js';
import type { Config } from './config/types.js';
import { DriftGate, type VerifiedListing } from './drift-gate.js';
import { ManifoldError } from './errors.js';
import { splitDriftListing, splitNames } from './guards/drift-kinds.js';
import { compileGlobs } from './guards/glob.js';
import type { Logger } from './log.js';
import type { Platform } from './platform.js';
import { ProfileSet } from './profiles.js';
import { type Redactor, redactor } from './redact.js';
import { MemoryStateStore, type StateStore } from './store/state.js';
import { SurfaceViews } from './surface-views.js';
import type { BackoffOptions } from './upstream/backoff.js';
import { IsolatedInstances } from './upstream/isolated.js';
import { UpstreamPool } from './upstream/pool.js';
import type { Upstream, UpstreamStatus } from './upstream/upstream.js';

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
}

export interface Health {
  status: 'ok' | 'degraded' | 'down' | 'starting' | 'stopping';
  version: string;
  upstreams: UpstreamStatus[];
  diagnostics: readonly Diagnostic[];
}

interface View {
  version: number;
  /** What tools/list lists: every visible tool, or in search mode the meta-tools and pins. */
  entries: CatalogEntry[];
  /** Every name the principal may call: all visible tools, and the listed meta-tools. */
  names: Set<string>;
  /** The catalog it was cut from (the gateway's, or its profile's). */
  catalog: Catalog;
  /** Search mode: tools are found with manifold__search_tools; its meta entries by name. */
  search?: { metas: ReadonlyMap<string, CatalogEntry>; limit: number };
  digest?: string;
}

export interface ToolPage {
  tools: CatalogEntry['tool'][];
  nextCursor?: string;
}

/**
 * The gateway's state: upstream pool, current catalog snapshot, sessions. The HTTP layer
 * (server/app.ts) is a thin translation on top; nothing here knows about HTTP.
 */
export class Gateway {
  readonly config: Config;
  readonly platform: Platform;
  readonly version: string;
  readonly pool: UpstreamPool;
  readonly log: Logger;
  /** Per-tenant and per-subject instances of servers with `isolation`. */
  readonly isolated: IsolatedInstances;
  /** Every configured server's name prefix: no unprefixed server may publish into one. */
  private readonly reservedPrefixes: ReadonlySet<string>;
  /** Replaces configured secret values in text a client will see (error messages). */
  readonly redact: Redactor;
  catalog: Catalog = emptyCatalog;
  /** Prompts, resources and templates: the rest of the merged catalog. */
  surface: Surface = emptySurface;
  /** Per-principal views of `surface`, and where its requests go. */
  readonly views = new SurfaceViews(() => this.surface);
  /** Settles when every upstream's first attempt has settled. */
  ready: Promise<void> = Promise.resolve();
  private started = false;
  private stopping = false;
  private inflight = 0;
  private drained: (() => void) | undefined;
  private cursors: Promise<CursorSealer>;
  /** Seals the gateway's MRTR request states (bound to the principal and the request). */
  readonly states: Promise<Sealer>;
  /** Seals the task ids the gateway hands out (bound to the principal, the server and the tool). */
  readonly taskIds: Promise<Sealer>;
  private visibleCache = new Map<string, View>();
  /** Named profiles (#17): their catalogs, their principals, their catalog settings. */
  private readonly profileSet: ProfileSet;
  /** Quarantine refusal, argument validation and the result cap for tools/call. */
  readonly guards: CallGuards;
  private pageCache = new Map<string, { version: number; json: string }>();
  /** Per-tenant token buckets for tools/call (counted per instance). */
  readonly takeCall: ReturnType<typeof rateLimiter>;
  /** Listeners for a verified catalog change (downstream list_changed). */
  private listeners = new Set<(catalog: Catalog, changed: ReadonlySet<ChangeKind>) => void>();
  private shutdownListeners: (() => void)[] = [];
  private updateListeners: ((server: string, uri: string) => void)[] = [];
  readonly store: StateStore;
  readonly drift: DriftGate;
  /** Verified listings from the store, served until each upstream answers (warm start). */
  private warm = new Map<string, VerifiedListing>();
  private timers: ReturnType<typeof setInterval>[] = [];
  private epoch = 0;
  private readonly trustPollMs: number;
  private live: Promise<void> = Promise.resolve();
  /**
   * True during a cold start's first connection attempts. Nothing can see the catalog then
   * (tools/list and tools/call wait for `ready`), so it is built once at the end rather than once
   * per upstream that answers: with many upstreams that is most of the gateway's own start work.
   */
  private coldDiscovery = false;

  constructor(options: GatewayOptions) {
    this.config = options.config;
    this.platform = options.platform;
    this.version = options.version;
    this.log = options.platform.log;
    this.redact = redactor(options.secrets ?? []);
    this.reservedPrefixes = new Set(options.config.servers.flatMap((s) => (s.prefix ? [s.prefix] : [])));
    this.isolated = new IsolatedInstances({
      platform: options.platform,
      gateway: options.config.gateway,
      log: options.platform.log,
      clientVersion: options.version,
      ...(options.backoff ? { backoff: options.backoff } : {}),
    });
    this.pool = new UpstreamPool(options.config, {
      platform: options.platform,
      log: options.platform.log,
      clientVersion: options.version,
      ...(options.backoff ? { backoff: options.backoff } : {}),
    });
    this.pool.onChange = () => {
      if (!this.coldDiscovery) this.rebuild();
    };
    this.guards = new CallGuards(options.config, this.log);
    this.profileSet = new ProfileSet(options.config, this.reservedPrefixes, this.log);
    this.store = options.store ?? new MemoryStateStore();
    this.drift = new DriftGate(this.store, this.log, () => options.platform.now(), options.secrets ?? []);
    this.trustPollMs = options.trustPollMs ?? 2000;
    for (const u of this.pool.upstreams) {
      u.verify = (tools) => this.drift.verify(u.config, tools, { save: true });
      u.onResourceUpdated = (uri) => {
        for (const l of this.updateListeners) l(u.name, uri);
      };
    }
    const g = options.config.gateway;
    const tenants = g.auth ? g.auth.tenants : {};
    this.takeCall = rateLimiter({
      perTenant: (tenant) => tenants[tenant]?.callsPerMinute ?? g.callsPerMinute,
      now: () => options.platform.now(),
    });
    // One deployment secret (gateway.cursorSecret, or random per process) under every MAC.
    const secret = options.cursorSecret ?? crypto.getRandomValues(new Uint8Array(32));
    this.cursors = CursorSealer.create(secret);
    this.states = Sealer.create(secret, 'manifold/request-state');
    this.taskIds = Sealer.create(secret, 'manifold/task-id');
  }

  /**
   * Projects the stored catalog first (warm start: the first tools/list needs no upstream round
   * trip), then connects every upstream in parallel and reconciles in the background.
   */
  start(): Promise<void> {
    if (this.started) return this.ready;
    this.started = true;
    this.epoch = this.drift.trustEpoch();
    const warmed = this.loadWarm();
    const live = warmed
      .then((count) => {
        this.coldDiscovery = count === 0;
        return this.pool.start();
      })
      .finally(() => {
        if (!this.coldDiscovery) return;
        this.coldDiscovery = false;
        this.rebuild();
      });
    this.live = live;
    this.ready = warmed
      .then((count) => (count > 0 ? undefined : live))
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

  /** Settles once every first connection attempt has settled (used by `check` and tests). */
  async settled(): Promise<void> {
    await this.ready;
    await this.live;
  }

  /** Verifies each stored listing whose identity still matches, and serves it until its upstream answers. */
  private async loadWarm(): Promise<number> {
    await Promise.all(
      this.pool.upstreams.map(async (u) => {
        if (u.config.disabled) return;
        try {
          const cached = this.drift.cachedTools(u.config);
          if (!cached) return;
          this.warm.set(u.name, await this.drift.verify(u.config, cached, { save: false }));
        } catch (e) {
          this.log.warn('store.warm_failed', { server: u.name, error: String(e).slice(0, 200) });
        }
      }),
    );
    if (this.warm.size > 0) this.rebuild();
    return this.warm.size;
  }

  private startTimers(): void {
    if (this.stopping) return;
    const recheck = this.config.gateway.drift.recheckSeconds;
    if (recheck > 0) {
      // list_changed is a security event, and so is silence: re-list on a timer too (C4).
      this.timers.push(setInterval(() => void this.recheck(), recheck * 1000));
    }
    this.timers.push(setInterval(() => void this.pollTrust(), this.trustPollMs));
  }

  /** Re-lists every ready upstream; each listing is verified before it can change the catalog. */
  async recheck(): Promise<void> {
    await Promise.allSettled(this.pool.upstreams.map((u) => u.refresh()));
  }

  /** Picks up a re-trust written by `manifold retrust` in another process. */
  async pollTrust(): Promise<void> {
    let epoch: number;
    try {
      epoch = this.drift.trustEpoch();
    } catch {
      return;
    }
    if (epoch === this.epoch) return;
    this.epoch = epoch;
    this.drift.forget();
    this.log.info('drift.retrust_seen', { epoch });
    for (const [name] of this.warm) {
      const u = this.pool.get(name);
      const cached = u && this.drift.cachedTools(u.config);
      if (u && cached) this.warm.set(name, await this.drift.verify(u.config, cached, { save: false }));
    }
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

  /** Recomputes the merged catalog; announces each list only if what clients would see of it changed. */
  rebuild(): void {
    const inputs = [];
    const surfaceInputs: SurfaceInput[] = [];
    for (const u of this.pool.upstreams) {
      let listing: VerifiedListing | undefined;
      if (u.state === 'ready' && u.verified) {
        listing = u.verified;
        this.warm.delete(u.name);
      } else listing = this.warm.get(u.name);
      if (!listing || listing.identityChanged) continue;
      // Drift covers tools, prompts and templates as one listing; split it back into its kinds.
      const trusted = splitDriftListing(listing.trusted);
      const quarantined = splitDriftListing(listing.quarantined);
      inputs.push({
        server: u.config,
        tools: trusted.tools,
        quarantined: quarantined.tools,
        removed: splitNames(listing.removed).tools,
      });
      surfaceInputs.push({
        server: u.config,
        prompts: trusted.prompts,
        quarantinedPrompts: quarantined.prompts,
        // Resources are data, not instructions: not drift-checked, and only served while live.
        resources: u.state === 'ready' ? u.resources : [],
        templates: trusted.templates,
        quarantinedTemplates: quarantined.templates,
      });
    }
    const g = this.config.gateway;
    const changed = new Set<ChangeKind>();
    const next = buildCatalog(inputs, this.catalog.version + 1, {
      maxDescriptionBytes: g.maxDescriptionBytes,
      maxSchemaBytes: g.maxSchemaBytes,
      reserved: this.reservedPrefixes,
    });
    if (next.signature !== this.catalog.signature) {
      for (const d of next.diagnostics) {
        const level = d.rule === 'name-collision' || d.rule === 'schema-too-large' ? 'error' : 'warn';
        this.log[level]('catalog.diagnostic', { ...d });
      }
      this.catalog = next;
      this.profileSet.rebuild(inputs, next.version);
      this.visibleCache.clear();
      changed.add('tools');
    }
    const surface = buildSurface(surfaceInputs, {
      maxDescriptionBytes: g.maxDescriptionBytes,
      reserved: this.reservedPrefixes,
    });
    if (surface.digests.prompts !== this.surface.digests.prompts) changed.add('prompts');
    if (surface.digests.resources !== this.surface.digests.resources) changed.add('resources');
    if (changed.has('prompts') || changed.has('resources')) {
      for (const d of surface.diagnostics) this.log.warn('catalog.diagnostic', { ...d });
      this.surface = surface;
    }
    if (changed.size === 0) return;
    for (const l of this.listeners) l(this.catalog, changed);
  }

  /** The catalog a principal's requests are served from: its profile's, or the gateway's. */
  catalogOf(principal: Principal): Catalog {
    return principal.profile === undefined ? this.catalog : this.profileSet.catalogOf(principal.profile);
  }

  /** The principal as served at `/mcp/<profile>` (profiles.ts): 404 unknown, 403 foreign. */
  profilePrincipal(principal: Principal, pathProfile: string | undefined): Principal {
    return this.profileSet.principal(principal, pathProfile);
  }

  /** What tools/list shows a principal, cached per catalog version (filter after the cache). */
  visibleEntries(principal: Principal): CatalogEntry[] {
    return this.visibility(principal).entries;
  }

  /**
   * The tools a search finds for this principal: only ones it may see, best first, at most
   * `limit` (its profile's or the gateway's searchLimit). The index is built once per catalog.
   */
  searchTools(principal: Principal, query: string, limit?: number): CatalogEntry[] {
    const view = this.visibility(principal);
    const max = this.profileSet.settingsOf(principal).searchLimit;
    const n = Math.min(max, limit ?? max);
    return indexOf(view.catalog).search(query, n, (name) => view.names.has(name));
  }

  /**
   * A digest of what a principal can see now: equal digests mean an unchanged list, so a change
   * it cannot see is never announced to it.
   */
  viewDigest(principal: Principal, kind: ChangeKind = 'tools'): string {
    if (kind !== 'tools') return this.views.digest(principal, kind);
    const view = this.visibility(principal);
    view.digest ??=
      view.entries === view.catalog.entries
        ? view.catalog.digest
        : digestOf(JSON.stringify(view.entries.map((e) => e.tool)));
    return view.digest;
  }

  private visibility(principal: Principal): View {
    const catalog = this.catalogOf(principal);
    const hit = this.visibleCache.get(principal.viewKey);
    if (hit && hit.catalog === catalog) return hit;
    let entries: CatalogEntry[];
    if (principal.grants === '*' && !principal.cap) entries = catalog.entries as CatalogEntry[];
    else {
      const granted = grantsMatcher(principal);
      const tools = catalog.entries.filter((e) => !e.meta && granted(e.name, e.risk));
      // Meta-tools are visible when anything is, and only ever reveal what the caller can see.
      entries = tools.length > 0 ? catalog.entries.filter((e) => e.meta || granted(e.name, e.risk)) : [];
    }
    const names = new Set(entries.map((e) => e.name));
    const view: View = { version: catalog.version, entries, names, catalog };
    const settings = this.profileSet.settingsOf(principal);
    const count = entries.reduce((n, e) => (e.meta ? n : n + 1), 0);
    if (count > 0 && (settings.mode === 'search' || count > settings.maxTools)) {
      if (settings.mode === 'full')
        this.profileSet.logSearchSwitch(principal, catalog, count, settings.maxTools);
      // Search mode: list the meta-tools and the pinned tools; everything visible stays callable.
      const metas = searchMetaEntries(settings.searchLimit);
      const pinned = compileGlobs(settings.pin);
      view.entries = [...metas, ...entries.filter((e) => !e.meta && pinned(e.name))];
      for (const m of metas) names.add(m.name);
      view.search = { metas: new Map(metas.map((m) => [m.name, m])), limit: settings.searchLimit };
    }
    if (this.visibleCache.size > 1000) this.visibleCache.clear();
    this.visibleCache.set(principal.viewKey, view);
    return view;
  }

  /** Whether this principal can see the exposed name (config filters, then grants). */
  isVisible(principal: Principal, name: string): boolean {
    return this.visibility(principal).names.has(name);
  }

  /** Resolves an exposed name for this principal; invisible and unknown fail identically (A13). */
  resolve(principal: Principal, name: unknown): CatalogEntry {
    const view = this.visibility(principal);
    const entry =
      typeof name === 'string' ? (view.catalog.byName.get(name) ?? view.search?.metas.get(name)) : undefined;
    if (!entry || !view.names.has(entry.name)) {
      const gone = typeof name === 'string' ? view.catalog.removed.get(name) : undefined;
      if (gone && this.mayKnow(principal, name as string)) {
        throw new ManifoldError(
          'ERR_TOOL_UNKNOWN',
          `tool ${name as string} is no longer published by server ${gone}`,
        );
      }
      throw new ManifoldError(
        'ERR_TOOL_UNKNOWN',
        `Unknown tool: ${typeof name === 'string' ? name.slice(0, 128) : ''}`,
      );
    }
    return entry;
  }

  /** Whether the principal's grants cover a name (for telling it a tool it may know was removed). */
  private mayKnow(principal: Principal, name: string): boolean {
    return (principal.grants === '*' && !principal.cap) || grantsMatcher(principal)(name);
  }

  async listTools(principal: Principal, cursor: unknown): Promise<ToolPage> {
    await this.ready;
    const sealer = await this.cursors;
    const catalog = this.catalogOf(principal);
    // Cursors name the catalog by its content, not this process's version counter, so another
    // instance serving the same catalog accepts them (any instance serves any modern request).
    const offset = cursor === undefined ? 0 : await sealer.open(cursor, catalog.digest, principal.viewKey);
    const visible = this.visibleEntries(principal);
    if (visible.length === 0 && offset === 0) this.assertSomeUpstreamUp(principal);
    const pageSize = this.config.gateway.pageSize;
    const page = visible.slice(offset, offset + pageSize);
    const out: ToolPage = { tools: page.map((e) => e.tool) };
    if (offset + pageSize < visible.length) {
      out.nextCursor = await sealer.seal(catalog.digest, offset + pageSize, principal.viewKey);
    }
    return out;
  }

  /**
   * The serialized result of prompts/list, resources/list or resources/templates/list for this
   * principal and cursor. Cursors are bound to the list, its content digest and the view.
   */
  async listSurfaceJson(
    kind: 'prompts' | 'resources' | 'templates',
    principal: Principal,
    cursor: unknown,
  ): Promise<string> {
    await this.ready;
    const sealer = await this.cursors;
    const surface = this.surface;
    const digest = `${kind}:${kind === 'prompts' ? surface.digests.prompts : surface.digests.resources}`;
    const items =
      kind === 'prompts'
        ? this.views.promptView(principal).entries.map((e) => e.prompt)
        : kind === 'resources'
          ? this.views.resourceView(principal).resources.map((e) => e.resource)
          : this.views.resourceView(principal).templates.map((e) => e.template);
    const offset = cursor === undefined ? 0 : await sealer.open(cursor, digest, principal.viewKey);
    const pageSize = this.config.gateway.pageSize;
    const field = kind === 'templates' ? 'resourceTemplates' : kind;
    const out: Record<string, unknown> = { [field]: items.slice(offset, offset + pageSize) };
    if (offset + pageSize < items.length)
      out.nextCursor = await sealer.seal(digest, offset + pageSize, principal.viewKey);
    return JSON.stringify(out);
  }

  /** The upstream that owns a server name, connected or waiting for its first attempt. */
  async owner(server: string): Promise<Upstream> {
    const owner = this.pool.get(server);
    if (!owner) throw new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', `server ${server} is not configured`);
    if (owner.state === 'connecting') await owner.firstAttempt;
    return owner;
  }

  /**
   * The upstream that serves this principal's request to a server: the shared one, or, for a
   * server with `isolation`, the principal's own instance (per tenant or per subject).
   */
  async callee(server: string, principal: Principal): Promise<Upstream> {
    const owner = await this.owner(server);
    if (owner.config.isolation === 'shared') return owner;
    return this.isolated.instance(owner.config, principal);
  }

  /**
   * The serialized tools/list result for this principal and cursor. Pages are cached per catalog
   * version and per view (grant set), so a repeated listing costs a lookup, not a serialization.
   */
  async listToolsJson(principal: Principal, cursor: unknown): Promise<string> {
    await this.ready;
    const key = `${principal.viewKey}\0${typeof cursor === 'string' ? cursor : ''}`;
    const version = this.catalog.version;
    const hit = cursor === undefined || typeof cursor === 'string' ? this.pageCache.get(key) : undefined;
    if (hit && hit.version === version) return hit.json;
    const json = JSON.stringify(await this.listTools(principal, cursor));
    if (this.pageCache.size >= 1000) this.pageCache.clear();
    this.pageCache.set(key, { version, json });
    return json;
  }

  /**
   * F2: when every upstream the caller may name failed, say which and why instead of answering an
   * empty list. Only servers its grants could reach are named (#13.4), each with a reason that
   * carries no upstream text (publicReason); a caller that may name none gets the empty list.
   */
  private assertSomeUpstreamUp(principal: Principal): void {
    const enabled = this.pool.upstreams.filter(
      (u) => u.state !== 'disabled' && mayNameServer(principal, u.config.prefix),
    );
    if (enabled.length === 0 || enabled.some((u) => u.state === 'ready')) return;
    const upstreams = enabled.map((u) => ({ name: u.name, state: u.state, error: u.lastError ?? u.state }));
    throw new ManifoldError(
      'ERR_ALL_UPSTREAMS_FAILED',
      `no upstream server is available: ${upstreams.map((u) => `${u.name} (${u.error})`).join('; ')}`,
      { data: { upstreams } },
    );
  }

  /** Tracks in-flight calls so that shutdown can drain them. */
  async track<T>(work: () => Promise<T>): Promise<T> {
    if (this.stopping) throw new ManifoldError('ERR_SHUTTING_DOWN', 'the gateway is shutting down');
    this.inflight++;
    try {
      return await work();
    } finally {
      this.inflight--;
      if (this.inflight === 0) this.drained?.();
    }
  }

  /** Calls relayed and not yet answered. */
  get inflightCalls(): number {
    return this.inflight;
  }

  get isStopping(): boolean {
    return this.stopping;
  }

  health(): Health {
    const upstreams = this.pool.status().map((u) => {
      const isolation = this.pool.get(u.name)?.config.isolation;
      return isolation && isolation !== 'shared'
        ? { ...u, isolation, instances: this.isolated.count(u.name) }
        : u;
    });
    const enabled = upstreams.filter((u) => u.state !== 'disabled');
    const ready = enabled.filter((u) => u.state === 'ready').length;
    let status: Health['status'];
    if (this.stopping) status = 'stopping';
    else if (enabled.some((u) => u.state === 'connecting') && ready === 0) status = 'starting';
    else if (ready === enabled.length) status = 'ok';
    else status = ready === 0 ? 'down' : 'degraded';
    return { status, version: this.version, upstreams, diagnostics: this.catalog.diagnostics };
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
    await Promise.allSettled([this.pool.close(), this.isolated.close()]);
    this.store.close?.();
  }
}
