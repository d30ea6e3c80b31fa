/**
 * Egress policy: which upstream URLs and which resolved addresses the gateway may connect to.
 * Pure and runtime-neutral: no DNS, no sockets. The runtimes apply it at two points:
 *
 * - `checkUrl` before every request and every redirect hop (see upstream/egress-fetch.ts). This is
 *   the only point where IP-literal hosts can be caught, because net.connect skips DNS lookup
 *   (and so any lookup hook) for them.
 * - `checkAddress` on each address a hostname resolves to, at connect time. Node does this in the
 *   undici Agent's `lookup` (deploy/node/egress.ts), so a name that resolves to a private address
 *   is refused even if it pointed somewhere public a moment earlier (DNS rebinding).
 *
 * Cloudflare Workers expose no DNS or connect hook, so there the guard is the hostname allowlist
 * plus the IP-literal checks in `checkUrl`; a public name that resolves to a private address is
 * not caught by Manifold (Workers' own fetch cannot reach private networks anyway).
 */
import { ManifoldError } from '../errors.js';

export type Verdict = { ok: true } | { ok: false; reason: string };

export interface EgressPolicyOptions {
  /**
   * Hostnames, optionally `host:port` or `[v6]:port`. Matching is exact and case-insensitive on the
   * WHATWG-normalized host (IDN converted to punycode, IPv4 literals canonicalized). An entry
   * without a port matches any port. Empty: any public host over https.
   */
  allowedHosts: readonly string[];
}

export interface EgressPolicy {
  /** Scheme, credentials, allowlist and IP-literal checks for one URL (each redirect hop too). */
  checkUrl(url: URL): Verdict;
  /** Checks one address that `host` resolved to. Raw addresses in any encoding are understood. */
  checkAddress(host: string, address: string): Verdict;
}

/** An IP address as bytes: 4 for IPv4, 16 for IPv6. */
export interface IpAddress {
  family: 4 | 6;
  bytes: Uint8Array;
}

const OK: Verdict = Object.freeze({ ok: true });

/** The one error for a refused egress; the client sees only the generic message (SECURITY D7). */
export function egressDeniedError(reason: string): ManifoldError {
  return new ManifoldError('ERR_EGRESS_DENIED', 'egress to this host is not allowed', {
    data: { rule: 'egress-denied', reason },
  });
}

// ---------------------------------------------------------------------------------------------
// IP literal parsing

/**
 * Parses an IPv4 literal the way the WHATWG URL Standard's IPv4 parser does, so every encoding a
 * URL would accept is recognised: 1 to 4 dot-separated parts, each decimal, octal (leading `0`) or
 * hex (`0x`), the last part filling the remaining bytes (`127.1`, `2130706433`, `0x7f000001`,
 * `0177.0.0.1`). One trailing dot is allowed. Returns undefined for anything else.
 *
 * @example
 * parseIPv4('0x7f.1'); // Uint8Array [127, 0, 0, 1]
 * parseIPv4('1.2.3.foo'); // undefined: a domain name
 */
export function parseIPv4(text: string): Uint8Array | undefined {
  const parts = text.split('.');
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  if (parts.length === 0 || parts.length > 4) return undefined;
  const numbers: number[] = [];
  for (const part of parts) {
    const n = parseIPv4Number(part);
    if (n === undefined) return undefined;
    numbers.push(n);
  }
  const last = numbers.pop()!;
  if (numbers.some((n) => n > 255)) return undefined;
  if (last >= 256 ** (4 - numbers.length)) return undefined;
  let value = last;
  for (const [i, n] of numbers.entries()) value += n * 256 ** (3 - i);
  return new Uint8Array([value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255]);
}

function parseIPv4Number(part: string): number | undefined {
  if (part === '') return undefined;
  let digits = part;
  let radix = 10;
  if (/^0[xX]/.test(digits)) {
    digits = digits.slice(2);
    radix = 16;
  } else if (digits.length > 1 && digits.startsWith('0')) {
    digits = digits.slice(1);
    radix = 8;
  }
  // `0x` alone is zero in the WHATWG parser.
  if (digits === '') return 0;
  const valid = radix === 16 ? /^[0-9a-fA-F]+$/ : radix === 8 ? /^[0-7]+$/ : /^[0-9]+$/;
  if (!valid.test(digits)) return undefined;
  const n = Number.parseInt(digits, radix);
  // Precision is lost only far above 2^32, where the caller rejects the value anyway.
  return Number.isFinite(n) ? n : undefined;
}

/**
 * Parses an IPv6 literal (RFC 4291 §2.2): eight groups of 1-4 hex digits, at most one `::`, an
 * optional trailing dotted-decimal IPv4 part, optional brackets and an optional zone (`%eth0`,
 * RFC 6874), which is ignored. The embedded IPv4 part must be plain decimal: `::ffff:0177.0.0.1`
 * is ambiguous and refused rather than guessed.
 *
 * @example
 * parseIPv6('[::ffff:7f00:1]'); // bytes of ::ffff:127.0.0.1
 * parseIPv6('fe80::1%eth0'); // bytes of fe80::1
 */
export function parseIPv6(text: string): Uint8Array | undefined {
  let s = text;
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (!s.includes(':')) return undefined;
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const head = parseGroups(halves[0]!, halves.length === 1);
  const tail = halves.length === 2 ? parseGroups(halves[1]!, true) : [];
  if (!head || !tail) return undefined;
  const total = head.length + tail.length;
  if (halves.length === 1 ? total !== 8 : total > 7) return undefined;
  const bytes = new Uint8Array(16);
  const put = (groups: number[], start: number) => {
    for (const [i, g] of groups.entries()) {
      bytes[(start + i) * 2] = g >>> 8;
      bytes[(start + i) * 2 + 1] = g & 255;
    }
  };
  put(head, 0);
  put(tail, 8 - tail.length);
  return bytes;
}

/** Groups of one `::` half; an IPv4 tail (only allowed at the very end) counts as two groups. */
function parseGroups(text: string, mayEndInIPv4: boolean): number[] | undefined {
  if (text === '') return [];
  const parts = text.split(':');
  const groups: number[] = [];
  for (const [i, part] of parts.entries()) {
    if (i === parts.length - 1 && mayEndInIPv4 && part.includes('.')) {
      const v4 = part.split('.');
      if (v4.length !== 4 || !v4.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255)) {
        return undefined;
      }
      const [a, b, c, d] = v4.map(Number) as [number, number, number, number];
      groups.push((a << 8) | b, (c << 8) | d);
    } else if (/^[0-9a-fA-F]{1,4}$/.test(part)) {
      groups.push(Number.parseInt(part, 16));
    } else {
      return undefined;
    }
  }
  return groups;
}

/**
 * Parses an IP literal in any encoding: IPv6 (bracketed or not) or IPv4 per the WHATWG parser.
 *
 * @example
 * parseIp('2130706433'); // { family: 4, bytes: [127, 0, 0, 1] }
 * parseIp('[::1]'); // { family: 6, bytes: ... }
 * parseIp('example.com'); // undefined
 */
export function parseIp(text: string): IpAddress | undefined {
  if (text.includes(':')) {
    const bytes = parseIPv6(text);
    return bytes ? { family: 6, bytes } : undefined;
  }
  const bytes = parseIPv4(text);
  return bytes ? { family: 4, bytes } : undefined;
}

export function formatIp(ip: IpAddress): string {
  if (ip.family === 4) return Array.from(ip.bytes).join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((ip.bytes[i]! << 8) | ip.bytes[i + 1]!).toString(16));
  return groups.join(':');
}

// ---------------------------------------------------------------------------------------------
// Range classification

interface Range {
  bytes: Uint8Array;
  bits: number;
  label: string;
}

function range(cidr: string, label: string): Range {
  const [addr, bits] = cidr.split('/') as [string, string];
  const ip = parseIp(addr);
  if (!ip) throw new Error(`bad built-in range ${cidr}`);
  return { bytes: ip.bytes, bits: Number(bits), label };
}

function inRange(bytes: Uint8Array, r: Range): boolean {
  if (bytes.length !== r.bytes.length) return false;
  let bits = r.bits;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((bytes[i]! & mask) !== (r.bytes[i]! & mask)) return false;
  }
  return true;
}

// IANA IPv4 Special-Purpose Address Registry (RFC 6890 and its updates), plus the cloud metadata
// endpoints. Most specific first so the label names the sharper reason. Blocks the registry marks
// globally reachable (AS112, AMT) are left out.
const V4_RANGES: readonly Range[] = [
  range('169.254.169.254/32', 'cloud metadata endpoint'),
  range('100.100.100.200/32', 'cloud metadata endpoint'),
  range('0.0.0.0/8', 'unspecified, "this network" (RFC 1122 §3.2.1.3)'),
  range('10.0.0.0/8', 'private (RFC 1918)'),
  range('100.64.0.0/10', 'shared address space, CGNAT (RFC 6598)'),
  range('127.0.0.0/8', 'loopback (RFC 1122 §3.2.1.3)'),
  range('169.254.0.0/16', 'link-local (RFC 3927)'),
  range('172.16.0.0/12', 'private (RFC 1918)'),
  range('192.0.0.0/24', 'IETF protocol assignments (RFC 6890)'),
  range('192.0.2.0/24', 'documentation, TEST-NET-1 (RFC 5737)'),
  range('192.88.99.0/24', 'deprecated 6to4 relay anycast (RFC 7526)'),
  range('192.168.0.0/16', 'private (RFC 1918)'),
  range('198.18.0.0/15', 'benchmarking (RFC 2544)'),
  range('198.51.100.0/24', 'documentation, TEST-NET-2 (RFC 5737)'),
  range('203.0.113.0/24', 'documentation, TEST-NET-3 (RFC 5737)'),
  range('224.0.0.0/4', 'multicast (RFC 5771)'),
  range('255.255.255.255/32', 'limited broadcast (RFC 919)'),
  range('240.0.0.0/4', 'reserved (RFC 1112 §4)'),
];

// IANA IPv6 Special-Purpose Address Registry. Anything outside 2000::/3 that is not listed here is
// caught afterwards: only 2000::/3 is allocated as global unicast (RFC 4291 §2.4).
const V6_RANGES: readonly Range[] = [
  range('::/128', 'unspecified (RFC 4291 §2.5.2)'),
  range('::1/128', 'loopback (RFC 4291 §2.5.3)'),
  range('fd00:ec2::254/128', 'cloud metadata endpoint'),
  range('64:ff9b:1::/48', 'local-use NAT64 (RFC 8215)'),
  range('100::/64', 'discard-only (RFC 6666)'),
  range('2001:db8::/32', 'documentation (RFC 3849)'),
  range('2001::/32', 'Teredo (RFC 4380)'),
  range('2001::/23', 'IETF protocol assignments (RFC 2928)'),
  range('3fff::/20', 'documentation (RFC 9637)'),
  range('5f00::/16', 'SRv6 SIDs (RFC 9602)'),
  range('fc00::/7', 'unique local (RFC 4193)'),
  range('fe80::/10', 'link-local (RFC 4291 §2.5.6)'),
  range('fec0::/10', 'deprecated site-local (RFC 3879)'),
  range('ff00::/8', 'multicast (RFC 4291 §2.7)'),
];
const GLOBAL_UNICAST = range('2000::/3', 'global unicast');

// IPv6 forms that carry an IPv4 address, which is what the packets finally reach (or what a
// dual-stack socket connects to), so that embedded address is what gets classified.
const V4_MAPPED = range('::ffff:0:0/96', 'IPv4-mapped (RFC 4291 §2.5.5.2)');
const V4_TRANSLATED = range('::ffff:0:0:0/96', 'IPv4-translated (RFC 2765)');
const NAT64 = range('64:ff9b::/96', 'NAT64 (RFC 6052)');
const SIX_TO_FOUR = range('2002::/16', '6to4 (RFC 3056)');
const V4_COMPATIBLE = range('::/96', 'IPv4-compatible, deprecated (RFC 4291 §2.5.5.1)');

/**
 * Why an address is not public, or undefined when it is. Covers private, loopback, link-local,
 * CGNAT, multicast, unspecified, metadata, documentation and reserved ranges, and IPv4 addresses
 * embedded in IPv6 (mapped, translated, NAT64, 6to4, IPv4-compatible).
 *
 * @example
 * nonPublicReason(parseIp('::ffff:7f00:1')!); // 'IPv4-mapped (RFC 4291 §2.5.5.2) 127.0.0.1: loopback ...'
 * nonPublicReason(parseIp('8.8.8.8')!); // undefined
 */
export function nonPublicReason(ip: IpAddress): string | undefined {
  const { bytes } = ip;
  if (ip.family === 4) return V4_RANGES.find((r) => inRange(bytes, r))?.label;
  for (const [wrapper, offset] of [
    [V4_MAPPED, 12],
    [V4_TRANSLATED, 12],
    [NAT64, 12],
    [SIX_TO_FOUR, 2],
  ] as const) {
    if (inRange(bytes, wrapper)) return embedded(wrapper, bytes.slice(offset, offset + 4));
  }
  const special = V6_RANGES.find((r) => inRange(bytes, r));
  if (special) return special.label;
  // Deprecated and never routed on the public internet; refused whatever it embeds.
  if (inRange(bytes, V4_COMPATIBLE)) {
    return embedded(V4_COMPATIBLE, bytes.slice(12, 16)) ?? V4_COMPATIBLE.label;
  }
  if (!inRange(bytes, GLOBAL_UNICAST)) return 'not global unicast, outside 2000::/3 (RFC 4291 §2.4)';
  return undefined;
}

function embedded(wrapper: Range, v4: Uint8Array): string | undefined {
  const inner = nonPublicReason({ family: 4, bytes: v4 });
  return inner === undefined ? undefined : `${wrapper.label} ${formatIp({ family: 4, bytes: v4 })}: ${inner}`;
}

// ---------------------------------------------------------------------------------------------
// The policy

interface HostEntry {
  host: string;
  port?: number;
}

/**
 * Builds the egress policy for one gateway. Entries are normalized once here, the same way WHATWG
 * `URL` normalizes a request's host, so matching is a plain string comparison.
 *
 * @example
 * const policy = egressPolicy({ allowedHosts: ['api.example.com', '127.0.0.1:8080'] });
 * policy.checkUrl(new URL('https://api.example.com/mcp')); // { ok: true }
 * policy.checkUrl(new URL('http://127.0.0.1:8080/mcp')); // { ok: true }: listed, so http is allowed
 * policy.checkUrl(new URL('http://127.0.0.1:9090/mcp')); // { ok: false, reason: ... }
 * policy.checkAddress('api.example.com', '10.0.0.5'); // { ok: true }: the host is listed
 * egressPolicy({ allowedHosts: [] }).checkAddress('evil.example', '169.254.169.254'); // refused
 */
export function egressPolicy(options: EgressPolicyOptions): EgressPolicy {
  if (!options || !Array.isArray(options.allowedHosts)) {
    throw new ManifoldError('ERR_CONFIG', 'egressPolicy: allowedHosts must be an array of host names');
  }
  const entries = options.allowedHosts.map(parseEntry);
  const restricted = entries.length > 0;
  const listedHosts = new Set(entries.map((e) => e.host));

  const isListed = (host: string, port: number) =>
    entries.some((e) => e.host === host && (e.port === undefined || e.port === port));

  return {
    checkUrl: function checkEgressUrl(url: URL): Verdict {
      if (url.username !== '' || url.password !== '') return deny('the URL carries credentials');
      if (url.protocol !== 'https:' && url.protocol !== 'http:') {
        return deny(`scheme ${url.protocol} is not allowed`);
      }
      const host = url.hostname.toLowerCase();
      const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
      const where = `${host}:${port}`;
      if (isListed(host, port)) return OK;
      if (url.protocol === 'http:') return deny(`plain http to ${where}, which is not in allowedHosts`);
      if (restricted) return deny(`${where} is not in allowedHosts`);
      const ip = parseIp(host);
      if (ip) {
        const why = nonPublicReason(ip);
        return why ? deny(`${where} is a ${why} address`) : OK;
      }
      if (host.includes(':') || host.startsWith('[')) return deny(`unparseable IP literal ${host}`);
      // RFC 6761 §6.3: these names always mean loopback. Node's lookup hook would refuse the
      // answer anyway; refusing by name also covers runtimes without that hook (Workers).
      const bare = host.endsWith('.') ? host.slice(0, -1) : host;
      if (bare === 'localhost' || bare.endsWith('.localhost')) {
        return deny(`${where} is a loopback name (RFC 6761)`);
      }
      return OK;
    },
    checkAddress: function checkEgressAddress(host: string, address: string): Verdict {
      const ip = parseIp(address);
      // Fail closed: an answer we cannot classify is not connected to.
      if (!ip) return deny(`${host} resolved to something that is not an IP address`);
      // The port half of a listed entry was already enforced by checkUrl, which runs before
      // every request and hop; a lookup hook does not learn the port.
      if (listedHosts.has(host.toLowerCase())) return OK;
      const why = nonPublicReason(ip);
      return why ? deny(`${host} resolved to ${formatIp(ip)}, a ${why} address`) : OK;
    },
  };
}

function deny(reason: string): Verdict {
  return { ok: false, reason };
}

/** `host`, `host:port`, `[v6]` or `[v6]:port`, normalized like a URL's host. */
function parseEntry(entry: unknown, index: number): HostEntry {
  const bad = (why: string) =>
    new ManifoldError('ERR_CONFIG', `allowedHosts[${index}]: ${why}`, {
      data: { path: `allowedHosts[${index}]` },
    });
  if (typeof entry !== 'string' || entry.trim() === '') throw bad('expected a non-empty host name');
  const text = entry.trim();
  // Anything beyond host and port would make the entry mean something other than it reads.
  if (/[/?#@\\\s]/.test(text)) throw bad('expected a host name, optionally with :port, not a URL');
  let hostPart = text;
  let port: number | undefined;
  const withPort = /^(\[[^\]]*\]|[^:[\]]+):([0-9]+)$/.exec(text);
  if (withPort) {
    hostPart = withPort[1]!;
    port = Number(withPort[2]);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw bad('the port must be 1-65535');
  } else if (text.includes(':') && !text.startsWith('[')) {
    // A bare IPv6 address: bracket it so URL parses it as a host.
    if (!parseIPv6(text)) throw bad('expected host, host:port, [v6] or [v6]:port');
    hostPart = `[${text}]`;
  }
  let host: string;
  try {
    // WHATWG URL applies the same normalization a request URL gets: IDN to punycode (UTS #46),
    // lowercase, canonical IPv4 and compressed IPv6. The port is kept out so `:80` is not dropped.
    host = new URL(`http://${hostPart}/`).hostname;
  } catch {
    throw bad('not a valid host name');
  }
  if (host === '') throw bad('not a valid host name');
  return port === undefined ? { host } : { host, port };
}
