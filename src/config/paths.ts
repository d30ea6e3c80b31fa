/** Config paths as written in issues: `mcpServers.everything.args[2]`. */

export type PathSegment = string | number;

const BARE_KEY = /^[A-Za-z0-9_$-]+$/;

/** `mcpServers.everything.args[2]`; keys with dots or odd characters become `["a.b"]`. */
export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (BARE_KEY.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}
