/**
 * fetch() over undici's `request` for what MCP transports send (a string body, or none): the same
 * pooled, DNS-checked connections as undici's fetch, without its web-stream and Headers plumbing
 * on the hot path. Every relayed tools/call goes through here, so each allocation counts.
 */
import { isAscii } from 'node:buffer';
import { setMaxListeners } from 'node:events';
import type { Agent, Dispatcher } from 'undici';
import { ManifoldError } from '../../../src/errors.js';

const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const EMPTY = Buffer.alloc(0);
/** Bodies from this size on are decoded to text with the ASCII check below. */
const LARGE_TEXT = 64 * 1024;
const unlimited = new WeakSet<AbortSignal>();
/** Bytes of an event stream queued for its reader before the socket is paused. */
const SSE_HIGH_WATER = 64 * 1024;
type HeaderRecord = Record<string, string | string[] | undefined>;

/**
 * A JSON answer is read whole, up to the body cap, and handed back as a buffered Response with
 * its length, so the guard above need not re-stream it; an event stream stays a stream. Anything
 * else (a streamed request body, a Request object) goes through `slow` (undici's fetch).
 */
export function fastFetch(agent: Agent, slow: typeof fetch, maxBodyBytes: number): typeof fetch {
  // An upstream's endpoint is the same string on every call: parse it once (bounded).
  const targets = new Map<string, { origin: string; path: string }>();
  const target = (input: string | URL) => {
    const key = typeof input === 'string' ? input : input.href;
    let t = targets.get(key);
    if (!t) {
      const url = new URL(key);
      t = { origin: url.origin, path: `${url.pathname}${url.search}` };
      if (targets.size >= 256) targets.clear();
      targets.set(key, t);
    }
    return t;
  };

  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const body = init?.body;
    if (
      (typeof input !== 'string' && !(input instanceof URL)) ||
      (body != null && typeof body !== 'string')
    ) {
      return slow(input, init);
    }
    const { origin, path } = target(input);
    const headers = lowercased(init?.headers);
    // The body is read whole below; ask for it uncompressed so its bytes are what they say.
    headers['accept-encoding'] = 'identity';
    return exchange(
      agent,
      {
        origin,
        path,
        method: (init?.method ?? 'GET') as 'GET',
        headers,
        ...(typeof body === 'string' ? { body } : {}),
      },
      init?.signal ?? undefined,
      maxBodyBytes,
    );
  }) as typeof fetch;
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/**
 * One request through undici's dispatcher interface, which hands each response part to a handler
 * (no intermediate body stream, no promise per chunk): a JSON answer is collected into a
 * BufferedResponse, an event stream becomes a web stream with backpressure, a null-body status
 * has no body. The signal aborts the request at any stage; its listener is removed at the end, so
 * a caller may reuse a signal that never fired.
 */
function exchange(
  agent: Agent,
  options: Dispatcher.DispatchOptions,
  signal: AbortSignal | undefined,
  max: number,
): Promise<Response> {
  return new Promise<Response>((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortReason(signal));
      return;
    }
    let controller: Dispatcher.DispatchController | undefined;
    let headers: HeaderRecord = {};
    let status = 200;
    let abortedEarly: unknown;
    let settled = false;
    let stream: ReadableStreamDefaultController<Uint8Array> | undefined;
    let chunks: Buffer[] | undefined;
    let size = 0;
    const onAbort = () => {
      const reason = abortReason(signal!);
      if (controller) controller.abort(reason as Error);
      else {
        // Still queued: settle now, and abort when a connection picks it up.
        abortedEarly = reason;
        fail(reason);
      }
    };
    // MCP transports pass one long-lived signal with every request; each in-flight request adds
    // a listener to it, so concurrency past ten would warn of a leak that is not one.
    if (signal && !unlimited.has(signal)) {
      setMaxListeners(0, signal);
      unlimited.add(signal);
    }
    signal?.addEventListener('abort', onAbort);
    const done = () => signal?.removeEventListener('abort', onAbort);
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
    agent.dispatch(options, {
      onRequestStart(c) {
        controller = c;
        if (abortedEarly !== undefined) c.abort(abortedEarly as Error);
      },
      onResponseStart(c, statusCode, raw) {
        headers = raw as HeaderRecord;
        status = statusCode;
        if (NULL_BODY.has(status)) {
          settled = true;
          resolve(new Response(null, { status, headers: toHeaders(headers) }));
          return;
        }
        const type = headers['content-type'];
        if (typeof type === 'string' && type.toLowerCase().includes('text/event-stream')) {
          const body = new ReadableStream<Uint8Array>(
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
          settled = true;
          resolve(new Response(body, { status, headers: toHeaders(headers) }));
          return;
        }
        const declared = headers['content-length'];
        if (typeof declared === 'string' && /^[0-9]+$/.test(declared) && Number(declared) > max) {
          c.abort(tooLarge(max));
          return;
        }
        chunks = [];
      },
      onResponseData(c, chunk) {
        if (stream) {
          // undici's resume re-runs the parser on an empty buffer, which reports an empty chunk;
          // queuing it (and pausing for it) would ask for another resume, for ever, without ever
          // reading the socket again: the freeze of an SSE answer past one socket read (#13).
          if (chunk.byteLength === 0) return;
          stream.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((stream.desiredSize ?? 1) <= 0) c.pause();
          return;
        }
        if (!chunks) return;
        size += chunk.byteLength;
        if (size > max) {
          chunks = undefined;
          c.abort(tooLarge(max));
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
        settled = true;
        const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
        // The chunks are garbage now: not kept alive by this handler as long as undici keeps it.
        chunks = undefined;
        const record: HeaderRecord = { 'content-length': String(buf.byteLength), ...headers };
        resolve(new BufferedResponse(buf, status, new RecordHeaders(record)) as unknown as Response);
      },
      onResponseError(_c, error) {
        fail(error);
      },
    });
  });
}

function lowercased(given: HeadersInit | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!given) return out;
  if (given instanceof Headers) {
    given.forEach((v, k) => {
      out[k] = v;
    });
  } else if (Array.isArray(given)) {
    for (const [k, v] of given) out[String(k).toLowerCase()] = String(v);
  } else {
    for (const k of Object.keys(given)) out[k.toLowerCase()] = String((given as Record<string, string>)[k]);
  }
  return out;
}

function tooLarge(max: number): ManifoldError {
  return new ManifoldError(
    'ERR_UPSTREAM_BODY_TOO_LARGE',
    `the upstream response exceeded maxUpstreamBodyBytes (${max} bytes)`,
  );
}

function toHeaders(record: HeaderRecord): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(record)) {
    if (Array.isArray(v)) for (const item of v) out.append(k, item);
    else if (v !== undefined) out.set(k, v);
  }
  return out;
}

/**
 * The read side of Headers over undici's header record (names already lowercase), made without
 * Headers' per-entry validation: the MCP transports, the guard and jose only read a few names.
 */
class RecordHeaders {
  constructor(private readonly record: HeaderRecord) {}

  get(name: string): string | null {
    const v = this.record[name.toLowerCase()];
    if (v === undefined) return null;
    return Array.isArray(v) ? v.join(', ') : v;
  }

  has(name: string): boolean {
    return this.record[name.toLowerCase()] !== undefined;
  }

  getSetCookie(): string[] {
    const v = this.record['set-cookie'];
    return v === undefined ? [] : Array.isArray(v) ? [...v] : [v];
  }

  forEach(callback: (value: string, key: string, parent: RecordHeaders) => void): void {
    for (const [k, v] of this.entries()) callback(v, k, this);
  }

  *entries(): IterableIterator<[string, string]> {
    for (const k of Object.keys(this.record).sort()) {
      const v = this.get(k);
      if (v !== null) yield [k, v];
    }
  }

  *keys(): IterableIterator<string> {
    for (const [k] of this.entries()) yield k;
  }

  *values(): IterableIterator<string> {
    for (const [, v] of this.entries()) yield v;
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }
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
    /** Let go once the body is read: a Response kept by a caller must not keep a big body (#18). */
    private buf: Buffer,
    readonly status: number,
    readonly headers: RecordHeaders,
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
    const buf = this.buf;
    this.buf = EMPTY;
    return buf;
  }

  async text(): Promise<string> {
    return decode(this.take());
  }

  async json(): Promise<unknown> {
    return JSON.parse(decode(this.take()));
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    const b = this.take();
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
  }

  clone(): BufferedResponse {
    if (this.used) throw new TypeError('Response.clone: Body has already been consumed.');
    return new BufferedResponse(Buffer.from(this.buf), this.status, this.headers);
  }
}

/**
 * The body as text. A large ASCII body (most JSON) is decoded as Latin-1, which for ASCII is the
 * same text: Node makes that an external string, whose bytes live outside the JS heap and can be
 * freed by a minor collection once the text is parsed; a UTF-8 decode of the same bytes lands in
 * the old generation's large-object space, freed only by a full collection. For a 20 MiB answer
 * that was one copy less at the peak (#18: measured, it is gone before the result is relayed).
 */
function decode(buf: Buffer): string {
  return buf.byteLength >= LARGE_TEXT && isAscii(buf) ? buf.toString('latin1') : buf.toString('utf8');
}
