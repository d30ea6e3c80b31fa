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
      this.keepalive = setInterval(() => this.write(': keepalive\n\n'), options.keepaliveMs);
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
    return this.write(`event: message\ndata: ${json}\n\n`, droppable);
  }

  /** Writes one already-framed SSE chunk (ids, retry, priming); false if the stream is gone. */
  raw(chunk: string, droppable = false): boolean {
    return this.write(chunk, droppable);
  }

  close(): void {
    this.finish(true);
  }

  private write(chunk: string, droppable = false): boolean {
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
