/**
 * Which servers belong in a tenant's status view (#16) when they list nothing it can see right
 * now: a server that is down lists nothing, yet its tenant should see that it is down. A server is
 * the tenant's when its grants (and its tenant's cap) reach the server's namespace: some name
 * `<prefix>__…` could match them. Only state, errors and counts are shown for such a row, never
 * tool text.
 */
import type { Principal } from '../../../auth/principal.js';
import type { ServerConfig } from '../../../config/types.js';
import { compileGlob } from '../../../guards/glob.js';

const KIND_PREFIXES = ['tools:', 'prompts:', 'resources:'];

/**
 * Whether the glob matches some string that starts with `ns`: exactly when some prefix of the
 * pattern matches `ns` whole (the rest of the pattern can always match something).
 *
 * @example
 * globReaches('github__get_*', 'github__'); // true
 * globReaches('g?x__*', 'fx__'); // false
 */
export function globReaches(pattern: string, ns: string): boolean {
  const points = Array.from(pattern);
  for (let end = 0; end <= points.length; end++) {
    if (compileGlob(points.slice(0, end).join(''))(ns)) return true;
  }
  return false;
}

/** Whether one grant list (token grants or a tenant cap) reaches the namespace. */
function listReaches(patterns: readonly string[], ns: string): boolean {
  return patterns.some((raw) => {
    // A risk-class grant (`risk:read`) covers tools of that class on every server.
    if (raw.startsWith('risk:')) return true;
    const kind = KIND_PREFIXES.find((k) => raw.startsWith(k));
    return globReaches(kind ? raw.slice(kind.length) : raw, ns);
  });
}

/** Whether this principal's grants, its cap and its profile reach the server's names. */
export function reachesServer(principal: Principal, server: ServerConfig): boolean {
  if (principal.servers && !principal.servers.has(server.name)) return false;
  // Unprefixed servers publish bare names: any grant may reach them.
  if (server.prefix === false) return principal.grants === '*' || principal.grants.length > 0;
  const ns = `${server.prefix}__`;
  const granted = principal.grants === '*' || listReaches(principal.grants, ns);
  return granted && (principal.cap === undefined || listReaches(principal.cap, ns));
}
