import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/harness.js';

// docs/architecture.md is the map of the code (#48): it stays true, and it stays a page.
const map = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');

function folders(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = `${dir}/${name}`;
    return statSync(join(ROOT, path)).isDirectory() ? [path, ...folders(path)] : [];
  });
}

describe('docs/architecture.md', () => {
  it('names every folder under src/ and deploy/', () => {
    const missing = [...folders('src'), ...folders('deploy')].filter((f) => !map.includes(`${f}/`));
    expect(missing).toEqual([]);
  });

  it('is at most 700 lines, and README.md at most 12 KB', () => {
    expect(map.split('\n').length).toBeLessThanOrEqual(700);
    expect(statSync(join(ROOT, 'README.md')).size).toBeLessThanOrEqual(12 * 1024);
  });
});
