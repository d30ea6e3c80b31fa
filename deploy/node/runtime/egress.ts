/**
 * How the Node gateway reaches out: undici on an Agent whose every new connection resolves its host
 * through a checked lookup, behind the runtime-neutral egress guard (URL check, redirects by hand,
 * body cap). Checking at connect time, on the addresses the socket will actually use, is what
 * defeats DNS rebinding: a verdict is never cached, so a name that answered a public address a
 * second ago and now answers 169.254.169.254 is refused on the next connection (SECURITY D3).
 *
 * Two entries, one Agent: `fetch`, undici's own (for the SDK transports, jose and OAuth), and
 * `postJson`, one exchange on undici's dispatcher for the direct caller (`Platform.postJson`).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import type { Agent, Dispatcher } from 'undici';
import { ManifoldError } from '../../../src/errors.js';
import {
  type EgressPolicy,
  egressDeniedError,
  egressPolicy,
  parseIp,
} from '../../../src/guards/egress/policy.js';
import type { Logger } from '../../../src/lib/log.js';
import type { JsonAnswer, PostJson } from '../../../src/platform.js';
import {
  bodyTooLarge,
  declaredOver,
  eventCap,
  guardedFetch,
  guardedPost,
  isEventStream,
  NULL_BODY_STATUSES,
  type SendHop,
} from '../../../src/upstream/wire/egress-fetch.js';

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
  let undici: Promise<{ agent: Agent; fetch: typeof import('undici').fetch }> | undefined;
  const load = () =>
    (undici ??= import('undici').then((u) => ({
      agent: new u.Agent({ connect: { lookup }, keepAliveTimeout: 30_000 }),
      fetch: u.fetch,
    })));
  const send = (async (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
    const u = await load();
    return u.fetch(input as Parameters<typeof u.fetch>[0], {
      ...(init as Parameters<typeof u.fetch>[1]),
      dispatcher: u.agent,
    });
  }) as unknown as typeof fetch;
  const log = options.log;
  const guard = {
    policy,
    ...(options.maxRedirects === undefined ? {} : { maxRedirects: options.maxRedirects }),
    ...(log ? { onDenied: (reason: string) => log.warn('egress.denied', { reason }) } : {}),
  };
  return {
    fetch: guardedFetch(send, { ...guard, maxBodyBytes: max }),
    postJson: guardedPost(async (hop) => exchange((await load()).agent, hop, max), guard),
  };
}

type HeaderRecord = Record<string, string | string[] | undefined>;

/** Bytes of an event stream queued for its reader before the socket is paused. */
const SSE_HIGH_WATER = 64 * 1024;

/**
 * One request on undici's dispatcher, which hands each part of the answer to a handler: a JSON
 * answer is collected whole (refused past the cap), an event stream becomes a web stream with
 * backpressure, each event capped. The signal aborts the request at any stage.
 */
function exchange(agent: Agent, hop: Parameters<SendHop>[0], max: number): Promise<JsonAnswer> {
  const { url, method, body, signal } = hop;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(hop.headers)) headers[k.toLowerCase()] = v;
  // The body is read as it comes, not decoded: ask for it as it is.
  headers['accept-encoding'] = 'identity';
  return new Promise<JsonAnswer>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    let controller: Dispatcher.DispatchController | undefined;
    let abortedEarly: unknown;
    let settled = false;
    let status = 0;
    let record: HeaderRecord = {};
    let stream: ReadableStreamDefaultController<Uint8Array> | undefined;
    let chunks: Buffer[] | undefined;
    let size = 0;
    const answer = (bytes: Buffer | undefined, events: ReadableStream<Uint8Array> | undefined) => {
      settled = true;
      resolve(new NodeAnswer(status, record, bytes, events));
    };
    const onAbort = () => {
      if (controller) controller.abort(signal.reason);
      else {
        // Still queued: settle now, and abort when a connection picks it up.
        abortedEarly = signal.reason;
        fail(signal.reason);
      }
    };
    signal.addEventListener('abort', onAbort);
    const done = () => signal.removeEventListener('abort', onAbort);
    const fail = (error: unknown) => {
      done();
      if (!settled) {
        settled = true;
        reject(error);
      } else {
        try {
          stream?.error(error);
        } catch {
          // already closed
        }
      }
    };
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (abortedEarly !== undefined) c.abort(abortedEarly as Error);
      },
      onResponseStart(c, statusCode, given) {
        status = statusCode;
        record = given as HeaderRecord;
        if (NULL_BODY_STATUSES.has(status)) {
          answer(undefined, undefined);
          return;
        }
        const encoding = record['content-encoding'];
        if (encoding !== undefined && encoding !== 'identity') {
          c.abort(
            new ManifoldError(
              'ERR_UPSTREAM_ERROR',
              'the upstream answered with an encoding it was not asked for',
            ),
          );
          return;
        }
        if (isEventStream(header(record, 'content-type'))) {
          const events = new ReadableStream<Uint8Array>(
            {
              start(s) {
                stream = s;
              },
              pull() {
                if (c.paused) c.resume();
              },
              cancel(reason) {
                c.abort(reason instanceof Error ? reason : new Error('the reader cancelled the stream'));
              },
            },
            // Counted in bytes, so a reader that keeps up never pauses the socket.
            new ByteLengthQueuingStrategy({ highWaterMark: SSE_HIGH_WATER }),
          );
          answer(undefined, events.pipeThrough(eventCap(max)));
          return;
        }
        if (declaredOver(header(record, 'content-length'), max)) {
          c.abort(bodyTooLarge(max));
          return;
        }
        chunks = [];
      },
      onResponseData(c, chunk) {
        if (stream) {
          // undici's resume re-runs its parser on an empty buffer and reports an empty chunk:
          // pausing for it would wait for a resume for ever, never reading the socket again (#13).
          if (chunk.byteLength === 0) return;
          stream.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((stream.desiredSize ?? 1) <= 0) c.pause();
          return;
        }
        if (!chunks) return;
        size += chunk.byteLength;
        if (size > max) {
          chunks = undefined;
          c.abort(bodyTooLarge(max));
          return;
        }
        chunks.push(chunk);
      },
      onResponseEnd() {
        done();
        if (stream) {
          try {
            stream.close();
          } catch {
            // cancelled by its reader
          }
          return;
        }
        if (settled || !chunks) return;
        const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
        chunks = undefined;
        answer(bytes, undefined);
      },
      onResponseError(_c, error) {
        fail(error);
      },
    };
    agent.dispatch(
      {
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: method as Dispatcher.HttpMethod,
        headers,
        body,
      },
      handler,
    );
  });
}

/** A header of undici's record (names in lower case), repeats joined as Headers.get joins them. */
function header(record: HeaderRecord, name: string): string | null {
  const v = record[name.toLowerCase()];
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(', ') : v;
}

/** An answer of `exchange`: a JSON body held whole, or an event stream as it arrives. */
class NodeAnswer implements JsonAnswer {
  readonly headers: { get(name: string): string | null };
  private used = false;

  constructor(
    readonly status: number,
    record: HeaderRecord,
    /** Let go once read: an answer kept by a caller must not keep a big body. */
    private bytes: Buffer | undefined,
    private readonly events: ReadableStream<Uint8Array> | undefined,
  ) {
    this.headers = { get: (name) => header(record, name) };
  }

  get body(): ReadableStream<Uint8Array> | null {
    if (this.events) return this.events;
    const bytes = this.take();
    if (!bytes) return null;
    return new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array(bytes));
        controller.close();
      },
    });
  }

  async text(): Promise<string> {
    if (this.events) return new Response(this.events).text();
    const text = this.take()?.toString('utf8') ?? '';
    // UTF-8 decode drops a leading byte order mark (Encoding Standard), as Response.text does.
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  }

  private take(): Buffer | undefined {
    if (this.used) throw new TypeError('Body is unusable: Body has already been read');
    this.used = true;
    const bytes = this.bytes;
    this.bytes = undefined;
    return bytes;
  }
}
