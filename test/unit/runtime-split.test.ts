import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

// The core must run on Workers too: nothing under src/ may reach for Node (ARCHITECTURE.md).
const NODE_ONLY = [
  /^node:/,
  /^(fs|path|child_process|net|http|https|os|crypto|stream|url|util)$/,
  /^better-sqlite3/,
  /^undici/,
  /^@hono\/node-server/,
  /^cloudflare:/,
];

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('runtime split', () => {
  it('no module under src/ imports node:*, cloudflare:* or a Node-only package', () => {
    const offenders: string[] = [];
    for (const f of files('src')) {
      const text = readFileSync(f, 'utf8');
      for (const m of text.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
        const spec = m[1]!;
        if (NODE_ONLY.some((r) => r.test(spec))) offenders.push(`${f}: ${spec}`);
      }
      if (/\bprocess\.(env|argv|exit)|\bBuffer\.|require\(/.test(text))
        offenders.push(`${f}: uses a Node global`);
    }
    expect(offenders).toEqual([]);
  });
});
