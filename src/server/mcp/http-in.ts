import type { HeaderBag, Principal } from '../../auth/principal.js';

/**
 * What the MCP endpoint reads of an HTTP request, whatever the runtime's request object: Hono's
 * Context on Workers (app.ts), the IncomingMessage itself on Node (deploy/node/http/lane.ts).
 * Nothing below the edge sees more of the request than this.
 */
export interface HttpIn {
  /**
   * A header by its name, which every caller passes in lower case; repeated headers joined with
   * ", " (as Headers.get does).
   */
  header(name: string): string | undefined;
  /** The same headers as a Headers-like bag (what authentication reads); any case. */
  readonly headers: HeaderBag;
  /** The path, without the query. */
  readonly path: string;
  /** The request's absolute URL (only read to build a 401's metadata address). */
  url(): string;
  /** The body as text, refused with ERR_BODY_TOO_LARGE past `max` bytes (SECURITY B2). */
  text(max: number): Promise<string>;
  /** Runs `listener` when the client goes away before its answer is complete; returns the undo. */
  onDisconnect(listener: () => void): () => void;
  /** Who sent it, set once the request is admitted (app.ts `admit`). */
  principal: Principal;
}

/**
 * A complete answer held as a string, not a runtime Response: the Node lane writes it to the
 * socket as it is, sparing a Response built and read back per call; other runtimes build a
 * Response at the edge (`toResponse`). Streams (SSE) stay Responses.
 */
export class PlainReply {
  constructor(
    readonly status: number,
    readonly body: string | null,
    readonly headers: Readonly<Record<string, string>>,
  ) {}
}

/** What an MCP handler answers. */
export type Reply = PlainReply | Response;

/** A JSON answer; a big one leaves in pieces (`pieces`), whatever the runtime. */
export function json(body: string, status = 200, extra?: Record<string, string>): PlainReply {
  return new PlainReply(status, body, { 'content-type': 'application/json', ...extra });
}

/** The text of a reply; a stream is read to its end. */
export function replyText(reply: Reply): Promise<string> {
  return reply instanceof PlainReply ? Promise.resolve(reply.body ?? '') : reply.text();
}

/** A body longer than this (in characters) is sent in pieces: see `pieces`. */
export const STREAMED_BODY_CHARS = 1 << 20;
const PIECE_CHARS = 256 * 1024;

/**
 * A big body (a 20 MiB tool result) in 256 Ki-character pieces, each encoded when the socket
 * wants it: written whole, the runtime would encode all of it into one more buffer while it waits
 * on the socket, one copy more of the biggest thing the gateway ever holds. A piece never ends
 * between the halves of a surrogate pair.
 */
export function* pieces(body: string): Generator<string> {
  let at = 0;
  while (at < body.length) {
    let end = Math.min(at + PIECE_CHARS, body.length);
    const last = body.charCodeAt(end - 1);
    if (end < body.length && last >= 0xd800 && last <= 0xdbff) end++;
    yield body.slice(at, end);
    at = end;
  }
}

/** The runtime Response for a reply: what Hono hands back to Workers (and to Node's other paths). */
export function toResponse(reply: Reply): Response {
  if (!(reply instanceof PlainReply)) return reply;
  const { status, body, headers } = reply;
  if (body === null || body.length <= STREAMED_BODY_CHARS) {
    return new Response(body, { status, headers });
  }
  const encoder = new TextEncoder();
  const source = pieces(body);
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = source.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(next.value));
    },
  });
  return new Response(stream, { status, headers });
}
