import type { Cancellation } from '../../../lib/cancellation.js';
import type { Reply } from '../http-in.js';
import { json } from '../http-in.js';
import { SseStream, sseHeaders } from '../sse.js';

/** Where streamed messages go: a plain SSE stream, or a resumable one (sse.ts). */
export interface EventSink {
  readonly readable: ReadableStream<Uint8Array>;
  readonly closed: boolean;
  /** `droppable`: a notification that may be dropped when the reader is too far behind. */
  send(json: string, droppable?: boolean): boolean;
  close(): void;
  onclose: () => void;
  /** Resumable streams only: drop the connection, keep the stream (the client polls). */
  disconnect?(): void;
}

/**
 * The HTTP answer to one request, decided as late as possible: plain JSON when the result comes
 * first, an SSE stream as soon as something must reach the client before it (progress, a log
 * message, a request to the client). Both are what streamable HTTP allows for any request (spec:
 * transports, "Sending Messages"), and a client that accepts only JSON never gets a stream: what
 * cannot reach it is dropped (or, for a request to the client, refused by the caller).
 */
export class Answer {
  readonly response: Promise<Reply>;
  private resolve!: (r: Reply) => void;
  private stream: EventSink | undefined;
  private done = false;
  /** Runs when the client closes the stream before the answer is complete. */
  onClose: (() => void) | undefined;
  /**
   * Aborted when the client closes the stream before the answer is complete (a modern call's own
   * cancellation, until it is held for a retry). A field rather than an `onClose` closure, which
   * would keep the whole call reachable from the answer.
   */
  abortOnClose: Cancellation | undefined;

  constructor(
    private readonly canStream: boolean,
    private readonly makeStream: () => EventSink = () => new SseStream(),
  ) {
    this.response = new Promise((resolve) => {
      this.resolve = resolve;
    });
  }

  /** Whether a message can still be sent before the result (the client takes SSE, and it is open). */
  get open(): boolean {
    return this.canStream && !this.done && !this.stream?.closed;
  }

  /**
   * Sends a notification or a request ahead of the result; false when it cannot reach the client.
   * A `droppable` one (progress, a log line) is dropped when the client is too far behind.
   */
  push(message: string, droppable = false): boolean {
    if (!this.open) return false;
    return this.streamNow().send(message, droppable);
  }

  /**
   * The client should poll: the answer becomes a stream (its priming event says where to resume)
   * and the connection is closed, the call running on. Only streams that can resume do this.
   */
  poll(): void {
    if (!this.open) return;
    this.streamNow().disconnect?.();
  }

  private streamNow(): EventSink {
    if (!this.stream) {
      const stream = this.makeStream();
      this.stream = stream;
      stream.onclose = () => {
        if (this.done) return;
        this.abortOnClose?.abort(new Error('the client closed the stream'));
        this.onClose?.();
      };
      this.resolve(new Response(stream.readable, { status: 200, headers: sseHeaders }));
    }
    return this.stream;
  }

  /** The final message (a result or an error); ends the stream if one was opened. */
  finish(body: string, status = 200): void {
    if (this.done) return;
    this.done = true;
    if (this.stream) {
      this.stream.send(body);
      this.stream.close();
    } else {
      this.resolve(json(body, status));
    }
  }

  /** Ends without a message (a cancelled request gets none on a stream, spec: cancellation). */
  abandon(fallback: string): void {
    if (this.done) return;
    this.done = true;
    if (this.stream) this.stream.close();
    else this.resolve(json(fallback));
  }
}
