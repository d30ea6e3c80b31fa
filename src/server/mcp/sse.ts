/** Server-sent-event streams: plain ones, and the resumable POST streams of 2025-11-25 sessions. */
const encoder = new TextEncoder();

/**
 * Bytes queued for a reader before droppable messages (progress, log lines) are dropped: a client
 * that stops reading cannot make the gateway hold its notifications without end (#13.8).
 */
export const SSE_SOFT_LIMIT = 256 * 1024;
/** Bytes queued before the stream is ended: the client fell too far behind (it may resume). */
export const SSE_HARD_LIMIT = 4 * 1024 * 1024;

/**
 * One server-sent-events stream. Writes after close are dropped, which is what stops progress
 * notifications from leaking past their response (SECURITY B7). The queue is counted in bytes and
 * bounded: past `SSE_SOFT_LIMIT` unread, droppable messages are dropped; past `SSE_HARD_LIMIT`, the
 * stream ends with an error, as if the client had gone (its request is cancelled, or resumed).
 */
export class SseStream {
  readonly readable: ReadableStream<Uint8Array>;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private done = false;
  private keepalive: ReturnType<typeof setInterval> | undefined;
  /** Droppable messages not sent because the reader was too far behind. */
  dropped = 0;
  onclose: () => void = () => {};

  constructor(options: { keepaliveMs?: number; softLimit?: number; hardLimit?: number } = {}) {
    this.soft = options.softLimit ?? SSE_SOFT_LIMIT;
    this.hard = options.hardLimit ?? SSE_HARD_LIMIT;
    this.readable = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.controller = controller;
        },
        cancel: () => this.finish(false),
      },
      // desiredSize is then soft limit minus the bytes queued.
      { highWaterMark: this.soft, size: (chunk) => chunk.byteLength },
    );
    if (options.keepaliveMs) {
      this.keepalive = setInterval(() => this.raw(': keepalive\n\n'), options.keepaliveMs);
    }
  }

  get closed(): boolean {
    return this.done;
  }

  private readonly soft: number;
  private readonly hard: number;

  /**
   * Sends one JSON-RPC message as a `message` event; false if the stream is gone, or if it is
   * `droppable` (a notification the client can do without) and the reader is too far behind.
   */
  send(json: string, droppable = false): boolean {
    return this.raw(`event: message\ndata: ${json}\n\n`, droppable);
  }

  close(): void {
    this.finish(true);
  }

  /** Writes one already-framed SSE chunk (ids, retry, priming); false if the stream is gone. */
  raw(chunk: string, droppable = false): boolean {
    if (this.done) return false;
    const queued = this.soft - (this.controller.desiredSize ?? 0);
    if (droppable && queued >= this.soft) {
      this.dropped++;
      return false;
    }
    if (queued >= this.hard) {
      // The reader fell too far behind: end the stream, as if it had gone.
      this.finish(false);
      try {
        this.controller.error(new Error('the client fell too far behind reading this stream'));
      } catch {
        // already closed
      }
      return false;
    }
    try {
      this.controller.enqueue(encoder.encode(chunk));
      return true;
    } catch {
      this.finish(false);
      return false;
    }
  }

  private finish(closeController: boolean): void {
    if (this.done) return;
    this.done = true;
    if (this.keepalive) clearInterval(this.keepalive);
    if (closeController) {
      try {
        this.controller.close();
      } catch {
        // already errored or cancelled by the reader
      }
    }
    this.onclose();
  }
}

export const sseHeaders = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  // Reverse proxies must not buffer events (spec 2026-07-28: streamable-http, "Receiving Messages").
  'x-accel-buffering': 'no',
};

/**
 * Resumable POST streams for 2025-11-25 sessions (spec 2025-11-25: transports, "Resumability and
 * Redelivery"; SEP-1699, polling). Each event carries an id `<stream>_<n>`, the first one is a
 * priming event with no data, and every message is kept until the client has had it: when the
 * connection drops, or the gateway closes it on purpose (`gateway.streamPollMs`), the call runs
 * on, and the client's GET with `Last-Event-ID` gets what it missed and then the rest, result
 * included. Bounded per stream and per session; the final message is never dropped.
 */

/** Events kept per stream while nobody reads it; older notifications go first. */
const MAX_EVENTS = 512;
const MAX_BYTES = 4 * 1024 * 1024;
/** Streams a session keeps for resuming; the oldest finished one is forgotten first. */
export const MAX_STREAMS = 32;
/** How long a client waits before it reconnects (the SSE `retry` field). */
export const RETRY_MS = 1_000;

export class ResumableStream {
  readonly readable: ReadableStream<Uint8Array>;
  /** The client closed the connection before the end (not a cancellation in this era). */
  onclose: () => void = () => {};
  private live: SseStream | undefined;
  private readonly events: { seq: number; json: string }[] = [];
  private bytes = 0;
  private seq = 0;
  private done = false;

  constructor(
    readonly id: string,
    private readonly onFinished: (s: ResumableStream) => void,
  ) {
    const first = new SseStream();
    this.readable = first.readable;
    this.attachLive(first);
    first.raw(`id: ${this.id}_0\nretry: ${RETRY_MS}\ndata: \n\n`);
  }

  /** Finished: the last message is written (it may still wait for a reader). */
  get closed(): boolean {
    return this.done;
  }

  send(json: string, droppable = false): boolean {
    if (this.done) return false;
    this.keep(json, droppable);
    return true;
  }

  /** The final message has been sent (`close` after a `send`): the stream ends once it is read. */
  close(): void {
    if (this.done) return;
    this.done = true;
    if (this.live && !this.live.closed) {
      this.live.close();
      this.onFinished(this);
    }
  }

  /** Closes the connection but not the stream: the client reconnects to read on (polling). */
  disconnect(): void {
    const live = this.live;
    this.live = undefined;
    live?.close();
  }

  /** A reconnect with `Last-Event-ID`: everything after `after`, then the rest as it comes. */
  resume(after: number): ReadableStream<Uint8Array> {
    this.live?.close();
    const next = new SseStream();
    this.attachLive(next);
    for (const e of this.events) if (e.seq > after) next.raw(this.frame(e.seq, e.json));
    if (this.done) {
      next.close();
      this.onFinished(this);
    }
    return next.readable;
  }

  /** Keeps a message for resuming (the newest is never dropped) and writes it to a live reader. */
  private keep(json: string, droppable: boolean): void {
    const seq = ++this.seq;
    this.events.push({ seq, json });
    this.bytes += json.length;
    while ((this.events.length > MAX_EVENTS || this.bytes > MAX_BYTES) && this.events.length > 1) {
      const dropped = this.events.shift()!;
      this.bytes -= dropped.json.length;
    }
    if (this.live && !this.live.closed) this.live.raw(this.frame(seq, json), droppable);
  }

  private frame(seq: number, json: string): string {
    return `id: ${this.id}_${seq}\nevent: message\ndata: ${json}\n\n`;
  }

  private attachLive(s: SseStream): void {
    this.live = s;
    s.onclose = () => {
      if (this.live === s) this.live = undefined;
      if (!this.done) this.onclose();
    };
  }
}

/** Parses `Last-Event-ID` into the stream and the last event the client has. */
export function parseEventId(raw: string | undefined): { stream: string; seq: number } | undefined {
  if (!raw) return undefined;
  const at = raw.lastIndexOf('_');
  if (at <= 0) return undefined;
  const seq = Number(raw.slice(at + 1));
  if (!Number.isInteger(seq) || seq < 0) return undefined;
  return { stream: raw.slice(0, at), seq };
}
