/**
 * Egress policy: which upstream URLs and which resolved addresses the gateway may connect to.
 * Pure and runtime-neutral: no DNS, no sockets. The runtimes apply it at two points:
 *
 * - `checkUrl` before every request and every redirect hop (see upstream/wire/egress-fetch.ts). This is
 *   the only point where IP-literal hosts can be caught, because net.connect skips DNS lookup
 *   (and so any lookup hook) for them.
 * - `checkAddress` on each address a hostname resolves to, at connect time. Node does this in the
 *   undici Agent's `lookup` (deploy/node/runtime/egress.ts), so a name that resolves to a private address
 *   is refused even if it pointed somewhere public a moment earlier (DNS rebinding).
 *
 * Cloudflare Workers expose no DNS or connect hook, so there the guard is the hostname allowlist
 * plus the IP-literal checks in `checkUrl`; a public name that resolves to a private address is
 * not caught by Manifold (Workers' own fetch cannot reach private networks anyway).
 *
 * This module is the policy factory; IP literal parsing lives in ip.ts and address range
 * classification in ranges.ts (both re-exported here).
 */
import { ManifoldError } from '../../errors.js';
import { formatIp, parseIPv6, parseIp } from './ip.js';
import { nonPublicReason } from './ranges.js';

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

const OK: Verdict = Object.freeze({ ok: true });

/** The one error for a refused egress; the client sees only the generic message (SECURITY D7). */
export function egressDeniedError(reason: string): ManifoldError {
  return new ManifoldError('ERR_EGRESS_DENIED', 'egress to this host is not allowed', {
    data: { rule: 'egress-denied', reason },
  });
}

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
 * policy.checkAddress('api.example.com', '169.254.169.254'); // refused: metadata, unless listed itself
 * egressPolicy({ allowedHosts: [] }).checkAddress('evil.example', '169.254.169.254'); // refused
 */
export function egressPolicy(options: EgressPolicyOptions): EgressPolicy {
  if (!options || !Array.isArray(options.allowedHosts)) {
    throw new ManifoldError('ERR_CONFIG', 'egressPolicy: allowedHosts must be an array of host names');
  }
  const entries = options.allowedHosts.map(parseEntry);
  const restricted = entries.length > 0;
  const listedHosts = new Set(entries.map((e) => e.host));
  // Listed IP literals in formatIp's form, to compare with a resolved address.
  const listedIps = new Set(
    entries.flatMap((e) => {
      const ip = parseIp(e.host.replace(/^\[(.*)\]$/, '$1'));
      return ip ? [formatIp(ip)] : [];
    }),
  );

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
      if (url.protocol === 'http:') {
        return deny(`plain http to ${where}, which is not in allowedHosts; ${allow(where)}`);
      }
      if (restricted) return deny(`${where} is not in allowedHosts; ${allow(where)}`);
      const ip = parseIp(host);
      if (ip) {
        const why = nonPublicReason(ip);
        return why ? deny(`${where} is a ${why} address; ${allow(where)}`) : OK;
      }
      if (host.includes(':') || host.startsWith('[')) return deny(`unparseable IP literal ${host}`);
      // RFC 6761 §6.3: these names always mean loopback. Node's lookup hook would refuse the
      // answer anyway; refusing by name also covers runtimes without that hook (Workers).
      const bare = host.endsWith('.') ? host.slice(0, -1) : host;
      if (bare === 'localhost' || bare.endsWith('.localhost')) {
        return deny(`${where} is a loopback name (RFC 6761); ${allow(where)}`);
      }
      return OK;
    },
    checkAddress: function checkEgressAddress(host: string, address: string): Verdict {
      const ip = parseIp(address);
      // Fail closed: an answer we cannot classify is not connected to.
      if (!ip) return deny(`${host} resolved to something that is not an IP address`);
      // The port half of a listed entry was already enforced by checkUrl, which runs before
      // every request and hop; a lookup hook does not learn the port.
      const why = nonPublicReason(ip);
      if (listedHosts.has(host.toLowerCase())) {
        // A listed name may resolve privately (that is why it is listed), but never to a cloud
        // metadata endpoint or a link-local address unless that address itself is listed: a
        // name's DNS can change under the operator (#13.12).
        if (!why || !/metadata|link-local/.test(why)) return OK;
        const literal = formatIp(ip);
        if (listedIps.has(literal)) return OK;
        return deny(
          `${host} resolved to ${literal}, a ${why} address; list the address itself in allowedHosts to reach it`,
        );
      }
      return why ? deny(`${host} resolved to ${formatIp(ip)}, a ${why} address; ${allow(host)}`) : OK;
    },
  };
}

/** The fix a refusal names: the entry that would allow it (SECURITY D1: never implicit). */
function allow(entry: string): string {
  return `to allow it, add "${entry}" to gateway.allowedHosts`;
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
