/**
 * One JSON-RPC request as one streamable-HTTP POST, in either era, and the reading of its answer
 * (JSON, a batch, or an SSE stream). What differs between the eras is the `Wire`: legacy POSTs
 * carry the session the SDK client negotiated and may resume a stream; modern POSTs carry the
 * per-request headers and `_meta` and are never resumed (spec 2026-07-28: streamable-http).
 */
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { createParser } from 'eventsource-parser';
import type { Logger } from '../../lib/log.js';
import type { PostJson } from '../../platform.js';
import { UpstreamHttpError, UpstreamProtocolError, UpstreamSessionExpired } from '../call-errors.js';

export interface Wire {
  /** The headers of one request. */
  headers(method: string, params: Record<string, unknown>): Record<string, string>;
  /** Resumes a stream that ended before its answer (legacy only: modern streams are not resumable). */
  resume?: (message: JSONRPCMessage, lastEventId: string) => Promise<void>;
  /** Modern servers answer protocol errors with 400/404 and a JSON-RPC error body. */
  readErrorBodies: boolean;
  /**
   * Legacy sessions: a 404 to a request that carried `Mcp-Session-Id` means the server no longer
   * knows the session and ran nothing (spec 2025-11-25: transports, session management). A
   * modern server's 404 never means that: it has no sessions.
   */
  sessions?: boolean;
}

/** How an answer ended: 202 (the answer comes on another stream), or read to its end. */
export type PostEnd = 'accepted' | StreamEnd;

/** Where the end of an answer leaves a call: answered, or resumable from an event id after a delay. */
export interface StreamEnd {
  /** The answer was one JSON body (never resumable). */
  json?: boolean;
  lastEventId?: string;
  /** The server's last `retry:` value (ms), the delay it asked for before a reconnect. */
  retryMs?: number;
}

export interface PostOptions {
  url: string | URL;
  post: PostJson;
  wire: Wire;
  log: Logger;
  /** Every message read from the answer, with the id of the request whose stream carried it. */
  receive: (message: unknown, via: string) => void;
}

/**
 * Sends one message and reads its answer. Resolves once the answer is read (its messages went to
 * `receive`), with where a stream that ended early can be resumed from; throws on an HTTP error.
 */
export async function postMessage(
  o: PostOptions,
  message: { jsonrpc: '2.0'; id: string; method: string; params: Record<string, unknown> },
  signal: AbortSignal,
): Promise<PostEnd> {
  const headers = o.wire.headers(message.method, message.params);
  const answer = await o.post({ url: o.url, headers, body: JSON.stringify(message), signal });
  const { status } = answer;
  if (status < 200 || status > 299) {
    const text = await answer.text().catch(() => '');
    if (o.wire.readErrorBodies && answersWithError(text, message.id)) {
      o.receive(JSON.parse(text), message.id);
      return { json: true };
    }
    if (status === 404 && o.wire.sessions && headers['mcp-session-id'] !== undefined) {
      throw new UpstreamSessionExpired(text);
    }
    throw new UpstreamHttpError(status, text);
  }
  if (status === 202) {
    await answer.body?.cancel().catch(() => {});
    return 'accepted';
  }
  const type = mediaType(answer.headers.get('content-type'));
  if (type === 'application/json') {
    const data: unknown = JSON.parse(await answer.text());
    for (const m of Array.isArray(data) ? data : [data]) o.receive(m, message.id);
    return { json: true };
  }
  if (type === 'text/event-stream' && answer.body) return readEvents(o, answer.body, message.id);
  await answer.body?.cancel().catch(() => {});
  throw new UpstreamProtocolError(`unexpected content type ${type || '(none)'}`);
}

/** Whether an error status carries the JSON-RPC error answer to this request. */
function answersWithError(text: string, id: string): boolean {
  if (!text.startsWith('{')) return false;
  try {
    const m = JSON.parse(text) as { id?: unknown; error?: unknown };
    return m.id === id && typeof m.error === 'object' && m.error !== null;
  } catch {
    return false;
  }
}

/** Reads an answer stream to its end; returns the last event id and retry delay seen, if any. */
async function readEvents(o: PostOptions, body: ReadableStream<Uint8Array>, via: string): Promise<StreamEnd> {
  const end: StreamEnd = {};
  const parser = createParser({
    onEvent: (event) => {
      if (event.id) end.lastEventId = event.id;
      if (!event.data || (event.event && event.event !== 'message')) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(event.data);
      } catch {
        o.log.debug('upstream.bad_event', { bytes: event.data.length });
        return;
      }
      o.receive(parsed, via);
    },
    onRetry: (ms) => {
      end.retryMs = ms;
    },
  });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } catch (e) {
    // A stream that broke after an event id can be resumed; otherwise the outcome is unknown.
    if (end.lastEventId === undefined) throw e;
  } finally {
    reader.releaseLock();
  }
  return end;
}

/** The media type of a Content-Type value, lowercased, without parameters. */
export function mediaType(value: string | null): string {
  if (!value) return '';
  const semi = value.indexOf(';');
  return (semi === -1 ? value : value.slice(0, semi)).trim().toLowerCase();
}

/** A legacy request goes out on the session the SDK client negotiated (spec 2025-11-25: transports). */
export interface LegacyEndpoint {
  readonly sessionId: string | undefined;
  readonly protocolVersion: string | undefined;
  /** Resumes a stream from an event id (the SDK's GET with Last-Event-ID). */
  send(message: JSONRPCMessage, options: { resumptionToken: string }): Promise<void>;
}

/** The legacy wire: the configured headers plus the session's id and version. */
export function legacyWire(endpoint: LegacyEndpoint, configured: Record<string, string>): Wire {
  return {
    readErrorBodies: false,
    sessions: true,
    headers() {
      const { sessionId, protocolVersion } = endpoint;
      return {
        ...configured,
        ...(sessionId ? { 'mcp-session-id': sessionId } : {}),
        ...(protocolVersion ? { 'mcp-protocol-version': protocolVersion } : {}),
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      };
    },
    resume: (message, lastEventId) => endpoint.send(message, { resumptionToken: lastEventId }),
  };
}
