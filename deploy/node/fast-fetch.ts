/**
 * fetch() over undici's `request` for what MCP transports send (a string body, or none): the same
 * pooled, DNS-checked connections as undici's fetch, without its web-stream and Headers plumbing
 * on the hot path. Every relayed tools/call goes through here, so each allocation counts.
 */
import { setMaxListeners } from 'node:events';
import { Readable } from 'node:stream';
import type { Agent } from 'undici';
import { ManifoldError } from '../../src/errors.js';

const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const unlimited = new WeakSet<AbortSignal>();
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
    // MCP transports pass one long-lived signal with every request; each in-flight request adds
    // a listener to it, so concurrency past ten would warn of a leak that is not one.
    const signal = init?.signal;
    if (signal && !unlimited.has(signal)) {
      setMaxListeners(0, signal);
      unlimited.add(signal);
    }
    const res = await agent.request({
      origin,
      path,
      method: (init?.method ?? 'GET') as 'GET',
      headers,
      ...(typeof body === 'string' ? { body } : {}),
      ...(signal ? { signal } : {}),
    });
    const status = res.statusCode;
    if (NULL_BODY.has(status)) {
      res.body.resume();
      return new Response(null, { status, headers: toHeaders(res.headers) });
    }
    const type = res.headers['content-type'];
    if (typeof type === 'string' && type.toLowerCase().includes('text/event-stream')) {
      return new Response(Readable.toWeb(res.body) as ReadableStream<Uint8Array>, {
        status,
        headers: toHeaders(res.headers),
      });
    }
    const buf = await readCapped(res.body, res.headers['content-length'], maxBodyBytes);
    const record: HeaderRecord = { ...res.headers, 'content-length': String(buf.byteLength) };
    return new BufferedResponse(buf, status, new RecordHeaders(record)) as unknown as Response;
  }) as typeof fetch;
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

type Body = Awaited<ReturnType<Agent['request']>>['body'];

/**
 * The whole body, refused past `max`. A declared length is checked before reading and then bounds
 * the read (HTTP framing ends the body there); without one, bytes are counted as they arrive.
 */
async function readCapped(body: Body, declared: HeaderRecord[string], max: number): Promise<Buffer> {
  const length = typeof declared === 'string' && /^[0-9]+$/.test(declared) ? Number(declared) : undefined;
  if (length !== undefined) {
    if (length > max) {
      body.destroy();
      throw tooLarge(max);
    }
    const bytes = await body.bytes();
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).byteLength;
    if (size > max) {
      body.destroy();
      throw tooLarge(max);
    }
    chunks.push(chunk as Buffer);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
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
    private readonly buf: Buffer,
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
    return new BufferedResponse(Buffer.from(this.buf), this.status, this.headers);
  }
}
