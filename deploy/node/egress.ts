/**
 * Node's egress fetch: undici's own fetch on an Agent whose every new connection resolves its host
 * through a checked lookup, wrapped by the runtime-neutral guardedFetch (URL check, redirects by
 * hand, body cap). Checking at connect time, on the addresses the socket will actually use, is what
 * defeats DNS rebinding: a verdict is never cached, so a name that answered a public address a
 * second ago and now answers 169.254.169.254 is refused on the next connection (SECURITY D3).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { setMaxListeners } from 'node:events';
import type { LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import { Agent, fetch as undiciFetch } from 'undici';
import { ManifoldError } from '../../src/errors.js';
import { type EgressPolicy, egressDeniedError, egressPolicy, parseIp } from '../../src/guards/egress.js';
import type { Logger } from '../../src/log.js';
import { guardedFetch } from '../../src/upstream/egress-fetch.js';

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

/**
 * The fetch Node gives the core as `platform.fetch`: every upstream, JWKS and metadata request.
 *
 * @example
 * const f = nodeEgressFetch({ allowedHosts: ['127.0.0.1:3001'], maxUpstreamBodyBytes: 8 << 20 });
 * await f('http://127.0.0.1:3001/mcp'); // listed: allowed, even over http and on loopback
 * await f('https://internal.example/'); // refused at connect time if it resolves to 10.x
 */
export function nodeEgressFetch(options: NodeEgressOptions): typeof fetch {
  const policy = egressPolicy({ allowedHosts: options.allowedHosts });
  const lookup = checkedLookup(policy, options.resolver ?? systemResolver);
  const agent = new Agent({ connect: { lookup }, keepAliveTimeout: 30_000 });
  const slow = ((input: RequestInfo | URL, init?: RequestInit) =>
    undiciFetch(input as Parameters<typeof undiciFetch>[0], {
      ...(init as Parameters<typeof undiciFetch>[1]),
      dispatcher: agent,
    })) as unknown as typeof fetch;
  const base = fastFetch(agent, slow, options.maxUpstreamBodyBytes);
  const log = options.log;
  return guardedFetch(base, {
    policy,
    maxBodyBytes: options.maxUpstreamBodyBytes,
    ...(options.maxRedirects === undefined ? {} : { maxRedirects: options.maxRedirects }),
    ...(log ? { onDenied: (reason: string) => log.warn('egress.denied', { reason }) } : {}),
  });
}

const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const unlimited = new WeakSet<AbortSignal>();

/**
 * fetch() over undici's `request` for what MCP transports send (a string body, or none): the same
 * pooled, DNS-checked connections, without web-stream plumbing on the hot path. A JSON answer is
 * read whole, up to the body cap, and handed back as a buffered Response with its length, so the
 * guard above need not re-stream it; an event stream stays a stream. Anything else (a streamed
 * request body, a Request object) goes through undici's fetch.
 */
function fastFetch(agent: Agent, slow: typeof fetch, maxBodyBytes: number): typeof fetch {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const body = init?.body;
    if (
      (typeof input !== 'string' && !(input instanceof URL)) ||
      (body != null && typeof body !== 'string')
    ) {
      return slow(input, init);
    }
    const url = new URL(input);
    const headers: Record<string, string> = {};
    const given = init?.headers;
    (given instanceof Headers ? given : new Headers(given)).forEach((v, k) => {
      headers[k] = v;
    });
    // The body is read whole below; ask for it uncompressed so its bytes are what they say.
    headers['accept-encoding'] = 'identity';
    // MCP transports pass one long-lived signal with every request; each in-flight request adds
    // a listener to it, so concurrency past ten would warn of a leak that is not one.
    if (init?.signal && !unlimited.has(init.signal)) {
      setMaxListeners(0, init.signal);
      unlimited.add(init.signal);
    }
    const res = await agent.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: (init?.method ?? 'GET') as 'GET',
      headers,
      ...(typeof body === 'string' ? { body } : {}),
      ...(init?.signal ? { signal: init.signal } : {}),
    });
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers)) {
      if (Array.isArray(v)) for (const item of v) out.append(k, item);
      else if (v !== undefined) out.set(k, v);
    }
    if (NULL_BODY.has(res.statusCode)) {
      res.body.resume();
      return new Response(null, { status: res.statusCode, headers: out });
    }
    if ((out.get('content-type') ?? '').toLowerCase().includes('text/event-stream')) {
      return new Response(Readable.toWeb(res.body) as ReadableStream<Uint8Array>, {
        status: res.statusCode,
        headers: out,
      });
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).byteLength;
      if (size > maxBodyBytes) {
        res.body.destroy();
        throw new ManifoldError(
          'ERR_UPSTREAM_BODY_TOO_LARGE',
          `the upstream response exceeded maxUpstreamBodyBytes (${maxBodyBytes} bytes)`,
        );
      }
      chunks.push(chunk as Buffer);
    }
    const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    out.set('content-length', String(buf.byteLength));
    return new BufferedResponse(buf, res.statusCode, out) as unknown as Response;
  }) as typeof fetch;
}

/**
 * A Response whose body is already in memory. Building undici's Response and then reading it back
 * through a web stream costs more than the rest of a relayed call; the MCP transports and jose
 * only need status, headers and the body as text or JSON. `body` is made on demand for anyone who
 * wants the stream.
 */
class BufferedResponse {
  readonly ok: boolean;
  readonly statusText = '';
  readonly redirected = false;
  readonly type = 'basic';
  readonly url = '';
  private used = false;

  constructor(
    private readonly buf: Buffer,
    readonly status: number,
    readonly headers: Headers,
  ) {
    this.ok = status >= 200 && status < 300;
  }

  get bodyUsed(): boolean {
    return this.used;
  }

  get body(): ReadableStream<Uint8Array> | null {
    const bytes = this.take();
    return new ReadableStream<Uint8Array>({
      start(controller) {
        if (bytes.byteLength > 0) controller.enqueue(new Uint8Array(bytes));
        controller.close();
      },
    });
  }

  private take(): Buffer {
    if (this.used) throw new TypeError('Body is unusable: Body has already been read');
    this.used = true;
    return this.buf;
  }

  async text(): Promise<string> {
    return this.take().toString('utf8');
  }

  async json(): Promise<unknown> {
    return JSON.parse(this.take().toString('utf8'));
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    const b = this.take();
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
  }

  clone(): BufferedResponse {
    return new BufferedResponse(Buffer.from(this.buf), this.status, new Headers(this.headers));
  }
}
