import type { Principal } from '../auth/principal.js';
import type { Cancellation } from '../cancellation.js';
import { spreadUnder } from '../objects.js';
import { type Era, META, withMeta } from '../protocol/versions.js';
import type { Answer } from './answer.js';
import type { HttpIn } from './http-in.js';
import type { JsonRpcId, JsonRpcRequest } from './jsonrpc.js';
import type { RequestTrace } from './tracing.js';

type Result = Record<string, unknown>;

/**
 * One downstream request as the code below the wire sees it: who asks, what, with which declared
 * client capabilities, and how its era wants results dressed. Built once at the edge (legacy.ts
 * or modern.ts); dispatch and the tools/call relay read it and never look at headers.
 */
export interface Exchange {
  principal: Principal;
  request: JsonRpcRequest;
  era: Era;
  /** The revision this request speaks (modern: its `_meta`; legacy: its session's). */
  protocolVersion: string;
  /** The HTTP request it came in on: tracing reads its W3C trace headers, nothing else does. */
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
  /** Dresses a complete result for the client's era. */
  result(result: Result): Result;
  /** The same for a result that is already serialized (a JSON object). */
  resultJson(json: string, cache?: CacheHint): string;
  /**
   * `JSON.stringify(result(r))`, built from r's own JSON where that gives the same text; undefined
   * where it cannot (a result with a `_meta` or `resultType` of its own).
   */
  json(r: Result): string | undefined;
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
  /** A new answer for this request: resumable streams for 2025-11-25 sessions (resumable.ts). */
  answer(): Answer;
  /** Close a still-running call's stream after this long, for the client to poll (2025-11-25). */
  pollMs?: number | undefined;
  /** Makes `cancellation` reachable by the client's way of cancelling; returns its remover. */
  track(id: JsonRpcId, cancellation: Cancellation): () => void;
}

/** `ttlMs` and `cacheScope` of a cacheable result (spec 2026-07-28: server/utilities/caching). */
export interface CacheHint {
  ttlMs: number;
  cacheScope: 'public' | 'private';
}

/** Legacy results go out as they are (an upstream's 2026 fields were removed at its edge). */
export const legacyResult = {
  result: (r: Result) => r,
  resultJson: (json: string) => json,
  json: (r: Result): string | undefined => JSON.stringify(r),
};

/**
 * Modern results carry `resultType` (basic/index, "ResultType") and the gateway's own identity in
 * `_meta` (basic/index, "Per-response protocol fields"), never an upstream's.
 */
export function modernResult(serverInfo: { name: string; version: string }) {
  const infoJson = JSON.stringify(serverInfo);
  const head = `{"resultType":"complete","_meta":{"${META.serverInfo}":${infoJson}}`;
  // The `_meta` of every result that brings none of its own, built once: nothing changes a result's
  // `_meta` after it is dressed (a cut result gets a new one), and it is frozen to keep it so.
  const ownMeta: Result = Object.freeze({ [META.serverInfo]: serverInfo });
  // A call's result has no hint: two pieces to join, not four (#18).
  const headComma = `${head},`;
  const resultJson = (json: string, cache?: CacheHint): string => {
    if (!cache) return json.length > 2 ? headComma + json.slice(1) : `${head}}`;
    const hint = `,"ttlMs":${cache.ttlMs},"cacheScope":"${cache.cacheScope}"`;
    const rest = json.length > 2 ? `,${json.slice(1)}` : '}';
    return `${head}${hint}${rest}`;
  };
  return {
    result(r: Result): Result {
      // The common result (#18): the same keys in the same order as below, without the copies.
      if (!Object.hasOwn(r, '_meta') && !Object.hasOwn(r, 'resultType')) {
        return { resultType: 'complete', _meta: ownMeta, ...r };
      }
      const meta = r._meta && typeof r._meta === 'object' ? (r._meta as Result) : undefined;
      return spreadUnder(r, {
        resultType: 'complete',
        _meta: withMeta(meta, { [META.serverInfo]: serverInfo }),
      });
    },
    resultJson,
    // The common result's JSON is `head` around its own members (#18): `_meta` is not serialized
    // per call. The same text as `result(r)` serialized. A field a modern upstream's edge cleared
    // (set undefined, not deleted: modern-session.ts `complete`) is not in either.
    json: (r: Result): string | undefined =>
      r._meta === undefined && r.resultType === undefined ? resultJson(JSON.stringify(r)) : undefined,
  };
}
