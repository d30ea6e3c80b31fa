/**
 * How the Node gateway reaches out: its HTTP client (http-client.ts: undici on an Agent whose every
 * new connection resolves its host through the checked lookup below), behind the runtime-neutral
 * egress guard (URL check, redirects by hand, body cap). Checking at connect time, on the addresses
 * the socket will actually use, is what defeats DNS rebinding: a verdict is never cached, so a name
 * that answered a public address a second ago and now answers 169.254.169.254 is refused on the
 * next connection (SECURITY D3).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { parseIp } from '../../../src/guards/egress/ip.js';
import { type EgressPolicy, egressDeniedError, egressPolicy } from '../../../src/guards/egress/policy.js';
import type { Logger } from '../../../src/lib/log.js';
import type { PostJson } from '../../../src/platform.js';
import { guardedFetch, guardedPost } from '../../../src/upstream/wire/egress-fetch.js';
import type { HttpClient } from './http-client.js';

/** One address a name resolved to, as dns.lookup({ all: true }) gives it. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a hostname to all its addresses. Injectable so tests can script DNS answers. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** The system resolver (getaddrinfo via dns.lookup), every address, in the resolver's order. */
export const systemResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/**
 * A net/tls `lookup` that resolves with `resolver` and refuses (calls back with ERR_EGRESS_DENIED)
 * when any answer is not allowed for the host. Any, not just the first: with autoSelectFamily
 * (Happy Eyeballs, on by default since Node 20) the socket may try every address in turn. A
 * resolver failure, an empty answer or a non-IP answer fails closed.
 *
 * net.connect skips lookup for IP-literal hosts, so those are checked by the URL check instead.
 *
 * @example
 * const lookup = checkedLookup(egressPolicy({ allowedHosts: [] }), systemResolver);
 * net.connect({ host: 'example.com', port: 443, lookup }); // refused if it resolves privately
 */
export function checkedLookup(policy: EgressPolicy, resolver: Resolver = systemResolver): LookupFunction {
  if (typeof resolver !== 'function') throw new TypeError('checkedLookup: resolver must be a function');
  return function egressLookup(hostname, options, callback) {
    resolver(hostname).then(
      (answers) => {
        if (!Array.isArray(answers) || answers.length === 0) {
          callback(egressDeniedError(`${hostname} resolved to no address`), '');
          return;
        }
        const addresses: { address: string; family: number }[] = [];
        for (const answer of answers) {
          const address = String(answer?.address ?? '');
          const verdict = policy.checkAddress(hostname, address);
          if (!verdict.ok) {
            callback(egressDeniedError(verdict.reason), '');
            return;
          }
          addresses.push({ address, family: parseIp(address)?.family ?? 0 });
        }
        const hint = options.family;
        const family = hint === 4 || hint === 'IPv4' ? 4 : hint === 6 || hint === 'IPv6' ? 6 : 0;
        const usable = family === 0 ? addresses : addresses.filter((a) => a.family === family);
        const first = usable[0];
        if (!first) {
          callback(egressDeniedError(`${hostname} has no IPv${family} address`), '');
          return;
        }
        if (options.all) callback(null, usable);
        else callback(null, first.address, first.family);
      },
      (err: unknown) => {
        // Fail closed: no answer, no connection.
        callback(err instanceof Error ? err : new Error(`DNS lookup of ${hostname} failed`), '');
      },
    );
  };
}

export interface NodeEgressOptions {
  allowedHosts: readonly string[];
  maxUpstreamBodyBytes: number;
  /** Defaults to the system resolver. */
  resolver?: Resolver;
  /** Where refusals are logged with their detailed reason (never shown to clients). */
  log?: Logger;
  maxRedirects?: number;
}

/** The two ways out of a Node gateway (`Platform.fetch` and `Platform.postJson`), on one Agent. */
export interface NodeEgress {
  fetch: typeof fetch;
  postJson: PostJson;
}

/**
 * @example
 * const { fetch } = nodeEgress({ allowedHosts: ['127.0.0.1:3001'], maxUpstreamBodyBytes: 8 << 20 });
 * await fetch('http://127.0.0.1:3001/mcp'); // listed: allowed, even over http and on loopback
 * await fetch('https://internal.example/'); // refused at connect time if it resolves to 10.x
 */
export function nodeEgress(options: NodeEgressOptions): NodeEgress {
  const policy = egressPolicy({ allowedHosts: options.allowedHosts });
  const lookup = checkedLookup(policy, options.resolver ?? systemResolver);
  const max = options.maxUpstreamBodyBytes;
  // undici is a megabyte of JavaScript: it loads with the first request out, not before the
  // gateway listens (a gateway of stdio servers without remote JWKS never loads it).
  let client: HttpClient | undefined;
  let loading: Promise<HttpClient> | undefined;
  const load = () =>
    (loading ??= import('./http-client.js').then((m) => {
      client = m.httpClient(lookup, max);
      return client;
    }));
  const send = ((input: RequestInfo | URL, init?: RequestInit) =>
    client ? client.fetch(input, init) : load().then((c) => c.fetch(input, init))) as typeof fetch;
  const log = options.log;
  const guard = {
    policy,
    ...(options.maxRedirects === undefined ? {} : { maxRedirects: options.maxRedirects }),
    ...(log ? { onDenied: (reason: string) => log.warn('egress.denied', { reason }) } : {}),
  };
  return {
    fetch: guardedFetch(send, { ...guard, maxBodyBytes: max }),
    postJson: guardedPost(
      (hop) => (client ? client.exchange(hop) : load().then((c) => c.exchange(hop))),
      guard,
    ),
  };
}
