/**
 * Everything one upstream offers that the gateway aggregates: its tools, prompts, resources and
 * resource templates, each read through the same bounded discovery (pages, cursors, duplicates,
 * one deadline). Tools are the core: a failed tools listing fails the connection. The other kinds
 * fail soft: a server whose `resources/list` breaks keeps serving its tools, and keeps the last
 * good listing of that kind, with a warning.
 */
import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../lib/log.js';
import { brief } from './call-errors.js';
import { listAllItems } from './discovery.js';
import { LISTS, type Listing, type ListKind, type UpstreamSession } from './session.js';

export type { Listing };

export const ALL_KINDS: readonly ListKind[] = ['tools', 'prompts', 'resources', 'templates'];
export const emptyListing = (): Listing => ({ tools: [], prompts: [], resources: [], templates: [] });

const keys: Record<ListKind, (item: Record<string, unknown>) => string> = {
  tools: (t) => String(t.name),
  prompts: (p) => String(p.name),
  resources: (r) => String(r.uri),
  templates: (t) => String(t.uriTemplate),
};

/** Whether the server declared the capability a kind needs (tools, prompts, resources). */
export function offers(session: UpstreamSession, kind: ListKind): boolean {
  if (kind === 'tools') return session.hasTools;
  const cap = session.capabilities[LISTS[kind].capability];
  return typeof cap === 'object' && cap !== null;
}

/**
 * Lists `kinds` (all by default) and returns a complete listing: kinds not asked for, and kinds
 * whose listing failed (other than tools), keep what `previous` had.
 */
export async function listUpstream(
  session: UpstreamSession,
  gateway: GatewayConfig,
  log: Logger,
  previous: Listing = emptyListing(),
  kinds: readonly ListKind[] = ALL_KINDS,
): Promise<Listing> {
  const out: Listing = { ...previous };
  delete out.ttlMs;
  let ttlMs: number | undefined;
  await Promise.all(
    kinds.map(async (kind) => {
      if (!offers(session, kind)) {
        out[kind] = [] as never;
        return;
      }
      try {
        const items = await listAllItems<Record<string, unknown>>(
          async (cursor, signal) => {
            const page = await session.listPage(kind, cursor, signal);
            if (page.ttlMs !== undefined) ttlMs = Math.min(ttlMs ?? page.ttlMs, page.ttlMs);
            return {
              items: page.items.filter(isItem(kind)) as Record<string, unknown>[],
              nextCursor: page.nextCursor,
            };
          },
          {
            maxPages: gateway.maxListPages,
            deadlineMs: gateway.listTimeoutMs,
            maxTools: gateway.maxToolsPerServer,
          },
          { method: LISTS[kind].method, keyOf: keys[kind], noun: kind === 'tools' ? 'tool' : 'item' },
        );
        out[kind] = items as never;
        if (log.debugEnabled)
          log.debug('upstream.traffic', { method: LISTS[kind].method, items: items.length });
      } catch (e) {
        if (kind === 'tools') throw e;
        log.warn('upstream.list_failed', { list: LISTS[kind].method, error: brief(e) });
      }
    }),
  );
  if (ttlMs !== undefined) out.ttlMs = ttlMs;
  return out;
}

/** An item without its identifying field cannot be routed, so it is dropped at the edge. */
function isItem(kind: ListKind): (item: unknown) => boolean {
  const field = kind === 'resources' ? 'uri' : kind === 'templates' ? 'uriTemplate' : 'name';
  return (item) =>
    typeof item === 'object' && item !== null && typeof (item as Record<string, unknown>)[field] === 'string';
}
