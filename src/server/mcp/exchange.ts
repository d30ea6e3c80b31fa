import type { Principal } from '../../auth/principal.js';
import type { Cancellation } from '../../lib/cancellation.js';
import { spreadUnder } from '../../lib/objects.js';
import type { JsonRpcId, JsonRpcRequest } from '../../protocol/jsonrpc.js';
import { type Era, META, withMeta } from '../../protocol/versions.js';
import type { HttpIn } from './http-in.js';
import type { Answer } from './relay/answer.js';
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

/** A few members' keys as they are written: `"content":` and its kind, quoted once. */
const MEMBER_KEYS = new Map(
  ['content', 'structuredContent', 'isError', 'messages', 'description', 'contents'].map((k) => [
    k,
    `${JSON.stringify(k)}:`,
  ]),
);
/** More members than this and the whole object is serialized at once. */
const MAX_MEMBERS = 4;

/**
 * `JSON.stringify(r)` without its braces, or undefined for an object of more than MAX_MEMBERS
 * members. Each member's value is serialized alone: for the few members a result has, that is
 * cheaper than serializing the object (about 700 instructions a call for a one-member result
 * under callgrind, #18), and a modern result's own members then follow the gateway's with no
 * cut of serialized text. The same members in the same order (own enumerable string keys, which
 * is JSON.stringify's order), and a value JSON.stringify leaves out (undefined, a function) is
 * left out here too.
 */
export function membersJson(r: Result): string | undefined {
  const keys = Object.keys(r);
  // An object with its own toJSON is serialized as JSON.stringify would (no result from JSON has one).
  if (keys.length > MAX_MEMBERS || typeof r.toJSON === 'function') return undefined;
  let out = '';
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const value = JSON.stringify(r[key]);
    if (value === undefined) continue;
    const quoted = MEMBER_KEYS.get(key) ?? `${JSON.stringify(key)}:`;
    out = out === '' ? quoted + value : `${out},${quoted}${value}`;
  }
  return out;
}

/** Legacy results go out as they are (an upstream's 2026 fields were removed at its edge). */
export const legacyResult = {
  result: (r: Result) => r,
  resultJson: (json: string) => json,
  json: (r: Result): string | undefined => {
    const members = membersJson(r);
    return members === undefined ? JSON.stringify(r) : `{${members}}`;
  },
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
    // The common result's JSON is `head` and then its own members (#18): `_meta` is not serialized
    // per call, and the members are serialized after it rather than cut out of the object's text.
    // The same text as `result(r)` serialized (but for integer-like keys, which an object lists
    // first). A field a modern upstream's edge cleared (set undefined, not deleted:
    // modern-session.ts `complete`) is not in either.
    json: (r: Result): string | undefined => {
      if (r._meta !== undefined || r.resultType !== undefined) return undefined;
      const members = membersJson(r);
      if (members === undefined) return resultJson(JSON.stringify(r));
      return members === '' ? `${head}}` : `${headComma}${members}}`;
    },
  };
}
