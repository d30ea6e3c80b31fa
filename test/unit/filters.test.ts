import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { toolFilter } from '../../src/guards/filters.js';
import { compileGlob, compileGlobs } from '../../src/guards/glob.js';

describe('compileGlob', () => {
  it('matches literals exactly and in full', () => {
    const m = compileGlob('read_file');
    expect(m('read_file')).toBe(true);
    expect(m('read_files')).toBe(false);
    expect(m('xread_file')).toBe(false);
    expect(m('')).toBe(false);
  });

  it('lets * match any run, including an empty one', () => {
    const m = compileGlob('read_*');
    expect(m('read_')).toBe(true);
    expect(m('read_file')).toBe(true);
    expect(m('read')).toBe(false);
    expect(compileGlob('*')('')).toBe(true);
    expect(compileGlob('*')('anything at all')).toBe(true);
    expect(compileGlob('a*b*c')('abc')).toBe(true);
    expect(compileGlob('a*b*c')('a_b_b_c')).toBe(true);
    expect(compileGlob('a*b*c')('a_b_c_')).toBe(false);
    expect(compileGlob('**x')('x')).toBe(true);
  });

  it('lets ? match exactly one character', () => {
    const m = compileGlob('v?');
    expect(m('v1')).toBe(true);
    expect(m('v')).toBe(false);
    expect(m('v12')).toBe(false);
    expect(compileGlob('?')('😀')).toBe(true);
    expect(compileGlob('??')('😀')).toBe(false);
  });

  it('treats regex metacharacters literally', () => {
    expect(compileGlob('a.b')('a.b')).toBe(true);
    expect(compileGlob('a.b')('axb')).toBe(false);
    expect(compileGlob('a+')('a+')).toBe(true);
    expect(compileGlob('a+')('aa')).toBe(false);
    expect(compileGlob('f(x)')('f(x)')).toBe(true);
    expect(compileGlob('f(x)')('fx')).toBe(false);
    expect(compileGlob('[ab]')('[ab]')).toBe(true);
    expect(compileGlob('[ab]')('a')).toBe(false);
    expect(compileGlob('^$|\\{1}')('^$|\\{1}')).toBe(true);
    expect(compileGlob('a|b')('a')).toBe(false);
  });

  it('is case-sensitive', () => {
    expect(compileGlob('Read*')('read_file')).toBe(false);
    expect(compileGlob('Read*')('Read_file')).toBe(true);
  });

  it('stays fast on patterns that make backtracking regexes explode', () => {
    const m = compileGlob(`${'*a'.repeat(20)}*b`);
    const start = Date.now();
    expect(m('a'.repeat(5000))).toBe(false);
    expect(Date.now() - start).toBeLessThan(1000);
  });

  it('agrees with a reference regex translation', () => {
    const esc = (c: string) => c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const toRegex = (p: string) =>
      new RegExp(`^${Array.from(p, (c) => (c === '*' ? '.*' : c === '?' ? '.' : esc(c))).join('')}$`, 'su');
    const alphabet = fc.constantFrom('a', 'b', '.', '(', '+', '😀');
    fc.assert(
      fc.property(
        fc.string({ unit: fc.oneof(alphabet, fc.constantFrom('*', '?')), maxLength: 8 }),
        fc.string({ unit: alphabet, maxLength: 10 }),
        (pattern, s) => {
          expect(compileGlob(pattern)(s)).toBe(toRegex(pattern).test(s));
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('compileGlobs', () => {
  it('matches when any pattern does', () => {
    const m = compileGlobs(['a*', 'b?']);
    expect(m('alpha')).toBe(true);
    expect(m('b1')).toBe(true);
    expect(m('c')).toBe(false);
  });

  it('matches nothing when empty', () => {
    expect(compileGlobs([])('')).toBe(false);
    expect(compileGlobs([])('x')).toBe(false);
  });
});

describe('toolFilter', () => {
  it('shows everything when neither list is given', () => {
    expect(toolFilter({})('anything')).toBe(true);
  });

  it('shows everything not denied when allow is absent', () => {
    const visible = toolFilter({ deny: ['delete_*'] });
    expect(visible('read_file')).toBe(true);
    expect(visible('delete_file')).toBe(false);
  });

  it('shows nothing when allow is empty', () => {
    const visible = toolFilter({ allow: [] });
    expect(visible('read_file')).toBe(false);
    expect(visible('')).toBe(false);
  });

  it('shows only allowed tools', () => {
    const visible = toolFilter({ allow: ['read_*', 'search'] });
    expect(visible('read_file')).toBe(true);
    expect(visible('search')).toBe(true);
    expect(visible('searching')).toBe(false);
    expect(visible('write_file')).toBe(false);
  });

  it('lets deny win over allow', () => {
    const visible = toolFilter({ allow: ['*'], deny: ['read_secret*'] });
    expect(visible('read_file')).toBe(true);
    expect(visible('read_secrets')).toBe(false);
    expect(toolFilter({ allow: ['x'], deny: ['x'] })('x')).toBe(false);
  });

  it('matches dots and other regex characters literally', () => {
    const visible = toolFilter({ allow: ['fs.read'], deny: ['fs.read(unsafe)'] });
    expect(visible('fs.read')).toBe(true);
    expect(visible('fsxread')).toBe(false);
    expect(visible('fs.read(unsafe)')).toBe(false);
  });

  it('is case-sensitive', () => {
    const visible = toolFilter({ deny: ['Delete*'] });
    expect(visible('Delete_file')).toBe(false);
    expect(visible('delete_file')).toBe(true);
  });

  it('never shows a denied tool, whatever the allow list (property)', () => {
    const name = fc.string({ unit: fc.constantFrom('a', 'b', '.', '_'), maxLength: 6 });
    const glob = fc.string({ unit: fc.constantFrom('a', 'b', '.', '_', '*', '?'), maxLength: 6 });
    fc.assert(
      fc.property(fc.option(fc.array(glob), { nil: undefined }), fc.array(glob), name, (allow, deny, n) => {
        const visible = toolFilter({ allow, deny })(n);
        const denied = compileGlobs(deny)(n);
        const allowed = allow === undefined || compileGlobs(allow)(n);
        expect(visible).toBe(!denied && allowed);
      }),
    );
  });
});
