/**
 * Per-principal views of the tool catalog: what a principal's tools/list shows, which names it may
 * call, its search mode, and its digest for list_changed. Cut from the cached catalog snapshot
 * (the gateway's, or its profile's) once per catalog and share key (what a principal sees, not who
 * it is: the same grants share one view), and filtered after the cache.
 */
import { LRUCache } from 'lru-cache';
import { grantsMatcher } from '../auth/grants.js';
import { type Principal, shareKeyOf } from '../auth/principal.js';
import { ManifoldError } from '../errors.js';
import { compileGlobs } from '../guards/glob.js';
import { callerViewInput, toolInput } from '../guards/policy/input.js';
import { NO_RULING, PolicyRules, type Ruling } from '../guards/policy/rules.js';
import { type Catalog, type CatalogEntry, digestOf } from './catalog.js';
import type { ProfileSet } from './profiles.js';
import { codeMetaEntries, RUN_CODE_NAME } from './run-code-tool.js';
import { indexOf, searchMetaEntries, ToolIndex } from './search.js';

interface View {
  version: number;
  /** This cut of the view, unique per ToolViews: what a page cut from it is valid for. */
  serial: number;
  /** What tools/list lists: every visible tool, or in search mode the meta-tools and pins. */
  entries: CatalogEntry[];
  /** Every name the principal may call: all visible tools, and the listed meta-tools. */
  names: Set<string>;
  /** The catalog it was cut from (the gateway's, or its profile's). */
  catalog: Catalog;
  /** Search mode: tools are found with manifold__search_tools; its meta entries by name. */
  search?: { metas: ReadonlyMap<string, CatalogEntry>; limit: number; code?: boolean };
  digest?: string;
  /** What the policy rules decided per visible tool (absent: no rule applies to any). */
  rulings?: Map<string, Ruling>;
  /** How many of the catalog's tools (meta entries aside) it sees, and whether that is all. */
  tools: number;
  seesAll: boolean;
}

/**
 * The views' names, at most, summed over the cached views: each view keeps a Set of what it may
 * call, and 1,000 views of a 10,000-tool catalog would otherwise hold ten million entries. A plain
 * Map, counted when a view is cut, not an LRUCache: every tools/call looks its view up.
 */
export const VIEW_CACHE_NAMES = 1_000_000;

/**
 * The tools indexed for search, at most, summed over the views' own indexes: an index costs far
 * more than a view's names, and one is rebuilt from its view when evicted (a cost, never a
 * different answer). A view that sees the whole catalog uses the catalog's index and counts here
 * for nothing.
 */
export const INDEX_CACHE_TOOLS = 50_000;

export class ToolViews {
  private readonly cache = new Map<string, View>();
  private cachedNames = 0;
  /** The last view's serial: every cut gets a new one, so no two cuts are ever mistaken. */
  private serial = 0;
  /** Search indexes of views that see part of their catalog, per share key (see indexOf). */
  private readonly indexes: LRUCache<string, { view: View; index: ToolIndex }>;

  constructor(
    private readonly current: () => Catalog,
    private readonly profiles: ProfileSet,
    private readonly maxNames = VIEW_CACHE_NAMES,
    maxIndexed = INDEX_CACHE_TOOLS,
    /** The config's policy rules (#51): those that read no arguments cut the view too. */
    private readonly policy: () => PolicyRules = () => PolicyRules.none,
  ) {
    this.indexes = new LRUCache({
      maxSize: maxIndexed,
      sizeCalculation: (hit) => Math.max(1, hit.view.tools),
    });
  }

  /** Forgets every view and its index (the catalog or the settings that cut views changed). */
  clear(): void {
    this.cache.clear();
    this.cachedNames = 0;
    this.indexes.clear();
  }

  /** The catalog a principal's requests are served from: its profile's, or the gateway's. */
  catalogOf(principal: Principal): Catalog {
    return principal.profile === undefined ? this.current() : this.profiles.catalogOf(principal.profile);
  }

  /** Views cached, and their names summed (for tests). */
  cacheSize(): { views: number; names: number } {
    return { views: this.cache.size, names: this.cachedNames };
  }

  /**
   * The cut of the principal's view its tools/list is served from now. It changes whenever the
   * view is cut again: a new catalog, and settings that cut views (profiles, catalog mode, pins)
   * changed by a reload even when the catalog did not, so a page kept under the old one is stale.
   */
  cutOf(principal: Principal): number {
    return this.view(principal).serial;
  }

  /** What tools/list shows a principal. */
  entries(principal: Principal): CatalogEntry[] {
    return this.view(principal).entries;
  }

  /** Search hits the principal may see, best first, at most `limit` (or its searchLimit). */
  search(principal: Principal, query: string, limit?: number): CatalogEntry[] {
    const view = this.view(principal);
    const max = this.profiles.settingsOf(principal).searchLimit;
    const n = Math.min(max, limit ?? max);
    return this.indexOf(principal, view).search(query, n, (name) => view.names.has(name));
  }

  /**
   * The index a view searches: over exactly the tools it sees, so what ranks its hits (how rare a
   * word is among the documents, how long they are on average) never counts a tool the caller
   * cannot see (49.9). A view that sees every tool of its catalog has the same documents as the
   * catalog, so it shares the catalog's index; any other view gets its own, built on its first
   * search and kept under its share key (a tenant's, never another's).
   */
  private indexOf(principal: Principal, view: View): ToolIndex {
    if (view.seesAll) return indexOf(view.catalog);
    const key = shareKeyOf(principal);
    const hit = this.indexes.get(key);
    if (hit && hit.view === view) return hit.index;
    const index = new ToolIndex(view.catalog.entries.filter((e) => !e.meta && view.names.has(e.name)));
    this.indexes.set(key, { view, index });
    return index;
  }

  /** A digest of the principal's tool list: equal digests, an unchanged list. */
  digest(principal: Principal): string {
    const view = this.view(principal);
    view.digest ??=
      view.entries === view.catalog.entries
        ? view.catalog.digest
        : digestOf(JSON.stringify(view.entries.map((e) => e.tool)));
    return view.digest;
  }

  /** What the view's policy rules decided for a visible tool; the per-call rules it left pending. */
  ruling(principal: Principal, entry: CatalogEntry): Ruling {
    return this.view(principal).rulings?.get(entry.name) ?? NO_RULING;
  }

  isVisible(principal: Principal, name: string): boolean {
    return this.view(principal).names.has(name);
  }

  /** Code mode (#50): whether the principal's view is in it. */
  codeMode(principal: Principal): boolean {
    return this.view(principal).search?.code === true;
  }

  /** Code mode: whether a program of the principal may call `name` (a visible upstream tool). */
  callable(principal: Principal, name: string): boolean {
    const view = this.view(principal);
    const entry = view.names.has(name) ? view.catalog.byName.get(name) : undefined;
    return entry !== undefined && entry.meta === undefined;
  }

  /** Code mode: every name a program of the principal may call. */
  callableNames(principal: Principal): string[] {
    const view = this.view(principal);
    return view.catalog.entries.filter((e) => !e.meta && view.names.has(e.name)).map((e) => e.name);
  }

  /** An exposed name for this principal; invisible and unknown fail identically (A13). */
  resolve(principal: Principal, name: unknown): CatalogEntry {
    const view = this.view(principal);
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

  private view(principal: Principal): View {
    const catalog = this.catalogOf(principal);
    const key = shareKeyOf(principal);
    const hit = this.cache.get(key);
    if (hit && hit.catalog === catalog) return hit;
    let entries: CatalogEntry[];
    let seesAll = true;
    const policy = this.policy();
    let rulings: Map<string, Ruling> | undefined;
    if (principal.grants === '*' && !principal.cap && policy.empty)
      entries = catalog.entries as CatalogEntry[];
    else {
      const granted = grantsMatcher(principal);
      let tools = catalog.entries.filter((e) => !e.meta && granted(e.name, e.risk));
      if (!policy.empty) {
        // Rules that read no arguments are decided here, once per share key (SECURITY I1).
        rulings = new Map();
        const kept: CatalogEntry[] = [];
        // The caller's part of the input is built once for the whole view.
        const caller = callerViewInput(principal, principal.profile, 'tools/call');
        for (const e of tools) {
          const ruling = policy.ruling(policy.chain(e.server, principal.profile), {
            ...caller,
            tool: toolInput(e),
          });
          if (ruling.hidden) continue;
          if (ruling !== NO_RULING) rulings.set(e.name, ruling);
          kept.push(e);
        }
        tools = kept;
      }
      const visible = new Set(tools);
      // Meta-tools are visible when anything is, and only ever reveal what the caller can see.
      entries = tools.length > 0 ? catalog.entries.filter((e) => e.meta || visible.has(e)) : [];
      seesAll = tools.length === catalog.entries.reduce((n, e) => (e.meta ? n : n + 1), 0);
    }
    const names = new Set(entries.map((e) => e.name));
    const count = entries.reduce((n, e) => (e.meta ? n : n + 1), 0);
    const view: View = {
      version: catalog.version,
      serial: ++this.serial,
      entries,
      names,
      catalog,
      tools: count,
      seesAll,
      ...(rulings && rulings.size > 0 ? { rulings } : {}),
    };
    const settings = this.profiles.settingsOf(principal);
    const code = settings.mode === 'code';
    if (count > 0 && (code || settings.mode === 'search' || count > settings.maxTools)) {
      if (settings.mode === 'full')
        this.profiles.logSearchSwitch(principal, catalog, count, settings.maxTools);
      // Search mode: list the meta-tools and the pinned tools; everything visible stays callable.
      // Code mode (#50): the run tool (if granted), search and describe; declarations in the run
      // tool's description while the view fits maxTools.
      const metas = code
        ? codeMetaEntries(
            settings.searchLimit,
            (principal.grants === '*' && !principal.cap) ||
              grantsMatcher(principal)(RUN_CODE_NAME, 'undeclared'),
            count <= settings.maxTools ? entries.filter((e) => !e.meta) : undefined,
          )
        : searchMetaEntries(settings.searchLimit);
      const pinned = compileGlobs(settings.pin);
      view.entries = [...metas, ...entries.filter((e) => !e.meta && pinned(e.name))];
      for (const m of metas) names.add(m.name);
      view.search = {
        metas: new Map(metas.map((m) => [m.name, m])),
        limit: settings.searchLimit,
        ...(code ? { code } : {}),
      };
    }
    const old = this.cache.get(key);
    if (old) this.cachedNames -= old.names.size;
    if (this.cache.size > 1000 || this.cachedNames + names.size > this.maxNames) this.clear();
    this.cache.set(key, view);
    this.cachedNames += names.size;
    return view;
  }
}
