import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The docs stay true to the tree: every code path a page cites (`src/…`, `deploy/…`, `test/…`)
 * exists, so does every module it names by file name alone (`stdio.ts`), and every
 * `page.md#anchor` link names a heading that the page has.
 */

/** The pages checked: the docs folder, decision records included, and the README. */
function pages(dir = 'docs'): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) return pages(p);
    return p.endsWith('.md') ? [p] : [];
  });
}
const PAGES = [...pages(), 'README.md'];

/** Paths a reader creates (git-ignored), which a page may name but the tree never holds. */
const CREATED_BY_THE_READER = new Set(['deploy/workers/.dev.vars']);

/** A cited path: starts a word, then path characters, with `{a,b}` alternatives allowed. */
const CITED = /(?<![\w./:@-])((?:src|deploy|test)\/(?:[\w.\-/*]|\{[\w.,-]*\})+)/g;

/** `a/{b,c}.ts` -> `a/b.ts`, `a/c.ts`. */
function expand(path: string): string[] {
  const m = /\{([^}]*)\}/.exec(path);
  if (!m) return [path];
  const head = path.slice(0, m.index);
  const tail = path.slice(m.index + m[0].length);
  return m[1]!.split(',').flatMap((alt) => expand(`${head}${alt}${tail}`));
}

/** Whether a cited path names something in the tree (a glob: its fixed directory does). */
function exists(path: string): boolean {
  const star = path.indexOf('*');
  if (star !== -1) return existsSync(path.slice(0, path.lastIndexOf('/', star) + 1) || '.');
  return existsSync(path);
}

function citedPaths(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(CITED)) {
    // Sentence punctuation after a path in prose is not part of it.
    const path = m[1]!.replace(/[.,;:]+$/, '');
    out.push(...expand(path));
  }
  return out;
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const h = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (!h) continue;
    const base = h[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

describe('docs', () => {
  it('every src/, deploy/ and test/ path a page cites exists', () => {
    const missing: string[] = [];
    for (const page of PAGES) {
      for (const path of citedPaths(readFileSync(page, 'utf8'))) {
        if (!CREATED_BY_THE_READER.has(path) && !exists(path)) missing.push(`${page}: ${path}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every module a page names by file name alone is one the tree holds', () => {
    // `stdio.ts` or `runtime/stdio.ts` in backticks: the end of some tracked file's path. Paths
    // from the root are the test above's; other names (`jwks.json`, URLs) are the reader's own.
    const tracked = execFileSync('git', ['ls-files'], { encoding: 'utf8' }).trim().split('\n');
    const missing: string[] = [];
    for (const page of PAGES) {
      for (const m of readFileSync(page, 'utf8').matchAll(/`([\w./-]+\.ts)`/g)) {
        const name = m[1]!;
        if (/^(src|deploy|test)\//.test(name)) continue;
        if (!tracked.some((f) => f === name || f.endsWith(`/${name}`))) missing.push(`${page}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every anchor a link between pages names is a heading of its page', () => {
    // That the page itself exists is repo-hygiene.test.ts's check, for all committed Markdown.
    const broken: string[] = [];
    for (const page of PAGES) {
      const text = readFileSync(page, 'utf8');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = m[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(link) || !link.includes('#')) continue; // https:, mailto:
        const [file, anchor] = link.split('#') as [string, string];
        const target = file === '' ? page : normalize(join(dirname(page), file));
        if (!target.endsWith('.md') || !existsSync(target)) continue;
        if (!anchorsOf(readFileSync(target, 'utf8')).has(anchor)) {
          broken.push(`${page}: ${link} (no heading #${anchor} in ${target})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
