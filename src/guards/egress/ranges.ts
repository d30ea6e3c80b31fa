/**
 * Address range classification for the egress policy: the IANA special-purpose registries for
 * IPv4 and IPv6, cloud metadata endpoints, and IPv4 addresses embedded in IPv6.
 */
import { formatIp, type IpAddress, parseIp } from './ip.js';

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
