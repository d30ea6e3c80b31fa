/**
 * What a stored row means, read column by column: one parser for every store (memory, SQLite,
 * Durable Object, Postgres), so they cannot disagree on what a row says.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { isObject } from '../lib/json.js';
import type { Baseline, ServerRow } from './state.js';

/** One row as stored, columns unchecked: the file may have been written by anything. */
export interface RawRow {
  name: unknown;
  transport: unknown;
  target: unknown;
  catalog: unknown;
  catalog_at: unknown;
  baseline: unknown;
  trusted_at: unknown;
  created_at: unknown;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

function isTool(v: unknown): v is Tool {
  return isObject(v) && typeof v.name === 'string' && isObject(v.inputSchema);
}

function parseJson(text: unknown): unknown {
  if (typeof text !== 'string') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function parseCatalog(text: unknown): Tool[] | undefined {
  const v = parseJson(text);
  return Array.isArray(v) && v.every(isTool) ? v : undefined;
}

const HINTS = ['readOnlyHint', 'destructiveHint', 'openWorldHint'] as const;

function parseBaseline(text: unknown): Baseline | undefined {
  const v = parseJson(text);
  if (!isObject(v)) return undefined;
  for (const entry of Object.values(v)) {
    if (!isObject(entry) || typeof entry.fingerprint !== 'string' || !isTool(entry.tool)) return undefined;
    const hints = entry.hints;
    if (!isObject(hints) || HINTS.some((h) => hints[h] !== undefined && typeof hints[h] !== 'boolean')) {
      return undefined;
    }
  }
  return v as Baseline;
}

/** The one reader, shared by both stores so they cannot disagree on what a row means. */
export function parseRow(raw: { readonly [K in keyof RawRow]?: unknown }): ServerRow {
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  const row: ServerRow = {
    identity: { name: str(raw.name), transport: str(raw.transport), target: str(raw.target) },
    createdAt: num(raw.created_at) ?? 0,
  };
  // The catalog is a cache: unparsable means absent, and the server is listed afresh.
  const catalog = parseCatalog(raw.catalog);
  if (catalog) {
    row.catalog = catalog;
    const at = num(raw.catalog_at);
    if (at !== undefined) row.catalogAt = at;
  }
  if (raw.baseline !== null && raw.baseline !== undefined) {
    const baseline = parseBaseline(raw.baseline);
    if (baseline) row.baseline = baseline;
    else row.baselineUnreadable = true;
    const at = num(raw.trusted_at);
    if (at !== undefined) row.trustedAt = at;
  }
  return row;
}
