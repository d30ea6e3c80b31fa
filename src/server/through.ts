/**
 * One relayed request, from the downstream client to its upstream and back, whatever the method
 * (tools/call, prompts/get, resources/read, completion/complete): what reaches the client before
 * the result (progress re-keyed to its token, log messages at the level it asked for, tagged with
 * the server), how it cancels, and the one answer at the end. Era-specific parts come from the
 * Exchange; the answer is JSON unless something had to be streamed first (answer.ts).
 */
import { Cancellation } from '../cancellation.js';
import { stripUnsafe } from '../guards/text.js';
import { LOG_LEVELS } from '../protocol/versions.js';
import type { Upstream } from '../upstream/upstream.js';
import { Answer } from './answer.js';
import type { Edge } from './dispatch.js';
import type { Exchange } from './exchange.js';
import { errorMessage } from './jsonrpc.js';

type Result = Record<string, unknown>;

export interface Through {
  upstream: Upstream;
  method: string;
  params: Result;
  /** The client's own progress token, if it asked for progress. */
  progressToken?: string | number | undefined;
  /** The final message for a result (serialized), and what the audit line says. */
  onResult(result: Result): string;
  /** The final message for a failure, with its HTTP status for a modern client. */
  onError(e: unknown): { body: string; status: number };
  /** A cancelled request: it gets no answer on a stream (spec: cancellation), else this body. */
  onCancelled(): void;
}

const MAX_LOG_DATA = 8192;

/** RFC 5424 severity: a message is sent when it is at least as severe as the level asked for. */
function severe(level: unknown, atLeast: string): boolean {
  const at = LOG_LEVELS.indexOf(atLeast as never);
  const got = LOG_LEVELS.indexOf(level as never);
  return got !== -1 && at !== -1 && got >= at;
}

/** Upstream log data is untrusted: every string in it is stripped, and the whole is bounded. */
function boundLogData(data: unknown): unknown {
  let text: string;
  try {
    text = JSON.stringify(data) ?? 'null';
  } catch {
    return '[unserializable log data]';
  }
  if (text.length > MAX_LOG_DATA) return `${stripUnsafe(text).slice(0, MAX_LOG_DATA)}…`;
  const clean = (v: unknown): unknown => {
    if (typeof v === 'string') return stripUnsafe(v);
    if (Array.isArray(v)) return v.map(clean);
    if (typeof v === 'object' && v !== null) {
      const out: Result = {};
      for (const [k, x] of Object.entries(v)) out[stripUnsafe(k)] = clean(x);
      return out;
    }
    return v;
  };
  // Parsed again from its bounded text, so its depth is what JSON.stringify could write.
  return clean(JSON.parse(text));
}

export function runThrough(edge: Edge, ex: Exchange, t: Through): Promise<Response> {
  const { gateway } = edge;
  const { request } = ex;
  const answer = new Answer(ex.canStream);
  const cancellation = new Cancellation();
  const done = ex.track(request.id, cancellation);
  // A stream the client closes is a cancellation in 2026-07-28 (patterns/cancellation); in the
  // legacy era a disconnect is not (2025-11-25: transports), and the call runs to its end.
  if (ex.era === 'modern')
    answer.onClose = () => cancellation.abort(new Error('the client closed the stream'));
  const server = t.upstream.name;
  const token = t.progressToken;
  const level = ex.logLevel;
  void gateway
    .track(() =>
      t.upstream.request(t.method, t.params, {
        cancellation,
        ...(token !== undefined
          ? {
              onprogress: (p) =>
                answer.push(
                  JSON.stringify({
                    jsonrpc: '2.0',
                    method: 'notifications/progress',
                    params: {
                      ...p,
                      ...(typeof p.message === 'string'
                        ? { message: stripUnsafe(p.message).slice(0, 1024) }
                        : {}),
                      progressToken: token,
                    },
                  }),
                ),
            }
          : {}),
        ...(level !== undefined
          ? {
              logLevel: level,
              onlog: (m) => {
                if (!severe(m.level, level)) return;
                const logger =
                  typeof m.logger === 'string' ? `${server}/${stripUnsafe(m.logger).slice(0, 128)}` : server;
                answer.push(
                  JSON.stringify({
                    jsonrpc: '2.0',
                    method: 'notifications/message',
                    params: { level: m.level, logger, data: boundLogData(m.data) },
                  }),
                );
              },
            }
          : {}),
      }),
    )
    .then(
      (result) => answer.finish(t.onResult(result)),
      (e: unknown) => {
        if (cancellation.aborted) {
          t.onCancelled();
          answer.abandon(errorMessage(request.id, -32800, 'request cancelled'));
          return;
        }
        const f = t.onError(e);
        // A legacy client reads method errors inside a 200; a modern one also gets the statuses
        // the 2026-07-28 revision requires (400 for a missing client capability…).
        answer.finish(f.body, ex.era === 'modern' ? f.status : 200);
      },
    )
    .finally(done);
  return answer.response;
}
