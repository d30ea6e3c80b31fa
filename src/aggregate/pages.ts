/**
 * The gateway's lists a page at a time: tools/list per principal (pages cached per cut of the
 * view they are cut from) and the surface lists, behind cursors sealed to the list's content digest and the view,
 * so another instance serving the same catalog accepts them.
 */
import { LRUCache } from 'lru-cache';
import { mayNameServer } from '../auth/grants.js';
import { type Principal, shareKeyOf } from '../auth/principal.js';
import type { Config } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import type { UpstreamPool } from '../upstream/pool.js';
import type { Catalog, CatalogEntry } from './catalog.js';
import type { CursorSealer } from './cursor.js';
import type { Surface } from './surface.js';
import type { SurfaceViews } from './surface-views.js';
import type { ToolViews } from './tool-views.js';

interface ToolPage {
  entries: readonly CatalogEntry[];
  nextCursor?: string;
}

/**
 * The cached pages' text, at most: pages are per grant set, and a 10,000-tool page is 2.5 MB, so
 * a count alone (1,000 pages) would not bound their memory.
 */
export const PAGE_CACHE_CHARS = 64 * 1024 * 1024;

/** Each listed tool's JSON, serialized once per tool (#18): a page is the join of its tools'. */
const toolJson = new WeakMap<object, string>();

/** `JSON.stringify({ tools, nextCursor })` of a page, from its tools' own JSON. */
function pageJson(page: ToolPage): string {
  const parts = new Array<string>(page.entries.length);
  for (let i = 0; i < parts.length; i++) {
    const tool = page.entries[i]!.tool;
    let text = toolJson.get(tool);
    if (text === undefined) {
      text = JSON.stringify(tool);
      toolJson.set(tool, text);
    }
    parts[i] = text;
  }
  const next = page.nextCursor === undefined ? '' : `,"nextCursor":${JSON.stringify(page.nextCursor)}`;
  return `{"tools":[${parts.join(',')}]${next}}`;
}

/** What the pages are cut from: the gateway's current state. */
export interface PageSource {
  readonly ready: Promise<void>;
  readonly catalog: Catalog;
  readonly surface: Surface;
  readonly views: SurfaceViews;
  readonly config: Config;
  readonly pool: UpstreamPool;
}

export class ListPages {
  /** At most 1,000 pages and `maxChars` of text; a page over a quarter of that is served, not kept. */
  private readonly pageCache: LRUCache<string, { cut: number; json: string }>;

  constructor(
    private readonly g: PageSource,
    private readonly tools: ToolViews,
    private readonly cursors: Promise<CursorSealer>,
    maxChars = PAGE_CACHE_CHARS,
  ) {
    this.pageCache = new LRUCache({
      max: 1000,
      maxSize: maxChars,
      maxEntrySize: Math.floor(maxChars / 4),
      sizeCalculation: (page) => page.json.length,
    });
  }

  private async listTools(principal: Principal, cursor: unknown): Promise<ToolPage> {
    await this.g.ready;
    const sealer = await this.cursors;
    const catalog = this.tools.catalogOf(principal);
    // Cursors name the catalog by its content, not this process's version counter, so another
    // instance serving the same catalog accepts them (any instance serves any modern request).
    const offset = cursor === undefined ? 0 : await sealer.open(cursor, catalog.digest, principal.viewKey);
    const visible = this.tools.entries(principal);
    if (visible.length === 0 && offset === 0) this.assertSomeUpstreamUp(principal);
    const pageSize = this.g.config.gateway.pageSize;
    const out: ToolPage = { entries: visible.slice(offset, offset + pageSize) };
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
    await this.g.ready;
    const sealer = await this.cursors;
    const surface = this.g.surface;
    const digest = `${kind}:${kind === 'prompts' ? surface.digests.prompts : surface.digests.resources}`;
    const items =
      kind === 'prompts'
        ? this.g.views.promptView(principal).entries.map((e) => e.prompt)
        : kind === 'resources'
          ? this.g.views.resourceView(principal).resources.map((e) => e.resource)
          : this.g.views.resourceView(principal).templates.map((e) => e.template);
    const offset = cursor === undefined ? 0 : await sealer.open(cursor, digest, principal.viewKey);
    const pageSize = this.g.config.gateway.pageSize;
    const field = kind === 'templates' ? 'resourceTemplates' : kind;
    const out: Record<string, unknown> = { [field]: items.slice(offset, offset + pageSize) };
    if (offset + pageSize < items.length)
      out.nextCursor = await sealer.seal(digest, offset + pageSize, principal.viewKey);
    return JSON.stringify(out);
  }

  /**
   * The serialized tools/list result for this principal and cursor. Pages are cached per cut of
   * the view they come from, so a repeated listing costs a lookup, not a serialization. Not per
   * catalog version: a reload that changes only profiles or catalog settings recuts the views
   * from the same catalog, and a page kept by version would go on serving the old list (49.11). A first page without a
   * cursor is the same text for everyone who sees the same (its share key, #18); a page that ends
   * in a cursor, and every later one, is the caller's own, since cursors are sealed to its view key.
   */
  async listToolsJson(principal: Principal, cursor: unknown): Promise<string> {
    await this.g.ready;
    const own = `${principal.viewKey}\0${typeof cursor === 'string' ? cursor : ''}`;
    const shared = cursor === undefined ? `\u0001${shareKeyOf(principal)}` : undefined;
    const cacheable = cursor === undefined || typeof cursor === 'string';
    const cut = this.tools.cutOf(principal);
    const hit = cacheable
      ? ((shared === undefined ? undefined : this.pageCache.get(shared)) ?? this.pageCache.get(own))
      : undefined;
    if (hit && hit.cut === cut) return hit.json;
    const page = await this.listTools(principal, cursor);
    const json = pageJson(page);
    if (cacheable) {
      const key = shared !== undefined && page.nextCursor === undefined ? shared : own;
      this.pageCache.set(key, { cut, json });
    }
    return json;
  }

  /** Pages cached, and their text's length (for tests). */
  cacheSize(): { pages: number; chars: number } {
    return { pages: this.pageCache.size, chars: this.pageCache.calculatedSize };
  }

  /**
   * F2: when every upstream the caller may name failed, say which and why instead of answering an
   * empty list. Only servers its grants could reach are named (#13.4), each with a reason that
   * carries no upstream text (publicReason); a caller that may name none gets the empty list.
   */
  private assertSomeUpstreamUp(principal: Principal): void {
    const enabled = this.g.pool.upstreams.filter(
      (u) => u.state !== 'disabled' && mayNameServer(principal, u.config.prefix),
    );
    // An idle server (#53) is stopped while unused, not down: its verified catalog is served.
    if (enabled.length === 0 || enabled.some((u) => u.state === 'ready' || u.state === 'idle')) return;
    const upstreams = enabled.map((u) => ({ name: u.name, state: u.state, error: u.lastError ?? u.state }));
    throw new ManifoldError(
      'ERR_ALL_UPSTREAMS_FAILED',
      `no upstream server is available: ${upstreams.map((u) => `${u.name} (${u.error})`).join('; ')}`,
      { data: { upstreams } },
    );
  }
}
