const encoder = new TextEncoder();

/**
 * One server-sent-events stream. Writes after close are dropped, which is what stops progress
 * notifications from leaking past their response (SECURITY B7).
 */
export class SseStream {
  readonly readable: ReadableStream<Uint8Array>;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private done = false;
  private keepalive: ReturnType<typeof setInterval> | undefined;
  onclose: () => void = () => {};

  constructor(options: { keepaliveMs?: number } = {}) {
    this.readable = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.controller = controller;
      },
      cancel: () => this.finish(false),
    });
    if (options.keepaliveMs) {
      this.keepalive = setInterval(() => this.write(': keepalive\n\n'), options.keepaliveMs);
    }
  }

  get closed(): boolean {
    return this.done;
  }

  /** Sends one JSON-RPC message as a `message` event; false if the stream is gone. */
  send(json: string): boolean {
    return this.write(`event: message\ndata: ${json}\n\n`);
  }

  /** Writes one already-framed SSE chunk (ids, retry, priming); false if the stream is gone. */
  raw(chunk: string): boolean {
    return this.write(chunk);
  }

  close(): void {
    this.finish(true);
  }

  private write(chunk: string): boolean {
    if (this.done) return false;
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
