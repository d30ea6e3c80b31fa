/**
 * Node's HTTP client for egress: one undici Agent, whose connections resolve their host through the
 * checked lookup (egress.ts), and the two ways to send on it: undici's own `fetch` (the SDK
 * transports, jose, OAuth), and `exchange`, one request on undici's dispatcher for the direct
 * caller (`Platform.postJson`), without the web Request, Headers and body stream that a fetch
 * builds around every request. Loaded with the first request out (egress.ts).
 */
import type { LookupFunction } from 'node:net';
import { Agent, type Dispatcher, fetch as undiciFetch } from 'undici';
import { ManifoldError } from '../../../src/errors.js';
import type { JsonAnswer } from '../../../src/platform.js';
import {
  bodyTooLarge,
  declaredOver,
  eventCap,
  isEventStream,
  NULL_BODY_STATUSES,
  type SendHop,
} from '../../../src/upstream/wire/egress-fetch.js';

export interface HttpClient {
  /** undici's fetch on the Agent: no egress rules of its own (the guard wraps it). */
  fetch: typeof fetch;
  /** One request on the Agent, its answer read whole (capped) or as an event stream. */
  exchange: SendHop;
}

export function httpClient(lookup: LookupFunction, maxBodyBytes: number): HttpClient {
  const agent = new Agent({ connect: { lookup }, keepAliveTimeout: 30_000 });
  return {
    fetch: ((input: Parameters<typeof undiciFetch>[0], init?: Parameters<typeof undiciFetch>[1]) =>
      undiciFetch(input, { ...init, dispatcher: agent })) as unknown as typeof fetch,
    exchange: (hop) => exchange(agent, hop, maxBodyBytes),
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
  for (const k in hop.headers) headers[k.toLowerCase()] = hop.headers[k]!;
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
