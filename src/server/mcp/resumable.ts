import { SseStream } from './sse.js';

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
  private readonly events: { seq: number; json: string; final: boolean }[] = [];
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

  /** Whether a client is reading it now. */
  get connected(): boolean {
    return this.live !== undefined && !this.live.closed;
  }

  send(json: string, droppable = false): boolean {
    if (this.done) return false;
    this.keep(json, false, droppable);
    return true;
  }

  /** The final message has been sent (`close` after a `send`): the stream ends once it is read. */
  close(): void {
    if (this.done) return;
    this.done = true;
    const last = this.events[this.events.length - 1];
    if (last) last.final = true;
    if (this.live && !this.live.closed) {
      this.live.close();
      this.forget();
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
      this.forget();
    }
    return next.readable;
  }

  private keep(json: string, final: boolean, droppable = false): void {
    const seq = ++this.seq;
    this.events.push({ seq, json, final });
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

  private forget(): void {
    this.onFinished(this);
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
