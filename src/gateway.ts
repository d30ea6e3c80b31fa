import { buildCatalog, type Catalog, type CatalogEntry, emptyCatalog } from './aggregate/catalog.js';
import { CursorSealer } from './aggregate/cursor.js';
import type { Principal } from './auth/principal.js';
import type { Config } from './config/types.js';
import { ManifoldError } from './errors.js';
import { compileGlobs } from './guards/glob.js';
import type { Logger } from './log.js';
import type { Platform } from './platform.js';
import { SessionTable } from './server/sessions.js';
import type { BackoffOptions } from './upstream/backoff.js';
import { UpstreamPool } from './upstream/pool.js';
import type { UpstreamStatus } from './upstream/upstream.js';

export interface GatewayOptions {
  config: Config;
  platform: Platform;
  version: string;
  backoff?: BackoffOptions;
  /** Shared by instances that must accept each other's cursors. Random per process otherwise. */
  cursorSecret?: Uint8Array;
}

export interface Health {
  status: 'ok' | 'degraded' | 'down' | 'starting' | 'stopping';
  version: string;
  upstreams: UpstreamStatus[];
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
  readonly sessions: SessionTable;
  readonly log: Logger;
  catalog: Catalog = emptyCatalog;
  /** Settles when every upstream's first attempt has settled. */
  ready: Promise<void> = Promise.resolve();
  private started = false;
  private stopping = false;
  private inflight = 0;
  private drained: (() => void) | undefined;
  private cursors: Promise<CursorSealer>;
  private visibleCache = new Map<string, { version: number; entries: CatalogEntry[] }>();
  /** Listeners for a verified catalog change (downstream list_changed). */
  private listeners = new Set<(catalog: Catalog) => void>();

  constructor(options: GatewayOptions) {
    this.config = options.config;
    this.platform = options.platform;
    this.version = options.version;
    this.log = options.platform.log;
    this.sessions = new SessionTable({
      max: options.config.gateway.maxSessions,
      idleSeconds: options.config.gateway.sessionIdleSeconds,
    });
    this.pool = new UpstreamPool(options.config, {
      platform: options.platform,
      log: options.platform.log,
      clientVersion: options.version,
      ...(options.backoff ? { backoff: options.backoff } : {}),
    });
    this.pool.onChange = () => this.rebuild();
    this.cursors = CursorSealer.create(options.cursorSecret);
  }

  /** Connects every upstream in parallel. Resolves when each first attempt has settled. */
  start(): Promise<void> {
    if (!this.started) {
      this.started = true;
      this.ready = this.pool.start().then(() => {
        this.log.info('gateway.catalog', {
          tools: this.catalog.entries.length,
          version: this.catalog.version,
        });
      });
    }
    return this.ready;
  }

  onCatalogChange(listener: (catalog: Catalog) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Recomputes the merged catalog; announces it only if what clients would see changed. */
  rebuild(): void {
    const inputs = this.pool.upstreams
      .filter((u) => u.state === 'ready')
      .map((u) => ({ server: u.config, tools: u.tools }));
    const next = buildCatalog(inputs, this.catalog.version + 1);
    for (const c of next.collisions) {
      this.log.error('catalog.name_collision', {
        rule: 'name-collision',
        name: c.name,
        kept: c.kept.server,
        dropped: c.dropped.server,
        fix: `give server ${c.dropped.server} a prefix`,
      });
    }
    if (next.signature === this.catalog.signature) return;
    this.catalog = next;
    this.visibleCache.clear();
    for (const l of this.listeners) l(next);
  }

  /** The entries a principal may see, cached per catalog version (filter after the cache). */
  visibleEntries(principal: Principal): CatalogEntry[] {
    const catalog = this.catalog;
    const hit = this.visibleCache.get(principal.key);
    if (hit && hit.version === catalog.version) return hit.entries;
    let entries: CatalogEntry[];
    if (principal.grants === '*') entries = catalog.entries as CatalogEntry[];
    else {
      const granted = compileGlobs(principal.grants);
      entries = catalog.entries.filter((e) => granted(e.name));
    }
    if (this.visibleCache.size > 1000) this.visibleCache.clear();
    this.visibleCache.set(principal.key, { version: catalog.version, entries });
    return entries;
  }

  /** Resolves an exposed name for this principal; invisible and unknown fail identically (A13). */
  resolve(principal: Principal, name: unknown): CatalogEntry {
    const entry = typeof name === 'string' ? this.catalog.byName.get(name) : undefined;
    if (!entry || !this.isVisible(principal, entry)) {
      throw new ManifoldError(
        'ERR_TOOL_UNKNOWN',
        `Unknown tool: ${typeof name === 'string' ? name.slice(0, 128) : ''}`,
      );
    }
    return entry;
  }

  private isVisible(principal: Principal, entry: CatalogEntry): boolean {
    return principal.grants === '*' || compileGlobs(principal.grants)(entry.name);
  }

  async listTools(principal: Principal, cursor: unknown): Promise<ToolPage> {
    await this.ready;
    const sealer = await this.cursors;
    const catalog = this.catalog;
    const offset = cursor === undefined ? 0 : await sealer.open(cursor, catalog.version, principal.key);
    const visible = this.visibleEntries(principal);
    if (visible.length === 0 && offset === 0) this.assertSomeUpstreamUp();
    const pageSize = this.config.gateway.pageSize;
    const page = visible.slice(offset, offset + pageSize);
    const out: ToolPage = { tools: page.map((e) => e.tool) };
    if (offset + pageSize < visible.length) {
      out.nextCursor = await sealer.seal(catalog.version, offset + pageSize, principal.key);
    }
    return out;
  }

  /** F2: when every upstream failed, say which and why instead of answering an empty list. */
  private assertSomeUpstreamUp(): void {
    const enabled = this.pool.upstreams.filter((u) => u.state !== 'disabled');
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

  get isStopping(): boolean {
    return this.stopping;
  }

  health(): Health {
    const upstreams = this.pool.status();
    const enabled = upstreams.filter((u) => u.state !== 'disabled');
    const ready = enabled.filter((u) => u.state === 'ready').length;
    let status: Health['status'];
    if (this.stopping) status = 'stopping';
    else if (enabled.some((u) => u.state === 'connecting') && ready === 0) status = 'starting';
    else if (ready === enabled.length) status = 'ok';
    else status = ready === 0 ? 'down' : 'degraded';
    return { status, version: this.version, upstreams };
  }

  /** Stop accepting calls, let in-flight ones finish within `graceMs`, then close everything. */
  async close(graceMs = this.config.gateway.shutdownGraceMs): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    if (this.inflight > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.drained = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.sessions.clear();
    await this.pool.close();
  }
}
