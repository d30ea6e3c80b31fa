import type { Principal } from '../../auth/principal.js';
import type { Cancellation } from '../../lib/cancellation.js';
import { isObject } from '../../lib/json.js';
import type { RequestMeta } from '../../protocol/era.js';
import type { JsonRpcId, JsonRpcRequest } from '../../protocol/jsonrpc.js';
import { type Era, META } from '../../protocol/versions.js';
import type { HttpIn } from './http-in.js';
import type { Answer } from './relay/answer.js';
import type { Session } from './sessions.js';
import type { RequestTrace } from './tracing.js';

type Result = Record<string, unknown>;

/**
 * One downstream request as the code below the wire sees it: who asks, what, with which declared
 * client capabilities, what its `_meta` says, and how its era wants results dressed. Built once
 * at the edge (endpoint.ts, with legacy.ts or modern.ts) from the one parse of the body; dispatch
 * and the relay read it and never look at headers or `_meta`.
 */
export interface Exchange {
  principal: Principal;
  request: JsonRpcRequest;
  era: Era;
  /** The revision this request speaks (modern: its `_meta`; legacy: its session's). */
  protocolVersion: string;
  /**
   * The HTTP request it came in on: only tracing (its W3C trace headers) and a modern tools/call
   * (its Mcp-Param-* headers, once the tool is known) read it.
   */
  http?: Pick<HttpIn, 'header'>;
  /** This request's span, when tracing is on (tracing.ts); set by dispatch. */
  trace?: RequestTrace;
  /** What the client declared: at initialize (legacy) or in this request's `_meta` (modern). */
  clientCapabilities: Record<string, unknown>;
  /** The client accepts text/event-stream on this POST. */
  canStream: boolean;
  /**
   * The log level the client asked for (legacy: `logging/setLevel` on its session; modern: this
   * request's `_meta`). Absent: no `notifications/message` reaches it (2026-07-28: logging).
   */
  logLevel?: string | undefined;
  /** Size of the request as received (for the audit line; arguments are never logged). */
  bytesIn: number;
  /** What the request's `_meta` says, read once at the edge (protocol/era.ts). */
  meta: RequestMeta;
  /** A legacy request's session. */
  session?: Session | undefined;
  /** Dresses a complete result for the client's era; `cache` for a cacheable one. */
  dress(result: Result, cache?: CacheHint): Result;
  /**
   * Legacy clients only: sends a request to the client ahead of the result, on this request's
   * stream, and resolves with its answer (sampling, elicitation, roots).
   */
  ask?: (
    answer: Answer,
    method: string,
    params: Record<string, unknown>,
    cancellation: Cancellation,
  ) => Promise<Record<string, unknown>>;
  /** A new answer for this request: resumable streams for 2025-11-25 sessions (sse.ts). */
  answer(): Answer;
  /** Close a still-running call's stream after this long, for the client to poll (2025-11-25). */
  pollMs?: number | undefined;
  /** A call a code-mode program made (#50): its audit line says so, with the run's id. */
  code?: { run: string };
  /** Makes `cancellation` reachable by the client's way of cancelling; returns its remover. */
  track(id: JsonRpcId, cancellation: Cancellation): () => void;
}

/** `ttlMs` and `cacheScope` of a cacheable result (spec 2026-07-28: server/utilities/caching). */
export interface CacheHint {
  ttlMs: number;
  cacheScope: 'public' | 'private';
}

/** The dress of a legacy result: none (an upstream's 2026 fields were removed at its edge). */
export function legacyDress(r: Result): Result {
  return r;
}

/**
 * Modern results carry `resultType` (basic/index, "ResultType") and the gateway's own identity in
 * `_meta` (basic/index, "Per-response protocol fields"), never an upstream's; a cacheable one its
 * `ttlMs` and `cacheScope` (server/utilities/caching).
 */
export function modernDress(
  serverInfo: { name: string; version: string },
  r: Result,
  cache?: CacheHint,
): Result {
  const { resultType: _upstream, _meta, ...rest } = r;
  const own = { [META.serverInfo]: serverInfo };
  const meta = isObject(_meta) ? { ..._meta, ...own } : own;
  return cache
    ? { resultType: 'complete', _meta: meta, ttlMs: cache.ttlMs, cacheScope: cache.cacheScope, ...rest }
    : { resultType: 'complete', _meta: meta, ...rest };
}

/**
 * The dressed result of a page whose JSON is cached (aggregate/pages.ts): its members are spliced
 * after the dress's, since serializing a 5,000-tool page again takes milliseconds.
 */
export function dressedJson(ex: Pick<Exchange, 'dress'>, json: string, cache: CacheHint): string {
  const head = JSON.stringify(ex.dress({}, cache));
  if (head === '{}') return json;
  return json === '{}' ? head : `${head.slice(0, -1)},${json.slice(1)}`;
}
