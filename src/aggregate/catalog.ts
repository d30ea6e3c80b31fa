import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import { toolFilter } from '../guards/filters.js';
import { assignNames, type NameCollision, type NameRequest } from './names.js';

/** One tool as the gateway exposes it. `tool` is what clients see; `original` is what upstream knows. */
export interface CatalogEntry {
  name: string;
  server: string;
  original: string;
  tool: Tool;
}

export interface CatalogInput {
  server: ServerConfig;
  tools: readonly Tool[];
}

/**
 * An immutable merged view over every ready upstream. A request reads one snapshot from start
 * to end, so a listing that changes mid-request can never mix two catalogs.
 */
export interface Catalog {
  version: number;
  entries: readonly CatalogEntry[];
  byName: ReadonlyMap<string, CatalogEntry>;
  collisions: readonly NameCollision[];
  /** Equal signatures mean clients would see exactly the same list. */
  signature: string;
}

export const emptyCatalog: Catalog = {
  version: 0,
  entries: [],
  byName: new Map(),
  collisions: [],
  signature: '[]',
};

/**
 * Merges upstream listings in config order, each server's tools sorted by their upstream name,
 * so the merged order is deterministic whatever order the upstreams answer in.
 */
export function buildCatalog(inputs: readonly CatalogInput[], version: number): Catalog {
  const requests: NameRequest[] = [];
  const tools: { server: string; tool: Tool }[] = [];
  for (const { server, tools: listed } of inputs) {
    const visible = toolFilter(server.tools);
    const sorted = listed.filter((t) => visible(t.name)).sort((a, b) => compare(a.name, b.name));
    for (const tool of sorted) {
      requests.push({ server: server.name, prefix: server.prefix, tool: tool.name });
      tools.push({ server: server.name, tool });
    }
  }
  const { names, collisions } = assignNames(requests);
  const entries: CatalogEntry[] = [];
  const byName = new Map<string, CatalogEntry>();
  names.forEach((name, i) => {
    const src = tools[i]!;
    if (name === null) return;
    const entry: CatalogEntry = {
      name,
      server: src.server,
      original: src.tool.name,
      tool: { ...src.tool, name },
    };
    entries.push(entry);
    byName.set(name, entry);
  });
  return { version, entries, byName, collisions, signature: JSON.stringify(entries.map((e) => e.tool)) };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
