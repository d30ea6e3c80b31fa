import { createServer, connect as netConnect, type Server } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkedLookup, nodeEgress, type Resolver } from '../../deploy/node/runtime/egress.js';
import { ManifoldError } from '../../src/errors.js';
import { formatIp, parseIPv4, parseIPv6, parseIp } from '../../src/guards/egress/ip.js';
import { egressDeniedError, egressPolicy, type Verdict } from '../../src/guards/egress/policy.js';
import { nonPublicReason } from '../../src/guards/egress/ranges.js';
import { guardedFetch } from '../../src/upstream/wire/egress-fetch.js';
import { eventually } from '../helpers/harness.js';

const open = egressPolicy({ allowedHosts: [] });
const url = (u: string) => new URL(u);
const denied = (v: Verdict) => (v.ok ? undefined : v.reason);
const bytes = (text: string) => Array.from(parseIp(text)?.bytes ?? []);

describe('D1: schemes and credentials', () => {
  it('D1: https to a public host is allowed when allowedHosts is empty', () => {
    expect(open.checkUrl(url('https://api.example.com/mcp'))).toEqual({ ok: true });
    expect(open.checkUrl(url('https://8.8.8.8/mcp'))).toEqual({ ok: true });
  });

  it('D1: plain http is refused for a host that is not listed, even a public one', () => {
    expect(denied(open.checkUrl(url('http://api.example.com/mcp')))).toMatch(/plain http/);
    const p = egressPolicy({ allowedHosts: ['api.example.com:443'] });
    expect(p.checkUrl(url('http://api.example.com/mcp')).ok).toBe(false);
    expect(p.checkUrl(url('http://api.example.com:443/mcp')).ok).toBe(true);
  });

  it('D1: plain http is allowed for a host that is explicitly listed', () => {
    const p = egressPolicy({ allowedHosts: ['127.0.0.1:3001', 'mcp.internal'] });
    expect(p.checkUrl(url('http://127.0.0.1:3001/mcp')).ok).toBe(true);
    expect(p.checkUrl(url('http://mcp.internal/mcp')).ok).toBe(true);
    expect(p.checkUrl(url('http://mcp.internal:8080/mcp')).ok).toBe(true);
  });

  it.each([
    'ftp://api.example.com/',
    'file:///etc/passwd',
    'ws://api.example.com/',
    'wss://api.example.com/',
    'data:text/plain,hi',
    'gopher://api.example.com/',
    'javascript:alert(1)',
  ])('D1: scheme of %s is refused, listed or not', (u) => {
    expect(denied(open.checkUrl(url(u)))).toMatch(/scheme/);
    expect(egressPolicy({ allowedHosts: ['api.example.com'] }).checkUrl(url(u)).ok).toBe(false);
  });

  it.each([
    'https://user@api.example.com/',
    'https://user:secret@api.example.com/',
    'https://:secret@api.example.com/',
    'http://admin:admin@127.0.0.1:3001/',
  ])('D1: a URL carrying credentials is refused even for a listed host: %s', (u) => {
    const p = egressPolicy({ allowedHosts: ['api.example.com', '127.0.0.1:3001'] });
    expect(denied(p.checkUrl(url(u)))).toMatch(/credentials/);
  });
});

describe('D2: allowedHosts matching', () => {
  it('D2: a non-empty list refuses every host not on it', () => {
    const p = egressPolicy({ allowedHosts: ['api.example.com'] });
    expect(p.checkUrl(url('https://api.example.com/')).ok).toBe(true);
    expect(denied(p.checkUrl(url('https://other.example.com/')))).toMatch(/not in allowedHosts/);
    expect(p.checkUrl(url('https://8.8.8.8/')).ok).toBe(false);
  });

  it('D1: a refusal names the allowedHosts entry that would allow it', () => {
    const p = egressPolicy({ allowedHosts: [] });
    expect(denied(p.checkUrl(url('http://127.0.0.1:9090/mcp')))).toContain(
      'to allow it, add "127.0.0.1:9090" to gateway.allowedHosts',
    );
    expect(denied(p.checkUrl(url('https://10.0.0.5/mcp')))).toContain(
      'add "10.0.0.5:443" to gateway.allowedHosts',
    );
    expect(denied(p.checkUrl(url('https://localhost:8443/')))).toContain('add "localhost:8443"');
    expect(denied(p.checkAddress('internal.example', '192.168.1.4'))).toContain(
      'add "internal.example" to gateway.allowedHosts',
    );
  });

  it('D2: matching is exact: no subdomains, suffixes or prefixes', () => {
    const p = egressPolicy({ allowedHosts: ['example.com'] });
    for (const u of [
      'https://evil.example.com/',
      'https://example.com.evil.net/',
      'https://notexample.com/',
      'https://example.co/',
      'https://example.com./',
    ]) {
      expect(p.checkUrl(url(u)).ok, u).toBe(false);
    }
  });

  it('D2: matching is case-insensitive on both sides', () => {
    const p = egressPolicy({ allowedHosts: ['API.Example.COM'] });
    expect(p.checkUrl(url('https://api.example.com/')).ok).toBe(true);
    expect(p.checkUrl(url('https://API.EXAMPLE.com/')).ok).toBe(true);
  });

  it('D2: IDN names match after conversion to punycode, whichever side is written in Unicode', () => {
    const unicode = egressPolicy({ allowedHosts: ['bücher.example'] });
    const puny = egressPolicy({ allowedHosts: ['xn--bcher-kva.example'] });
    for (const p of [unicode, puny]) {
      expect(p.checkUrl(url('https://bücher.example/')).ok).toBe(true);
      expect(p.checkUrl(url('https://BÜCHER.example/')).ok).toBe(true);
      expect(p.checkUrl(url('https://xn--bcher-kva.example/')).ok).toBe(true);
      expect(p.checkUrl(url('https://bucher.example/')).ok).toBe(false);
    }
    // A look-alike in another script is a different host.
    expect(puny.checkUrl(url('https://bücher.exаmple/')).ok).toBe(false);
  });

  it('D2: an entry without a port matches any port; with a port, only that port', () => {
    const p = egressPolicy({ allowedHosts: ['any.example', 'one.example:8443'] });
    expect(p.checkUrl(url('https://any.example/')).ok).toBe(true);
    expect(p.checkUrl(url('https://any.example:9999/')).ok).toBe(true);
    expect(p.checkUrl(url('https://one.example:8443/')).ok).toBe(true);
    expect(p.checkUrl(url('https://one.example/')).ok).toBe(false);
    expect(p.checkUrl(url('https://one.example:8444/')).ok).toBe(false);
  });

  it('D2: default ports apply when the URL has none (443 for https, 80 for http)', () => {
    const p = egressPolicy({ allowedHosts: ['s.example:443', 'h.example:80'] });
    expect(p.checkUrl(url('https://s.example/')).ok).toBe(true);
    expect(p.checkUrl(url('https://s.example:443/')).ok).toBe(true);
    expect(p.checkUrl(url('http://h.example/')).ok).toBe(true);
    expect(p.checkUrl(url('https://h.example/')).ok).toBe(false);
    expect(p.checkUrl(url('http://s.example/')).ok).toBe(false);
  });

  it('D2: IP entries are normalized like URL hosts (IPv4 encodings, bracketed and bare IPv6)', () => {
    const p = egressPolicy({ allowedHosts: ['127.1:3001', '[::1]:8080', '0:0:0:0:0:0:0:2'] });
    expect(p.checkUrl(url('http://127.0.0.1:3001/')).ok).toBe(true);
    expect(p.checkUrl(url('http://[::1]:8080/')).ok).toBe(true);
    expect(p.checkUrl(url('http://[0::1]:8080/')).ok).toBe(true);
    expect(p.checkUrl(url('http://[::1]:8081/')).ok).toBe(false);
    expect(p.checkUrl(url('http://[::2]:1/')).ok).toBe(true);
  });

  it('D2: options are validated at construction', () => {
    const bad: unknown[] = [
      undefined,
      'api.example.com',
      [''],
      ['  '],
      [42],
      ['https://api.example.com'],
      ['api.example.com/mcp'],
      ['user@api.example.com'],
      ['api.example.com:0'],
      ['api.example.com:65536'],
      ['api.example.com:http'],
      ['api example.com'],
      ['[::1'],
      ['1:2:3'],
    ];
    for (const allowedHosts of bad) {
      expect(
        () => egressPolicy({ allowedHosts } as { allowedHosts: string[] }),
        JSON.stringify(allowedHosts),
      ).toThrow(ManifoldError);
    }
    expect(() => egressPolicy({ allowedHosts: ['api.example.com:65535'] })).not.toThrow();
  });
});

// Every range the requirement names, plus the rest of the IANA special-purpose registries.
const NON_PUBLIC: [string, RegExp][] = [
  ['10.0.0.1', /private/],
  ['10.255.255.255', /private/],
  ['172.16.0.1', /private/],
  ['172.31.255.254', /private/],
  ['192.168.1.1', /private/],
  ['127.0.0.1', /loopback/],
  ['127.255.255.254', /loopback/],
  ['169.254.0.1', /link-local/],
  ['169.254.169.254', /metadata/],
  ['100.100.100.200', /metadata/],
  ['100.64.0.1', /CGNAT/],
  ['100.127.255.254', /CGNAT/],
  ['224.0.0.1', /multicast/],
  ['239.255.255.250', /multicast/],
  ['0.0.0.0', /unspecified/],
  ['0.1.2.3', /unspecified/],
  ['192.0.0.8', /IETF/],
  ['192.0.2.1', /documentation/],
  ['198.51.100.7', /documentation/],
  ['203.0.113.9', /documentation/],
  ['198.18.0.1', /benchmarking/],
  ['198.19.255.255', /benchmarking/],
  ['192.88.99.1', /6to4 relay/],
  ['240.0.0.1', /reserved/],
  ['255.255.255.254', /reserved/],
  ['255.255.255.255', /broadcast/],
  ['::', /unspecified/],
  ['::1', /loopback/],
  ['fc00::1', /unique local/],
  ['fd12:3456::1', /unique local/],
  ['fd00:ec2::254', /metadata/],
  ['fe80::1', /link-local/],
  ['febf::1', /link-local/],
  ['fec0::1', /site-local/],
  ['ff02::1', /multicast/],
  ['ff0e::1', /multicast/],
  ['2001:db8::1', /documentation/],
  ['3fff::1', /documentation/],
  ['64:ff9b:1::1', /local-use NAT64/],
  ['100::1', /discard/],
  ['2001::1', /Teredo/],
  ['2001:2::1', /IETF/],
  ['5f00::1', /SRv6/],
  ['4000::1', /not global unicast/],
  ['::ffff:127.0.0.1', /IPv4-mapped.*127\.0\.0\.1: loopback/],
  ['::ffff:7f00:1', /IPv4-mapped.*loopback/],
  ['::ffff:a9fe:a9fe', /IPv4-mapped.*metadata/],
  ['::ffff:10.1.2.3', /IPv4-mapped.*private/],
  ['::ffff:0:a9fe:a9fe', /IPv4-translated.*metadata/],
  ['::127.0.0.1', /IPv4-compatible.*loopback/],
  ['::8.8.8.8', /IPv4-compatible/],
  ['64:ff9b::7f00:1', /NAT64.*127\.0\.0\.1: loopback/],
  ['64:ff9b::169.254.169.254', /NAT64.*metadata/],
  ['2002:7f00:1::', /6to4.*loopback/],
  ['2002:a9fe:a9fe::1', /6to4.*metadata/],
  ['2002:c0a8:101::1', /6to4.*private/],
];

const PUBLIC = [
  '8.8.8.8',
  '1.1.1.1',
  '93.184.215.14',
  '100.63.255.255',
  '100.128.0.0',
  '172.15.255.255',
  '172.32.0.0',
  '192.0.1.1',
  '192.169.0.1',
  '198.17.255.255',
  '198.20.0.0',
  '223.255.255.255',
  '2606:4700:4700::1111',
  '2a00:1450:4001:80b::200e',
  '::ffff:8.8.8.8',
  '64:ff9b::808:808',
  '2002:808:808::1',
];

describe('D3: address classification', () => {
  it.each(NON_PUBLIC)('D3: %s is refused (%s)', (address, why) => {
    const reason = denied(open.checkAddress('upstream.example', address));
    expect(reason).toMatch(why);
  });

  it.each(PUBLIC)('D3: %s is public and allowed', (address) => {
    expect(open.checkAddress('upstream.example', address)).toEqual({ ok: true });
  });

  it('D3: a host that is explicitly listed may resolve to a private address', () => {
    const p = egressPolicy({ allowedHosts: ['db.internal:5000', 'MCP.Internal'] });
    expect(p.checkAddress('db.internal', '10.0.0.5').ok).toBe(true);
    expect(p.checkAddress('mcp.internal', '127.0.0.1').ok).toBe(true);
    expect(p.checkAddress('other.internal', '10.0.0.5').ok).toBe(false);
  });

  it('#13.12: a listed name still may not resolve to a metadata or link-local address, unless that address is listed', () => {
    const p = egressPolicy({ allowedHosts: ['metadata.internal', 'db.internal'] });
    for (const address of [
      '169.254.169.254',
      '169.254.1.1',
      'fe80::1',
      'fd00:ec2::254',
      '100.100.100.200',
      '::ffff:169.254.169.254',
    ]) {
      expect(denied(p.checkAddress('metadata.internal', address)), address).toMatch(/metadata|link-local/);
    }
    expect(p.checkAddress('db.internal', '10.0.0.5').ok).toBe(true);
    const explicit = egressPolicy({ allowedHosts: ['metadata.internal', '169.254.169.254', '[fe80::1]'] });
    expect(explicit.checkAddress('metadata.internal', '169.254.169.254').ok).toBe(true);
    expect(explicit.checkAddress('metadata.internal', 'fe80::1').ok).toBe(true);
    expect(explicit.checkAddress('metadata.internal', '169.254.1.1').ok).toBe(false);
  });

  it('D3: an answer that is not an IP address fails closed', () => {
    expect(denied(open.checkAddress('x.example', 'not-an-ip'))).toMatch(/not an IP/);
    expect(denied(open.checkAddress('x.example', ''))).toMatch(/not an IP/);
  });

  it('D3: IPv4-mapped IPv6 classifies exactly like the IPv4 address it carries', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 32 - 1 }), (n) => {
        const v4 = parseIp(String(n))!;
        const mapped = parseIp(`::ffff:${formatIp(v4)}`)!;
        expect(nonPublicReason(mapped) === undefined).toBe(nonPublicReason(v4) === undefined);
        const nat64 = parseIp(`64:ff9b::${formatIp(v4)}`)!;
        expect(nonPublicReason(nat64) === undefined).toBe(nonPublicReason(v4) === undefined);
      }),
    );
  });
});

describe('D4: IP literals in any encoding', () => {
  it.each([
    ['127.0.0.1', [127, 0, 0, 1]],
    ['2130706433', [127, 0, 0, 1]],
    ['0x7f000001', [127, 0, 0, 1]],
    ['0X7F000001', [127, 0, 0, 1]],
    ['0177.0.0.1', [127, 0, 0, 1]],
    ['0177.0000.0.01', [127, 0, 0, 1]],
    ['127.1', [127, 0, 0, 1]],
    ['127.0.1', [127, 0, 0, 1]],
    ['0x7f.1', [127, 0, 0, 1]],
    ['0x7f.0.0x0.1', [127, 0, 0, 1]],
    ['127.0.0.1.', [127, 0, 0, 1]],
    ['0', [0, 0, 0, 0]],
    ['0x', [0, 0, 0, 0]],
    ['0xa9fea9fe', [169, 254, 169, 254]],
    ['2852039166', [169, 254, 169, 254]],
    ['0251.0376.0251.0376', [169, 254, 169, 254]],
    ['169.16689662', [169, 254, 169, 254]],
    ['10.1', [10, 0, 0, 1]],
    ['4294967295', [255, 255, 255, 255]],
  ])('D4: IPv4 %s parses to %j', (text, expected) => {
    expect(Array.from(parseIPv4(text)!)).toEqual(expected);
  });

  it.each([
    'example.com',
    '1.2.3.foo',
    '256.0.0.1',
    '1.2.3.256',
    '4294967296',
    '08.0.0.1',
    '0x1g.0.0.1',
    '1..2.3',
    '1.2.3.4.5',
    '',
    '.',
    '9'.repeat(400),
  ])('D4: %j is not an IPv4 literal', (text) => {
    expect(parseIPv4(text)).toBeUndefined();
  });

  it.each([
    ['[::ffff:7f00:1]', '0:0:0:0:0:ffff:7f00:1'],
    ['::ffff:127.0.0.1', '0:0:0:0:0:ffff:7f00:1'],
    ['0:0:0:0:0:ffff:7f00:1', '0:0:0:0:0:ffff:7f00:1'],
    ['0000:0000:0000:0000:0000:FFFF:7F00:0001', '0:0:0:0:0:ffff:7f00:1'],
    ['::1', '0:0:0:0:0:0:0:1'],
    ['[::1]', '0:0:0:0:0:0:0:1'],
    ['::', '0:0:0:0:0:0:0:0'],
    ['fe80::1%eth0', 'fe80:0:0:0:0:0:0:1'],
    ['64:ff9b::169.254.169.254', '64:ff9b:0:0:0:0:a9fe:a9fe'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8'],
  ])('D4: IPv6 %s parses to %s', (text, expected) => {
    expect(formatIp({ family: 6, bytes: parseIPv6(text)! })).toBe(expected);
  });

  it.each([
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1::2::3',
    ':::',
    '12345::',
    '::ffff:0177.0.0.1',
    '::ffff:1.2.3',
    '::ffff:1.2.3.4:5',
    'g::1',
    '1:2:3:4:5:6:7:8::',
  ])('D4: %j is not an IPv6 literal', (text) => {
    expect(parseIPv6(text)).toBeUndefined();
  });

  it.each([
    'https://2130706433/',
    'https://0x7f000001/',
    'https://0177.0.0.1/',
    'https://127.1/',
    'https://0x7f.1/',
    'https://[::ffff:7f00:1]/',
    'https://[::ffff:127.0.0.1]/',
    'https://[::1]/',
    'https://[::]/',
    'https://0/',
    'https://2852039166/latest/meta-data/',
    'https://0xa9.0xfe.0xa9.0xfe/',
    'https://[::ffff:a9fe:a9fe]/',
    'https://[64:ff9b::a9fe:a9fe]/',
    'https://[2002:a9fe:a9fe::]/',
    'https://[fd00:ec2::254]/',
    'https://100.100.100.200/',
    'https://10.0.0.1/',
    'https://[fe80::1]/',
    'https://localhost/',
    'https://api.localhost/',
    'https://localhost./',
  ])('D4: the URL %s is refused before any lookup (IP literals never reach the DNS hook)', (u) => {
    expect(open.checkUrl(url(u)).ok).toBe(false);
  });

  it('D4: every encoding of every IPv4 address parses to the same bytes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 32 - 1 }), (n) => {
        const expected = bytes(String(n));
        const quad = expected.map(Number);
        const [a, b, c, d] = quad as [number, number, number, number];
        const forms = [
          `0x${n.toString(16)}`,
          `0${n.toString(8)}`,
          quad.join('.'),
          quad.map((x) => `0x${x.toString(16)}`).join('.'),
          quad.map((x) => `0${x.toString(8)}`).join('.'),
          `${a}.${(b << 16) | (c << 8) | d}`,
          `${a}.${b}.${(c << 8) | d}`,
        ];
        for (const form of forms) expect(bytes(form), form).toEqual(expected);
        // And WHATWG URL agrees with the raw parser on what the host is.
        expect(new URL(`https://${forms[0]}/`).hostname).toBe(quad.join('.'));
      }),
    );
  });
});

describe('D5: redirect hops are each checked (scripted fetch; real servers in egress-fetch.test.ts)', () => {
  it('D5: a hop to 169.254.169.254 is refused before the fetch is ever called for it', async () => {
    const called: string[] = [];
    const base = (async (input: RequestInfo | URL) => {
      called.push(String(input));
      return new Response(null, { status: 302, headers: { location: 'http://169.254.169.254/latest' } });
    }) as typeof fetch;
    const f = guardedFetch(base, { policy: open, maxBodyBytes: 1024 });
    const err = await f('https://public.example/mcp').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ManifoldError);
    expect((err as ManifoldError).code).toBe('ERR_EGRESS_DENIED');
    expect(called).toEqual(['https://public.example/mcp']);
  });
});

describe('D3/D6: connect-time DNS check (deploy/node/egress.ts)', () => {
  function lookupOnce(lookup: ReturnType<typeof checkedLookup>, host: string, all = false) {
    return new Promise<{ err: NodeJS.ErrnoException | null; address: unknown }>((resolve) => {
      lookup(host, { all }, (err, address) => resolve({ err, address }));
    });
  }

  it('D3: a name that answered a public address and now answers 169.254.169.254 is refused (no cached verdict)', async () => {
    const answers = ['93.184.215.14', '169.254.169.254'];
    let calls = 0;
    const resolver: Resolver = async () => [{ address: answers[calls++]!, family: 4 }];
    const lookup = checkedLookup(open, resolver);
    const first = await lookupOnce(lookup, 'rebind.example');
    expect(first.err).toBeNull();
    expect(first.address).toBe('93.184.215.14');
    const second = await lookupOnce(lookup, 'rebind.example');
    expect(second.err).toBeInstanceOf(ManifoldError);
    expect((second.err as unknown as ManifoldError).code).toBe('ERR_EGRESS_DENIED');
    expect((second.err as unknown as ManifoldError).data?.reason).toMatch(/169\.254\.169\.254.*metadata/);
    expect(calls).toBe(2);
  });

  it('D3: net.connect honours the checked lookup: a refused answer never reaches the listener', async () => {
    // A loopback listener stands in for an internal service: every connection reaching it counts.
    let connections = 0;
    const server: Server = createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const toLoopback: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
    const connectVia = (allowedHosts: string[]) =>
      new Promise<Error | undefined>((resolve) => {
        const s = netConnect({
          host: 'svc.example',
          port,
          lookup: checkedLookup(egressPolicy({ allowedHosts }), toLoopback),
        });
        s.once('connect', () => {
          s.destroy();
          resolve(undefined);
        });
        s.once('error', (e) => resolve(e));
      });
    try {
      const refused = await connectVia([]);
      expect((refused as ManifoldError).code).toBe('ERR_EGRESS_DENIED');
      expect(connections).toBe(0);
      // Listed explicitly: the same answer is allowed and the socket connects.
      expect(await connectVia(['svc.example'])).toBeUndefined();
      await eventually(() => connections > 0, 'the server to see the connection');
      expect(connections).toBe(1);
    } finally {
      server.close();
    }
  });

  it('D3: the Node fetch refuses the second request when DNS turns to the metadata address', async () => {
    const answers = ['93.184.215.14', '169.254.169.254'];
    let calls = 0;
    const abort = new AbortController();
    const resolver: Resolver = async () => {
      const address = answers[calls++]!;
      // The first answer is public: the connection to it is allowed to start, and then abandoned
      // (this test must not depend on reaching the internet).
      if (calls === 1) setTimeout(() => abort.abort(), 0);
      return [{ address, family: 4 }];
    };
    const f = nodeEgress({ allowedHosts: [], maxUpstreamBodyBytes: 1024, resolver }).fetch;
    const first = await f('https://rebind.example/mcp', { signal: abort.signal }).catch((e: unknown) => e);
    expect(first).not.toMatchObject({ code: 'ERR_EGRESS_DENIED' });
    const second = await f('https://rebind.example/mcp').catch((e: unknown) => e);
    expect(second).toBeInstanceOf(ManifoldError);
    expect((second as ManifoldError).code).toBe('ERR_EGRESS_DENIED');
    expect(calls).toBe(2);
  });

  it('D3: with all: true (Happy Eyeballs), one private address among public ones refuses the name', async () => {
    const lookup = checkedLookup(open, async () => [
      { address: '2606:4700:4700::1111', family: 6 },
      { address: '1.1.1.1', family: 4 },
      { address: '10.0.0.7', family: 4 },
    ]);
    const { err } = await lookupOnce(lookup, 'mixed.example', true);
    expect((err as unknown as ManifoldError).code).toBe('ERR_EGRESS_DENIED');
    const fine = checkedLookup(open, async () => [
      { address: '2606:4700:4700::1111', family: 6 },
      { address: '1.1.1.1', family: 4 },
    ]);
    const ok = await lookupOnce(fine, 'fine.example', true);
    expect(ok.err).toBeNull();
    expect(ok.address).toEqual([
      { address: '2606:4700:4700::1111', family: 6 },
      { address: '1.1.1.1', family: 4 },
    ]);
  });

  it('D6: a DNS failure fails closed: no address, no connection', async () => {
    const failing = checkedLookup(open, async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.example'), { code: 'ENOTFOUND' });
    });
    const a = await lookupOnce(failing, 'nowhere.example');
    expect(a.err?.code).toBe('ENOTFOUND');
    expect(a.address).toBe('');
    const empty = await lookupOnce(
      checkedLookup(open, async () => []),
      'empty.example',
    );
    expect((empty.err as unknown as ManifoldError).code).toBe('ERR_EGRESS_DENIED');
    const garbage = await lookupOnce(
      checkedLookup(open, async () => [{ address: 'bogus', family: 4 }]),
      'garbage.example',
    );
    expect((garbage.err as unknown as ManifoldError).code).toBe('ERR_EGRESS_DENIED');
  });

  describe('D6: through the Node egress against a real listener', () => {
    let server: Server;
    let port = 0;
    let connections = 0;
    beforeAll(async () => {
      server = createServer((s) => {
        connections++;
        s.destroy();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as { port: number }).port;
    });
    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    it('D6: a resolver failure makes the request fail and nothing connects', async () => {
      const egress = nodeEgress({
        allowedHosts: [`dns-fails.example:${port}`],
        maxUpstreamBodyBytes: 1024,
        resolver: async () => {
          throw Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' });
        },
      });
      await expect(egress.fetch(`http://dns-fails.example:${port}/`)).rejects.toThrow();
      const signal = new AbortController().signal;
      await expect(
        egress.postJson({ url: `http://dns-fails.example:${port}/`, headers: {}, body: '{}', signal }),
      ).rejects.toThrow();
      expect(connections).toBe(0);
    });
  });
});

describe('D7: errors shown to clients are generic', () => {
  it('D7: the public message names no host or address; the reason is kept for logs only', () => {
    const v = open.checkAddress('rebind.example', '169.254.169.254');
    expect(v.ok).toBe(false);
    const e = egressDeniedError(denied(v)!);
    expect(e.code).toBe('ERR_EGRESS_DENIED');
    expect(e.publicMessage).toBe('egress to this host is not allowed');
    expect(e.message).toBe(e.publicMessage);
    expect(e.data).toMatchObject({
      rule: 'egress-denied',
      reason: expect.stringContaining('169.254.169.254'),
    });
  });

  it('D7: a connect-time refusal surfaces as the same generic error, not the resolved address', async () => {
    const egress = nodeEgress({
      allowedHosts: [],
      maxUpstreamBodyBytes: 1024,
      resolver: async () => [{ address: '10.1.2.3', family: 4 }],
    });
    const signal = new AbortController().signal;
    for (const attempt of [
      egress.fetch('https://internal.example/'),
      egress.postJson({ url: 'https://internal.example/mcp', headers: {}, body: '{}', signal }),
    ]) {
      const e = (await attempt.catch((x: unknown) => x)) as ManifoldError;
      expect(e).toBeInstanceOf(ManifoldError);
      expect(e.code).toBe('ERR_EGRESS_DENIED');
      expect(e.publicMessage).not.toMatch(/10\.1\.2\.3|internal\.example/);
      expect(String(e.data?.reason)).toMatch(/10\.1\.2\.3/);
    }
  });
});
