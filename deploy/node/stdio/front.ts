/**
 * The stdio front door (#54): one client over stdin and stdout, served by the same HTTP edge as
 * every other client (the app's `fetch`: the same admission, endpoint, policy, drift, approval and
 * audit). This file is only a transport adapter: each newline-delimited JSON-RPC message from
 * stdin becomes the request a streamable-HTTP client of its era would have sent, and whatever the
 * edge answers or pushes is written to stdout as lines.
 *
 * Both eras' stdio framing (spec 2025-11-25 and 2026-07-28, basic/transports, stdio): messages are
 * single lines of UTF-8 JSON, nothing else is ever written to stdout, and logs go to stderr. The
 * era is decided per connection as servers do (2026-07-28, stdio, backward compatibility): an
 * `initialize` makes it a 2025 session (its Mcp-Session-Id kept here, its GET stream carrying the
 * server's requests and notifications); a request whose `_meta` names 2026-07-28 is a modern one
 * (its version, method and name mirrored into the standard headers the edge checks).
 */
import { createParser } from 'eventsource-parser';
import type { ManifoldError } from '../../../src/errors.js';
import type { Logger } from '../../../src/lib/log.js';
import { encodeHeaderValue, nameField } from '../../../src/protocol/headers.js';
import { isModernVersion, META } from '../../../src/protocol/versions.js';
import { toRpcError } from '../../../src/server/mcp/errors.js';

export interface StdioFrontOptions {
  /** The HTTP edge's fetch (createHttp(...).app.fetch). */
  fetch: (request: Request) => Response | Promise<Response>;
  /** `/mcp` or `/mcp/<profile>`. */
  path: string;
  /** Sent as `Authorization: Bearer`, verified like any other token; absent without auth. */
  token?: string;
  /** Writes one line (a JSON-RPC message, without its newline) to the client. */
  write: (line: string) => void;
  log: Logger;
}

type Json = Record<string, unknown>;
type Id = string | number;

/** Only the headers a client of each era sends: the edge decides everything else. */
const ORIGIN = 'http://localhost';

/** The adapter for one client: `receive` each line read from stdin, `close` at its end. */
export class StdioFront {
  private session?: string;
  private legacyVersion?: string;
  private stream?: AbortController;
  /** Requests in flight by id: a client's `notifications/cancelled` aborts a modern one's POST. */
  private readonly inflight = new Map<Id, AbortController>();
  private readonly pending = new Set<Promise<void>>();
  private closed = false;
  /** The `initialize` in flight: what follows it waits for the session it opens. */
  private initializing?: Promise<void>;

  constructor(private readonly o: StdioFrontOptions) {}

  /** One line from the client. Never throws: a bad line gets the JSON-RPC error the edge gives. */
  receive(line: string): void {
    if (line.trim() === '' || this.closed) return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      message = undefined; // The edge answers it with its parse error.
    }
    const m = (
      typeof message === 'object' && message !== null && !Array.isArray(message) ? message : {}
    ) as Json;
    const task = this.handle(line, m).catch((e) =>
      this.o.log.error('stdio.failed', { error: e instanceof Error ? e.message.slice(0, 300) : String(e) }),
    );
    if (m.method === 'initialize') this.initializing = task;
    this.pending.add(task);
    void task.finally(() => this.pending.delete(task));
  }

  /**
   * A message the client sent that was refused unread (a line over `gateway.maxBodyBytes`): the
   * error the HTTP edge gives such a body, to the request's id where its ends name one, else to
   * null (JSON-RPC 2.0, 5.1).
   */
  refuse(error: ManifoldError, id: Id | undefined): void {
    if (this.closed) return;
    const { code, message, data } = toRpcError(error);
    this.o.write(JSON.stringify({ jsonrpc: '2.0', id: id ?? null, error: { code, message, data } }));
  }

  /** The client went away: stop the server stream and wait for answers in flight. */
  async close(): Promise<void> {
    this.closed = true;
    this.stream?.abort();
    for (const c of this.inflight.values()) c.abort();
    await Promise.allSettled([...this.pending]);
    if (this.session) {
      // The session ends with the connection (2025-11-25: lifecycle, shutdown over stdio).
      await Promise.resolve(
        this.o.fetch(new Request(`${ORIGIN}${this.o.path}`, { method: 'DELETE', headers: this.headers() })),
      ).catch(() => undefined);
    }
  }

  private headers(extra: Record<string, string> = {}): Headers {
    const h = new Headers({ host: 'localhost', ...extra });
    if (this.o.token) h.set('authorization', `Bearer ${this.o.token}`);
    if (this.session) h.set('mcp-session-id', this.session);
    if (this.legacyVersion) h.set('mcp-protocol-version', this.legacyVersion);
    return h;
  }

  private async handle(line: string, m: Json): Promise<void> {
    const method = typeof m.method === 'string' ? m.method : undefined;
    // A message after `initialize` waits for its answer: it needs the session that answer opens.
    if (method !== 'initialize' && this.initializing) await this.initializing;
    const id = typeof m.id === 'string' || typeof m.id === 'number' ? m.id : undefined;
    const params = (typeof m.params === 'object' && m.params !== null ? m.params : {}) as Json;
    const meta = (typeof params._meta === 'object' && params._meta !== null ? params._meta : {}) as Json;
    const version = meta[META.protocolVersion];
    const headers = this.headers({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    });
    const modern = isModernVersion(version) && method !== 'initialize';
    if (modern) {
      // A 2026-07-28 request over HTTP carries these; the edge checks they match the body.
      headers.delete('mcp-session-id');
      headers.set('mcp-protocol-version', version);
      if (method) headers.set('mcp-method', method);
      const field = method ? nameField(method) : undefined;
      const name = field ? params[field] : undefined;
      if (typeof name === 'string') headers.set('mcp-name', encodeHeaderValue(name));
    }
    if (method === 'notifications/cancelled' && !this.session) {
      // Modern HTTP cancels by closing the request's connection: the same here.
      const target = params.requestId;
      if (typeof target === 'string' || typeof target === 'number') this.inflight.get(target)?.abort();
      return;
    }
    const abort = new AbortController();
    if (id !== undefined && method) this.inflight.set(id, abort);
    try {
      const res = await this.o.fetch(
        new Request(`${ORIGIN}${this.o.path}`, { method: 'POST', headers, body: line, signal: abort.signal }),
      );
      if (method === 'initialize' && res.ok) {
        const session = res.headers.get('mcp-session-id');
        if (session) this.session = session;
      }
      await this.relay(
        res,
        id,
        (answer) => {
          if (method === 'initialize' && typeof answer.result === 'object' && answer.result !== null) {
            const v = (answer.result as Json).protocolVersion;
            if (typeof v === 'string') this.legacyVersion = v;
          }
        },
        abort.signal,
      );
      if (method === 'notifications/initialized' && this.session) this.openStream();
    } catch (e) {
      if (abort.signal.aborted) return;
      throw e;
    } finally {
      if (id !== undefined) this.inflight.delete(id);
    }
  }

  /** What the edge answered, as lines: a JSON body, or each message of an event stream. */
  private async relay(
    res: Response,
    id: Id | undefined,
    seen?: (answer: Json) => void,
    signal?: AbortSignal,
  ): Promise<void> {
    const type = res.headers.get('content-type') ?? '';
    if (type.includes('text/event-stream')) {
      const parser = createParser({
        onEvent: (event) => {
          if (event.data.trim() !== '') this.emit(event.data, id, seen);
        },
      });
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      // A stream ends when its request is aborted (a cancel, or the client went away).
      signal?.addEventListener('abort', () => void reader.cancel().catch(() => undefined), { once: true });
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(value);
      }
      return;
    }
    const text = await res.text();
    if (text.trim() !== '') this.emit(text, id, seen);
  }

  /**
   * One message to the client. An error the edge gave before it read the message (a refused
   * token: 401) names no request; over HTTP the status says which, here the request's id must.
   */
  private emit(text: string, id: Id | undefined, seen?: (answer: Json) => void): void {
    let out = text;
    try {
      const answer = JSON.parse(text) as Json;
      if (answer.error !== undefined && answer.id === null && id !== undefined) {
        answer.id = id;
        out = JSON.stringify(answer);
      } else if (text.includes('\n')) out = JSON.stringify(answer);
      seen?.(answer);
    } catch {
      return; // Never write anything but a JSON-RPC message to stdout.
    }
    if (!this.closed || id !== undefined) this.o.write(out);
  }

  /** A 2025 session's GET stream: the server's own requests and notifications, until the end. */
  private openStream(): void {
    if (this.stream || this.closed) return;
    const abort = new AbortController();
    this.stream = abort;
    const run = async () => {
      while (!this.closed) {
        try {
          const res = await this.o.fetch(
            new Request(`${ORIGIN}${this.o.path}`, {
              method: 'GET',
              headers: this.headers({ accept: 'text/event-stream' }),
              signal: abort.signal,
            }),
          );
          if (!res.ok) {
            await res.body?.cancel().catch(() => undefined);
            this.o.log.warn('stdio.stream_refused', { status: res.status });
            return;
          }
          await this.relay(res, undefined, undefined, abort.signal);
        } catch (e) {
          if (abort.signal.aborted) return;
          this.o.log.warn('stdio.stream_failed', {
            error: e instanceof Error ? e.message.slice(0, 200) : String(e),
          });
        }
        // The stream ended on the server's side (a restart of the session table): open it again.
        await new Promise((r) => setTimeout(r, 500).unref());
      }
    };
    const task = run();
    this.pending.add(task);
    void task.finally(() => this.pending.delete(task));
  }
}
