/**
 * Where `gateway.statusPath` may point (#16). The page, its JSON view and its assets sit at and
 * under this path, so it must leave the gateway's own endpoints alone: an operator who writes
 * "/mcp" would otherwise hide the MCP endpoint behind a status page, or the reverse.
 */

/** Paths the gateway serves itself; the status page may be neither one of them nor under one. */
export const RESERVED_PATHS = ['/mcp', '/healthz', '/metrics', '/.well-known'] as const;

/** Letters, digits and `-._~` between slashes: nothing a URL would have to encode. */
const SEGMENTS = /^\/(?:[A-Za-z0-9._~-]+\/?)*$/;

/**
 * The path as it is served (a trailing slash dropped, except for "/"), or what is wrong with it.
 *
 * @example
 * statusPathProblem('/status/'); // { path: '/status' }
 * statusPathProblem('/mcp/ops'); // { problem: 'is under /mcp, which the gateway serves itself' }
 */
export function statusPathProblem(raw: string): { path: string } | { problem: string } {
  if (!raw.startsWith('/')) return { problem: 'must start with "/"' };
  if (!SEGMENTS.test(raw) || raw.split('/').some((s) => s === '.' || s === '..')) {
    return { problem: 'must be "/" or path segments of letters, digits, "-", ".", "_" and "~"' };
  }
  const path = raw.length > 1 && raw.endsWith('/') ? raw.slice(0, -1) : raw;
  const lower = path.toLowerCase();
  for (const reserved of RESERVED_PATHS) {
    if (lower === reserved) return { problem: `is ${reserved}, which the gateway serves itself` };
    if (lower.startsWith(`${reserved}/`)) {
      return { problem: `is under ${reserved}, which the gateway serves itself` };
    }
  }
  return { path };
}
