/**
 * Newline-delimited JSON-RPC read from a pipe, with a bound on each line (both eras' stdio
 * framing: spec basic/transports, stdio). Used where the gateway reads a stdio child's stdout and
 * where the stdio front door reads its client's stdin.
 *
 * Each chunk is scanned once (a long line is never rescanned), and no more than `maxChars` of one
 * line is ever held: past that, the rest of the line is skipped, keeping only its first and last
 * characters so that whoever reads it can say which message was dropped.
 */

export interface LineSink {
  /** A complete line, trimmed; blank lines are not passed on. */
  line(text: string): void;
  /** A line longer than the bound ended: its first and last 512 characters, and its length. */
  overLong(head: string, tail: string, chars: number): void;
}

/** What is kept of an over-long line's two ends. */
const KEPT = 512;

export class BoundedLines {
  /** The start of the line being read, while it is within the bound. */
  private buffer = '';
  /** Reading past the bound: the line's first and latest characters, and how many followed its head. */
  private over: { head: string; tail: string; skipped: number } | undefined;

  constructor(
    /** The longest line passed on, in characters (each at least one byte of UTF-8). */
    private readonly maxChars: number,
    private readonly sink: LineSink,
  ) {}

  push(chunk: string): void {
    let start = 0;
    for (let nl = chunk.indexOf('\n'); nl !== -1; nl = chunk.indexOf('\n', start)) {
      const piece = chunk.slice(start, nl);
      start = nl + 1;
      if (this.over) {
        this.skip(piece);
        this.endOverLong();
        continue;
      }
      const line = this.buffer ? this.buffer + piece : piece;
      this.buffer = '';
      if (line.length > this.maxChars) {
        this.over = { head: line.slice(0, KEPT), tail: '', skipped: 0 };
        this.skip(line.slice(KEPT));
        this.endOverLong();
        continue;
      }
      const trimmed = line.trim();
      if (trimmed) this.sink.line(trimmed);
    }
    const rest = start === 0 ? chunk : chunk.slice(start);
    if (this.over) this.skip(rest);
    else if (this.buffer.length + rest.length > this.maxChars) {
      const line = this.buffer + rest;
      this.buffer = '';
      this.over = { head: line.slice(0, KEPT), tail: '', skipped: 0 };
      this.skip(line.slice(KEPT));
    } else this.buffer += rest;
  }

  /** The input ended: a last line without its newline is still a line. */
  end(): void {
    if (this.over) this.endOverLong();
    else if (this.buffer) this.push('\n');
  }

  private skip(text: string): void {
    const o = this.over!;
    o.skipped += text.length;
    o.tail = (o.tail + text).slice(-KEPT);
  }

  private endOverLong(): void {
    const { head, tail, skipped } = this.over!;
    this.over = undefined;
    this.sink.overLong(head, tail, head.length + skipped);
  }
}

/** A line's top-level id where the message starts `{"jsonrpc":"2.0","id":…,"<member>"`. */
const HEAD_ID = /^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d{1,16}|"[^"\\]{0,256}")\s*,\s*"(\w+)"/;
/** Or where it ends `"id":…}`, as the SDKs write it (a nested member cannot end the line). */
const TAIL_ID = /[,{]\s*"id"\s*:\s*(-?\d{1,16}|"[^"\\]{0,256}")\s*\}\s*$/;

/**
 * The id of a message whose line was too long to read, from what was kept of its two ends, so
 * that the one message it was can be answered: a response (the stdio child's, #13.3) or a
 * request (the stdio front door's client). A request names its method near its start; anything
 * else gives undefined.
 */
export function overLongId(
  head: string,
  tail: string,
  of: 'request' | 'response',
): string | number | undefined {
  const isRequest = /"method"\s*:/.test(head.slice(0, 256));
  if (isRequest !== (of === 'request')) return undefined;
  const start = HEAD_ID.exec(head);
  if (start && (of === 'request' ? start[2] === 'method' : start[2] === 'result' || start[2] === 'error'))
    return JSON.parse(start[1]!) as string | number;
  const end = TAIL_ID.exec((head + tail).slice(-KEPT));
  return end ? (JSON.parse(end[1]!) as string | number) : undefined;
}
