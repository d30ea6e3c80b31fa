/**
 * Tool-name globs: `*` matches any run of characters (including none), `?` exactly one character,
 * everything else is literal. Matching is full-string and case-sensitive.
 *
 * A hand-written matcher rather than a translated RegExp: patterns come from config but names come
 * from upstreams, and a pattern like `*a*a*a*b` compiled to a backtracking regex can take
 * polynomial-to-exponential time on a hostile name. This one is O(name × pattern) worst case, and
 * there are no metacharacters to escape. Characters are code points, so `?` matches one emoji.
 */

/** Compiles one glob into a predicate. Nothing is cached across calls. */
export function compileGlob(pattern: string): (s: string) => boolean {
  const pat = Array.from(pattern);
  return function matchesGlob(s: string): boolean {
    return matchCodePoints(pat, Array.from(s));
  };
}

/** True when any pattern matches. An empty list matches nothing. */
export function compileGlobs(patterns: readonly string[]): (s: string) => boolean {
  const matchers = patterns.map(compileGlob);
  return function matchesAnyGlob(s: string): boolean {
    return matchers.some((m) => m(s));
  };
}

/**
 * Classic single-backtrack wildcard match: on a mismatch, resume just after the most recent `*`,
 * letting it swallow one more character. Only the latest `*` matters because anything an earlier
 * `*` could absorb, the later one can absorb too.
 */
function matchCodePoints(pat: readonly string[], str: readonly string[]): boolean {
  let p = 0;
  let s = 0;
  let starP = -1;
  let starS = 0;
  while (s < str.length) {
    const c = pat[p];
    if (c === '*') {
      starP = p++;
      starS = s;
    } else if (c !== undefined && (c === '?' || c === str[s])) {
      p++;
      s++;
    } else if (starP >= 0) {
      p = starP + 1;
      s = ++starS;
    } else {
      return false;
    }
  }
  while (pat[p] === '*') p++;
  return p === pat.length;
}
