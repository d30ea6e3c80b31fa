/**
 * Tool search for catalogs too big to list (#17). In search mode tools/list holds the gateway's
 * meta-tools (this file: `manifold__search_tools`, `manifold__call_tool`; and
 * `manifold__describe_tool`) and the pinned tools; the rest are found by a ranked search.
 *
 * - The index (BM25 via MiniSearch, plain JS, so it runs on Workers) holds exactly the tools a
 *   caller sees, built lazily on its first search: BM25 weighs a word by how rare it is among the
 *   indexed documents, so an index holding tools the caller cannot see would rank by them, and
 *   let it learn which words they use. A view that sees a whole catalog snapshot shares that
 *   snapshot's index (`indexOf`); any narrower one gets its own (tool-views.ts).
 * - A quarantined tool is indexed as its stub (name and the quarantine notice): it can be found,
 *   never described by the drifted text.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import MiniSearch from 'minisearch';
import { DESCRIBE_TOOL_NAME } from '../guards/disclosure.js';
import type { Catalog, CatalogEntry } from './catalog.js';
import { describeToolDefinition } from './describe-tool.js';

export const SEARCH_TOOL_NAME = 'manifold__search_tools';
export const CALL_TOOL_NAME = 'manifold__call_tool';
/** A query longer than this is refused: a model needs a few words, not a document. */
export const MAX_QUERY_LENGTH = 256;

interface Doc {
  id: string;
  name: string;
  title: string;
  description: string;
  params: string;
}

/** `github__list_pull_requests` or `getPullRequest` -> "github list pull requests" / "get pull request". */
export function nameWords(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[_\-./:]+/g, ' ')
    .toLowerCase()
    .trim();
}

function paramsOf(tool: Tool): string {
  const props = (tool.inputSchema as { properties?: unknown } | undefined)?.properties;
  if (typeof props !== 'object' || props === null) return '';
  return Object.keys(props)
    .slice(0, 64)
    .map((k) => nameWords(k))
    .join(' ');
}

/** A search index over one catalog snapshot's tools. */
export class ToolIndex {
  private readonly index: MiniSearch<Doc>;
  private readonly byName: ReadonlyMap<string, CatalogEntry>;

  constructor(entries: readonly CatalogEntry[]) {
    this.index = new MiniSearch<Doc>({
      fields: ['name', 'title', 'description', 'params'],
      storeFields: [],
      searchOptions: {
        boost: { name: 3, title: 2, description: 1, params: 0.5 },
        prefix: (term) => term.length >= 3,
        fuzzy: (term) => (term.length >= 5 ? 0.2 : false),
        combineWith: 'OR',
      },
    });
    const tools = entries.filter((e) => !e.meta);
    this.index.addAll(
      tools.map((e) => ({
        id: e.name,
        name: nameWords(e.name),
        title: typeof e.tool.title === 'string' ? e.tool.title : '',
        description: typeof e.tool.description === 'string' ? e.tool.description : '',
        // The full schema's parameter names (a quarantined tool's stub has none).
        params: paramsOf(e.full),
      })),
    );
    this.byName = new Map(tools.map((e) => [e.name, e]));
  }

  /**
   * The best `limit` tools for `query` among those `visible` says the caller may see. The index
   * should hold only those (see above): the filter keeps a result out, not its words' weight.
   */
  search(query: string, limit: number, visible: (name: string) => boolean): CatalogEntry[] {
    const hits = this.index.search(query, { filter: (r) => visible(r.id as string) });
    const out: CatalogEntry[] = [];
    for (const hit of hits) {
      const entry = this.byName.get(hit.id as string);
      if (entry) out.push(entry);
      if (out.length >= limit) break;
    }
    return out;
  }
}

const indexes = new WeakMap<Catalog, ToolIndex>();

/**
 * The index of a whole catalog snapshot, built on first use and kept as long as the snapshot: for
 * callers that see every tool in it.
 */
export function indexOf(catalog: Catalog): ToolIndex {
  let index = indexes.get(catalog);
  if (!index) {
    index = new ToolIndex(catalog.entries);
    indexes.set(catalog, index);
  }
  return index;
}

export function searchToolDefinition(limit: number): Tool {
  return {
    name: SEARCH_TOOL_NAME,
    title: 'Search tools',
    description:
      'Finds tools by what they do. This gateway has more tools than it lists: search before saying a tool does not exist. ' +
      `Returns up to ${limit} tools with their names, descriptions and input schemas; call one with ${CALL_TOOL_NAME} ` +
      `(or by its name, where the client allows it), and get a shortened schema in full with ${DESCRIBE_TOOL_NAME}.`,
    inputSchema: {
      type: 'object',
      properties: {
        query: {
          type: 'string',
          maxLength: MAX_QUERY_LENGTH,
          description: 'A few words about the task, e.g. "create a github issue".',
        },
        limit: { type: 'integer', minimum: 1, maximum: limit, description: `At most ${limit}.` },
      },
      required: ['query'],
    },
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  };
}

export function callToolDefinition(): Tool {
  return {
    name: CALL_TOOL_NAME,
    title: 'Call a tool',
    description: `Calls a tool found with ${SEARCH_TOOL_NAME}, by its exact name, with its arguments.`,
    inputSchema: {
      type: 'object',
      properties: {
        name: { type: 'string', description: 'The exact tool name from the search results.' },
        arguments: { type: 'object', description: "The tool's arguments, as its input schema says." },
      },
      required: ['name'],
    },
  };
}

/** The meta entries of a search-mode view (never in a catalog; resolved only in such a view). */
export function searchMetaEntries(limit: number): CatalogEntry[] {
  const meta = (tool: Tool, kind: NonNullable<CatalogEntry['meta']>): CatalogEntry => ({
    name: tool.name,
    server: 'manifold',
    original: tool.name,
    tool,
    full: tool,
    deferred: false,
    meta: kind,
    risk: kind === 'call_tool' ? 'undeclared' : 'read',
    approval: 'allow',
  });
  return [
    meta(searchToolDefinition(limit), 'search_tools'),
    meta(callToolDefinition(), 'call_tool'),
    meta(describeToolDefinition(), 'describe_tool'),
  ];
}

/** What a search answers for one tool: what tools/list would have shown of it. */
export function searchHit(e: CatalogEntry): Record<string, unknown> {
  const t = e.tool;
  return {
    name: e.name,
    ...(t.title !== undefined ? { title: t.title } : {}),
    ...(t.description !== undefined ? { description: t.description } : {}),
    inputSchema: t.inputSchema,
    ...(e.deferred ? { schemaShortened: true } : {}),
    ...(e.quarantined ? { quarantined: true } : {}),
    ...(t._meta ? { _meta: t._meta } : {}),
  };
}
