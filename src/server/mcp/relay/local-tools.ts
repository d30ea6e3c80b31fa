import type { CatalogEntry } from '../../../aggregate/catalog.js';
import { DESCRIBE_MAX_NAMES } from '../../../aggregate/describe-tool.js';
import { MAX_QUERY_LENGTH, searchHit } from '../../../aggregate/search.js';
import type { Principal } from '../../../auth/principal.js';
import { ManifoldError } from '../../../errors.js';
import type { Gateway } from '../../../gateway/gateway.js';

type Result = Record<string, unknown>;

const errorResult = (text: string): Result => ({ content: [{ type: 'text', text }], isError: true });

/**
 * manifold__describe_tool: the full definitions of tools the caller can see. A tool the caller
 * cannot see and a tool that does not exist give the same answer (SECURITY A13).
 */
export function describeTool(gateway: Gateway, principal: Principal, args: Record<string, unknown>): Result {
  const requested: unknown[] =
    args.names !== undefined ? (Array.isArray(args.names) ? args.names : [args.names]) : [args.name];
  if (
    requested.length === 0 ||
    requested.length > DESCRIBE_MAX_NAMES ||
    requested.some((n) => typeof n !== 'string')
  ) {
    return errorResult(
      `Pass {"name": "<tool>"} or {"names": [...]} with 1 to ${DESCRIBE_MAX_NAMES} tool names.`,
    );
  }
  const found: CatalogEntry[] = [];
  for (const name of requested as string[]) {
    try {
      found.push(gateway.resolve(principal, name));
    } catch (e) {
      if (e instanceof ManifoldError) return errorResult(e.publicMessage);
      throw e;
    }
  }
  const tools = found.map((e) => {
    const { name, title, description, inputSchema, outputSchema, annotations } = e.full;
    return { name, title, description, inputSchema, outputSchema, annotations };
  });
  return {
    content: [{ type: 'text', text: JSON.stringify(tools.length === 1 ? tools[0] : tools, null, 2) }],
  };
}

/**
 * manifold__search_tools: the best matching tools the caller may see, as tools/list would show
 * them (a quarantined tool as its stub). Bounded query, bounded answer.
 */
export function searchTools(gateway: Gateway, principal: Principal, args: Record<string, unknown>): Result {
  const query = args.query;
  if (typeof query !== 'string' || query.trim() === '' || query.length > MAX_QUERY_LENGTH) {
    return errorResult(`Pass {"query": "<a few words>"} of 1 to ${MAX_QUERY_LENGTH} characters.`);
  }
  const limit = args.limit;
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1)) {
    return errorResult('limit must be a positive integer.');
  }
  const found = gateway.searchTools(principal, query, limit as number | undefined).map(searchHit);
  const text =
    found.length === 0
      ? `No tool matches ${JSON.stringify(query)}. Try other words.`
      : JSON.stringify(found, null, 1);
  return { content: [{ type: 'text', text }], structuredContent: { tools: found } };
}
