import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildSurface } from '../../src/aggregate/surface.js';
import { SurfaceViews } from '../../src/aggregate/surface-views.js';
import { rewriteUri, templateMatcher, unrewriteUri } from '../../src/aggregate/uris.js';
import { grantsMatcher } from '../../src/auth/grants.js';
import type { Principal } from '../../src/auth/principal.js';
import type { ServerConfig } from '../../src/config/types.js';
import { ManifoldError } from '../../src/errors.js';
import { normalizeUri, normalizeUriPattern } from '../../src/guards/uri-normal.js';
import { principal as made } from '../helpers/factories.js';

/**
 * 49.4 / SECURITY J4: resource URIs in normal form (RFC 3986 §6.2.2) before any filter, grant or
 * template match, and refused where no safe normal form exists.
 */

const normal = (uri: string) => {
  const n = normalizeUri(uri);
  if (!n.ok) throw new Error(`${uri} refused: ${n.reason}`);
  return n.uri;
};
const reasonOf = (uri: string) => {
  const n = normalizeUri(uri);
  return n.ok ? `accepted as ${n.uri}` : n.reason;
};

describe('49.4: normalizeUri', () => {
  // Every spelling of "up one level" a client or parser may use, in a special scheme (file:)
  // and in a custom one (memo:), which the URL parser handles differently.
  const normalised: [string, string][] = [
    ['file:///public/../secret/key.txt', 'file:///secret/key.txt'],
    ['file:///public/%2e%2e/secret/key.txt', 'file:///secret/key.txt'],
    ['file:///public/%2E%2E/secret/key.txt', 'file:///secret/key.txt'],
    ['file:///public/%2e%2E/secret/key.txt', 'file:///secret/key.txt'],
    ['file:///public/.%2e/secret/key.txt', 'file:///secret/key.txt'],
    ['file:///public/%2e./secret/key.txt', 'file:///secret/key.txt'],
    ['file:///public/./../secret/key.txt', 'file:///secret/key.txt'],
    ['file:///public/a/b/../../../secret/key.txt', 'file:///secret/key.txt'],
    ['file:///public/../../../../secret/key.txt', 'file:///secret/key.txt'],
    ['file:///public/%2e/readme.txt', 'file:///public/readme.txt'],
    ['file:///public/sub/..', 'file:///public/'],
    ['file:///public/.', 'file:///public/'],
    ['FILE:///public/readme.txt', 'file:///public/readme.txt'],
    ['file://LOCALHOST/public/readme.txt', 'file:///public/readme.txt'],
    ['file:///public/%7euser/%41', 'file:///public/~user/A'],
    ['file:///public/%c3%a9', 'file:///public/%C3%A9'],
    ['file:///public/%252e%252e/x', 'file:///public/%252e%252e/x'],
    ['HTTP://Example.COM:80/a/%2E%2E/b', 'http://example.com/b'],
    ['https://ex.com/a/b/../c?x=/../y#/../z', 'https://ex.com/a/c?x=/../y#/../z'],
    ['memo://notes/public/../secret/key', 'memo://notes/secret/key'],
    ['memo://notes/public/%2e%2e/secret/key', 'memo://notes/secret/key'],
    ['memo://notes/public/.%2E/secret/key', 'memo://notes/secret/key'],
    // A dot segment never climbs out of the authority.
    ['memo://notes/../../other/key', 'memo://notes/other/key'],
    ['MEMO://Notes/A/./b', 'memo://notes/A/b'],
    ['memo://N%4Ftes/x', 'memo://notes/x'],
    ['memo://User@Notes/x', 'memo://User@notes/x'],
    ['memo://notes/%e2%82%ac', 'memo://notes/%E2%82%AC'],
    ['memo:/a/../b', 'memo:/b'],
    ['ui://Widget.Card/x', 'ui://widget.card/x'],
    ['test://static-text', 'test://static-text'],
    ['urn:isbn:0451450523', 'urn:isbn:0451450523'],
    ['urn:a:../b', 'urn:a:../b'],
    ['demo://d.resource/dynamic/text/7', 'demo://d.resource/dynamic/text/7'],
  ];
  it.each(normalised)('49.4: %s is %s', (raw, expected) => {
    expect(normal(raw)).toBe(expected);
  });

  const refused: [string, RegExp][] = [
    // A dot segment that the parser keeps: an opaque path, or one it re-escapes.
    ['memo:a/../b', /dot segment/],
    ['memo:a/%2e%2e/b', /dot segment/],
    ['memo:./x', /dot segment/],
    ['memo:/..//x', /dot segment/],
    ['web+demo:/.//not-a-host/', /dot segment/],
    // An encoded separator a server decoding before it splits would follow.
    ['file:///public/..%2fsecret/key.txt', /encoded/],
    ['file:///public/..%2Fsecret/key.txt', /encoded/],
    ['file:///public/%2e%2e%2fsecret/key.txt', /encoded/],
    ['file:///public/..%5csecret/key.txt', /encoded/],
    ['file:///public/..%5Csecret/key.txt', /encoded/],
    ['memo://notes/..%2Fsecret', /encoded/],
    ['file:///public/..%00/key.txt', /encoded/],
    // Characters parsers disagree on: WHATWG reads `\` as `/` in file:, drops tabs and newlines.
    ['file:///public/..\\secret/key.txt', /backslash/],
    ['file:///public\\..\\secret', /backslash/],
    ['memo://notes/..\\secret', /backslash/],
    ['file:///public/.\t./secret/key.txt', /control/],
    ['file:///public/..\n/secret', /control/],
    ['file:///public/ ../secret', /whitespace/],
    [' file:///public/x', /whitespace/],
    ['file:///public/\u0000', /control/],
    // Not an absolute URI, or too long.
    ['../secret/key.txt', /absolute URI/],
    ['/secret/key.txt', /absolute URI/],
    ['', /empty/],
    [`file:///${'a'.repeat(2100)}`, /at most 2048/],
  ];
  it.each(refused)('49.4: %j is refused', (raw, reason) => {
    expect(reasonOf(raw)).toMatch(reason);
  });

  it('49.4: the normal form is a fixed point that the URL parser (an SDK upstream) reads back unchanged', () => {
    const segment = fc.constantFrom(
      'a',
      'B',
      '.',
      '..',
      '%2e',
      '%2E',
      '.%2e',
      '%2E.',
      '%2e%2E',
      '%7e',
      '%41',
      'x%2fy',
      '%5C',
      '%c3%a9',
      '',
      '..%2e',
    );
    const uri = fc.record({
      scheme: fc.constantFrom('file', 'FILE', 'http', 'memo', 'Memo', 'ui', 'urn'),
      authority: fc.constantFrom('//', '///', '//Host', '//h.example', ''),
      segments: fc.array(segment, { maxLength: 8 }),
      tail: fc.constantFrom('', '?q=/../x', '#/..', '?%7e'),
    });
    fc.assert(
      fc.property(uri, ({ scheme, authority, segments, tail }) => {
        const raw = `${scheme}:${authority === '///' ? '//' : authority}${authority ? '/' : ''}${segments.join('/')}${tail}`;
        const n = normalizeUri(raw);
        if (!n.ok) return;
        const again = normalizeUri(n.uri);
        expect(again).toEqual(n);
        expect(new URL(n.uri).href).toBe(n.uri);
        const path = new URL(n.uri).pathname;
        expect(path.split('/')).not.toContain('..');
        expect(path.split('/')).not.toContain('.');
        expect(path).not.toMatch(/%2F|%5C|%2E/i);
      }),
      { numRuns: 1000 },
    );
  });

  it('49.4: patterns (filters, grants, templates) are put in the form of the URIs they match', () => {
    expect(normalizeUriPattern('MEMO://Notes/%7e*')).toBe('memo://notes/~*');
    expect(normalizeUriPattern('MEMO://Notes')).toBe('memo://notes');
    expect(normalizeUriPattern('memo://User@Notes/X*')).toBe('memo://User@notes/X*');
    expect(normalizeUriPattern('URN:Isbn:%7e*')).toBe('urn:Isbn:~*');
    expect(normalizeUriPattern('file:///Public/*')).toBe('file:///Public/*');
    expect(normalizeUriPattern('Memo://Se?ret/*')).toBe('memo://se?ret/*');
    expect(normalizeUriPattern('*')).toBe('*');
    expect(templateMatcher('MEMO://Notes/{+path}')('memo://notes/a/b')).toBe(true);
    expect(templateMatcher('file:///public/{+path}')(normal('file:///public/../secret/key.txt'))).toBe(false);
  });

  it('49.4: a rewritten URI keeps its label lower case in an authority, and round-trips after normalisation', () => {
    const exposed = normal(rewriteUri('ui://widget/card', 'Mem'));
    expect(exposed).toBe('ui://mem.widget/card');
    expect(unrewriteUri(exposed, 'Mem')).toBe('ui://widget/card');
    expect(unrewriteUri(normal('file://Mem./public/x'), 'Mem')).toBe('file:///public/x');
    expect(unrewriteUri('urn:Mem.isbn:1', 'Mem')).toBe('urn:isbn:1');
  });
});

describe('49.4: a dot segment never passes a resource filter, grant or template', () => {
  const server = (name: string, resources: ServerConfig['resources']) =>
    ({ name, prefix: name, prompts: { deny: [] }, resources }) as unknown as ServerConfig;
  const files = {
    prompts: [],
    resources: [
      { uri: 'file:///public/readme.txt', name: 'readme' },
      { uri: 'file:///secret/key.txt', name: 'key' },
      { uri: 'file:///public/../secret/listed.txt', name: 'listed through a dot segment' },
    ],
    templates: [
      { uriTemplate: 'file:///public/{+path}', name: 'public files' },
      { uriTemplate: 'memo://notes/public/{+path}', name: 'notes' },
    ],
  };
  const surface = buildSurface(
    [
      // Config filters.
      {
        server: server('cf', {
          allow: ['file:///public/*', 'MEMO://Notes/public/*'],
          deny: ['file:///secret/*', 'memo://notes/secret/*'],
        }),
        ...files,
      },
      // No filters: grants decide (its URIs are rewritten: cf published them first).
      { server: server('gr', { deny: [] }), ...files },
    ],
    { maxDescriptionBytes: 1024 },
  );
  const views = new SurfaceViews(() => surface);
  const principal = (grants: string[]) => made({ grants });
  const filtered = principal(['resources:cf__*']);
  const granted = principal(['resources:gr__file:///public/*', 'resources:gr__MEMO://notes/public/*']);

  const attacks = [
    '/public/../secret/key.txt',
    '/public/%2e%2e/secret/key.txt',
    '/public/%2E%2E/secret/key.txt',
    '/public/.%2e/secret/key.txt',
    '/public/%2e./secret/key.txt',
    '/public/%2e%2E/secret/key.txt',
    '/public/a/../../secret/key.txt',
    '/public/..%2fsecret/key.txt',
    '/public/..%5csecret/key.txt',
    '/public/..\\secret/key.txt',
    '/public/.\t./secret/key.txt',
  ];
  const routeOf = (p: Principal, uri: string) => {
    try {
      return views.resolveResource(p, uri);
    } catch (e) {
      expect(e).toBeInstanceOf(ManifoldError);
      return (e as ManifoldError).code;
    }
  };

  it('49.4: config filters and grants hold for every spelling, in a special and a custom scheme', () => {
    const cases: [Principal, string][] = [
      ...attacks.map((a): [Principal, string] => [filtered, `file://${a}`]),
      ...attacks.map((a): [Principal, string] => [filtered, `memo://notes${a}`]),
      ...attacks.map((a): [Principal, string] => [granted, `file://gr.${a}`]),
      ...attacks.map((a): [Principal, string] => [granted, `memo://gr.notes${a}`]),
    ];
    for (const [p, uri] of cases) {
      const route = routeOf(p, uri);
      expect(['ERR_INVALID_PARAMS', 'ERR_RESOURCE_UNKNOWN'], uri).toContain(route);
    }
    // The listing holds no secret either, whichever way the upstream spelled it.
    expect(views.resourceView(filtered).resources.map((r) => r.uri)).toEqual(['file:///public/readme.txt']);
    expect(views.resourceView(granted).resources.map((r) => r.uri)).toEqual(['file://gr./public/readme.txt']);
  });

  it('49.4: what the upstream is asked for is the normalised URI the filters passed', () => {
    expect(routeOf(filtered, 'file:///public/sub/../%7Euser/a.txt')).toMatchObject({
      server: 'cf',
      uri: 'file:///public/~user/a.txt',
    });
    expect(routeOf(granted, 'FILE://GR./public/./a.txt')).toMatchObject({
      server: 'gr',
      uri: 'file:///public/a.txt',
    });
    expect(routeOf(filtered, 'memo://NOTES/public/x/../y')).toMatchObject({
      server: 'cf',
      uri: 'memo://notes/public/y',
    });
    // A listed resource is asked for as the upstream listed it.
    expect(routeOf(filtered, 'file:///public/./readme.txt')).toMatchObject({
      server: 'cf',
      uri: 'file:///public/readme.txt',
    });
  });

  it('49.4: a resources grant and a filter written in another case still match', () => {
    const match = grantsMatcher(principal(['resources:gr__FILE:///public/*']), 'resources');
    expect(match('gr__file:///public/a')).toBe(true);
    expect(match('gr__file:///secret/a')).toBe(false);
  });
});
