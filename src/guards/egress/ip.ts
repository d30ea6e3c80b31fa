/**
 * IP literal parsing for the egress policy: IPv4 in every encoding the WHATWG URL parser accepts,
 * IPv6 per RFC 4291 (brackets, zones, embedded IPv4), and formatting back to text.
 */

/** An IP address as bytes: 4 for IPv4, 16 for IPv6. */
export interface IpAddress {
  family: 4 | 6;
  bytes: Uint8Array;
}

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
