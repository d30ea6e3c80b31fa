import { compileGlobs } from './glob.js';

/** Per-server tool visibility, as globs over the upstream's own tool names. */
export interface ToolFilterOptions {
  /** Absent: everything not denied is visible. Empty: nothing is visible. */
  allow?: readonly string[];
  /** Always wins over `allow`. */
  deny?: readonly string[];
}

/**
 * Builds a predicate deciding whether an upstream tool is visible through the gateway. Globs are
 * compiled once here, so the returned function is cheap to call per tool and per listing.
 * Deny wins, so a broad allow can never re-expose a tool an operator explicitly hid.
 *
 * @example
 * const isVisible = toolFilter({ allow: ['read_*', 'search'], deny: ['read_secret*'] });
 * isVisible('read_file'); // true
 * isVisible('read_secrets'); // false: deny wins
 * isVisible('write_file'); // false: not allowed
 * toolFilter({ deny: ['delete_*'] })('write_file'); // true: no allow list means all
 */
export function toolFilter(options: ToolFilterOptions): (toolName: string) => boolean {
  const isDenied = compileGlobs(options.deny ?? []);
  // `allow: []` is a deliberate "expose nothing", distinct from leaving allow out.
  const isAllowed = options.allow === undefined ? () => true : compileGlobs(options.allow);
  return function isToolVisible(name: string): boolean {
    return !isDenied(name) && isAllowed(name);
  };
}
