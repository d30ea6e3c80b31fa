/**
 * A held MRTR retry that reached the wrong instance (#15). A call bridged to a legacy upstream
 * that asked for input mid-call stays open on the instance that runs it (mrtr.ts, "held"), and its
 * sealed state names that instance; so does the task id of a legacy server's task (tasks.ts),
 * which lives with that instance's upstream session. A request whose state or task id names
 * another instance is sent there, once, through the runtime's `Forwarder`
 * (deploy/node/store/postgres/instances.ts), and its answer comes back unchanged. A forwarded request carries a mark sealed with the deployment's secret:
 * it is never forwarded again, and a mark that does not open is refused, so the header alone
 * grants nothing.
 */

import { base64url } from 'jose';
import { Sealer } from '../../auth/seal.js';
import { ManifoldError } from '../../errors.js';
import type { Gateway } from '../../gateway/gateway.js';
import { isObject } from '../../lib/json.js';
import { paramHeaderPlan } from '../../protocol/headers.js';
import type { HttpIn, Reply } from './http-in.js';
import { invalidState, type StateBody } from './rounds/mrtr.js';

/** One request as the runtime sends it to another instance. */
export interface ForwardRequest {
  /** The path it came in on (/mcp or /mcp/<profile>): the same catalog there. */
  path: string;
  headers: Record<string, string>;
  /** The body exactly as the client sent it. */
  body: string;
  /** Aborted when the client goes away: the holder then sees its request closed (a cancellation). */
  signal: AbortSignal;
}

/** How an instance reaches the others of its deployment (absent: one instance, or Workers). */
export interface Forwarder {
  /** This process's id, named in the held states it seals. */
  readonly id: string;
  /** The answer of instance `to`, or undefined when it is unknown, gone or does not answer. */
  send(to: string, request: ForwardRequest): Promise<Response | undefined>;
}

/** What forwarding reads of the edge. */
interface ForwardingEdge {
  gateway: Gateway;
  instance: string;
  forwarder?: Forwarder | undefined;
}

/** The mark on a forwarded request. */
export const FORWARD_HEADER = 'manifold-forwarded';
/** A mark is good for this long: it travels between two instances of one deployment. */
const MARK_TTL_MS = 30_000;
/** What the client sent that the holder reads; Mcp-Param-* are added per tool. */
const PASSED = [
  'authorization',
  'host',
  'origin',
  'content-type',
  'accept',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
  // A legacy client's tasks/* request: its session is read from the shared store there.
  'mcp-session-id',
  'traceparent',
  'tracestate',
];
/** Not the answer's own: the runtime that writes it sets these again. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date']);

const enc = new TextEncoder();

/**
 * The marks' sealer: its key is derived from the request-state key (a MAC under it, never sent
 * anywhere), so it follows the deployment's one secret without the gateway exposing it.
 */
const markers = new WeakMap<Gateway, Promise<Sealer>>();
function marker(gateway: Gateway): Promise<Sealer> {
  let m = markers.get(gateway);
  if (!m) {
    m = gateway.states.then(async (states) =>
      Sealer.create(enc.encode(await states.seal('manifold/forward-key')), 'manifold/forward'),
    );
    markers.set(gateway, m);
  }
  return m;
}

async function digest(state: string): Promise<string> {
  return base64url.encode(new Uint8Array(await crypto.subtle.digest('SHA-256', enc.encode(state))));
}

/**
 * What names the instance a request belongs to: a modern retry's requestState, or the task id of
 * a tasks/* request (either era).
 */
function routeOf(message: Record<string, unknown>, modern: boolean): { state?: string; task?: string } {
  const params = isObject(message.params) ? message.params : undefined;
  if (modern && typeof params?.requestState === 'string') return { state: params.requestState };
  if (
    typeof message.method === 'string' &&
    message.method.startsWith('tasks/') &&
    typeof params?.taskId === 'string'
  )
    return { task: params.taskId };
  return {};
}

/**
 * Before a POST is served: a forwarded one must carry a mark that opens for this instance and
 * this request (else 403); a modern retry of a call held elsewhere, or a tasks/* request for a
 * legacy server's task created elsewhere, is forwarded, and the holder's answer returned.
 * Undefined: serve it here.
 */
export async function routeRetry(
  edge: ForwardingEdge,
  c: HttpIn,
  message: Record<string, unknown>,
  text: string,
  modern: boolean,
): Promise<Reply | undefined> {
  const mark = c.header(FORWARD_HEADER);
  const { state, task } = routeOf(message, modern);
  if (mark !== undefined) {
    await checkMark(edge, mark, state ?? task);
    return undefined;
  }
  const { forwarder } = edge;
  if (!forwarder || (state === undefined && task === undefined)) return undefined;
  const now = edge.gateway.platform.now();
  if (state !== undefined) {
    const body = (await (await edge.gateway.states).open(state)) as Partial<StateBody> | undefined;
    if (body?.k !== 'held' || typeof body.i !== 'string' || body.i === edge.instance) return undefined;
    // Only a state this principal may still use travels; the holder checks everything again.
    if (body.p !== c.principal.key || typeof body.x !== 'number' || body.x < now) throw invalidState();
    return forward(edge, forwarder, body.i, c, message, text, state, invalidState);
  }
  const ref = (await (await edge.gateway.taskIds).open(task)) as Record<string, unknown> | undefined;
  // Not this principal's, or not held anywhere else: served here (and refused here if foreign).
  if (typeof ref?.i !== 'string' || ref.i === edge.instance || ref.p !== c.principal.key) return undefined;
  return forward(edge, forwarder, ref.i, c, message, text, task!, goneTask);
}

/** The instance that ran a legacy server's task is gone, and its task with it. */
const goneTask = () =>
  new ManifoldError(
    'ERR_INVALID_PARAMS',
    'Unknown task: the instance that ran it is gone; send the original request again',
  );

async function checkMark(edge: ForwardingEdge, mark: string, state: unknown): Promise<void> {
  const opened = (await (await marker(edge.gateway)).open(mark)) as Record<string, unknown> | undefined;
  if (
    typeof state !== 'string' ||
    opened?.t !== edge.instance ||
    typeof opened.x !== 'number' ||
    opened.x < edge.gateway.platform.now() ||
    opened.d !== (await digest(state))
  ) {
    throw new ManifoldError('ERR_FORBIDDEN', 'Forbidden: this request claims to be forwarded by an instance');
  }
}

async function forward(
  edge: ForwardingEdge,
  forwarder: Forwarder,
  to: string,
  c: HttpIn,
  message: Record<string, unknown>,
  text: string,
  bound: string,
  gone: () => ManifoldError,
): Promise<Reply> {
  const headers: Record<string, string> = {};
  for (const name of [...PASSED, ...paramHeaders(edge, message)]) {
    const value = c.header(name);
    if (value !== undefined) headers[name] = value;
  }
  const x = edge.gateway.platform.now() + MARK_TTL_MS;
  headers[FORWARD_HEADER] = await (await marker(edge.gateway)).seal({ t: to, x, d: await digest(bound) });
  const aborted = new AbortController();
  const stop = c.onDisconnect(() => aborted.abort());
  const answer = await forwarder.send(to, { path: c.path, headers, body: text, signal: aborted.signal });
  if (!answer) {
    stop();
    // The holder is gone (stopped, killed) or unknown: its call is lost with it.
    throw gone();
  }
  const kept = new Headers();
  answer.headers.forEach((value, name) => {
    if (!HOP_BY_HOP.has(name)) kept.set(name, value);
  });
  return new Response(answer.body, { status: answer.status, headers: kept });
}

/** The Mcp-Param-* headers a tools/call to this tool may carry (streamable-http, custom headers). */
function paramHeaders(edge: ForwardingEdge, message: Record<string, unknown>): string[] {
  const name = message.method === 'tools/call' && isObject(message.params) ? message.params.name : undefined;
  const entry = typeof name === 'string' ? edge.gateway.catalog.byName.get(name) : undefined;
  if (!entry) return [];
  const plan = paramHeaderPlan(entry.tool.inputSchema);
  return plan.ok ? plan.params.map((p) => `mcp-param-${p.header.toLowerCase()}`) : [];
}
