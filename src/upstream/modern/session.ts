/**
 * A 2026-07-28 upstream: no handshake and no session, every request standing alone with its own
 * `_meta` (spec 2026-07-28: basic/index, basic/versioning). Requests go out directly, one POST
 * each over HTTP or one line each over stdio; change notifications arrive on a
 * `subscriptions/listen` request kept open for the life of the session (patterns/subscriptions).
 */

import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, type JSONRPCMessage, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { ManifoldError } from '../../errors.js';
import { admitMessage } from '../../guards/depth.js';
import { Cancellation } from '../../lib/cancellation.js';
import { isObject } from '../../lib/json.js';
import type { ParamHeader } from '../../protocol/headers.js';
import { META } from '../../protocol/versions.js';
import { backoffDelay } from '../backoff.js';
import { brief, logReason, UpstreamInvalidAnswer, UpstreamProtocolError } from '../call-errors.js';
import {
  declaresTools,
  type InputHandler,
  type InputRequests,
  type ItemsPage,
  LISTS,
  type ListKind,
  type SessionCallOptions,
  type SessionDeps,
  type SessionEvents,
  type UpstreamSession,
} from '../session.js';
import { DirectCaller } from '../wire/direct-call.js';
import { postJsonOf } from '../wire/egress-fetch.js';
import { postMessage } from '../wire/http.js';
import { headerPlans, modernStamp, modernWire } from './wire.js';

/** What `server/discover` told us (patterns: server/discover). */
export interface DiscoverInfo {
  version: string;
  capabilities: Record<string, unknown>;
}

type Result = Record<string, unknown>;

/** Rounds of input one relayed request may need before the gateway gives up. */
const MAX_INPUT_ROUNDS = 8;
/** A listen stream that stayed up this long resets the reconnect backoff. */
const LISTEN_STABLE_MS = 30_000;

export class ModernSession implements UpstreamSession {
  readonly era = 'modern' as const;
  private plans: ReadonlyMap<string, readonly ParamHeader[]> = new Map();
  private readonly caller: DirectCaller;
  private readonly stamp: ReturnType<typeof modernStamp>;
  private closed = false;
  private stopListening: (() => void) | undefined;
  /** URIs to receive `notifications/resources/updated` for. */
  private readonly watched = new Set<string>();
  /** Bumped whenever the listen request is replaced, so an old loop ends. */
  private generationOfListen = 0;

  private constructor(
    private readonly deps: SessionDeps,
    private readonly info: DiscoverInfo,
    private readonly events: SessionEvents,
    private readonly transport: Transport | undefined,
  ) {
    this.stamp = modernStamp(info.version, deps.clientVersion);
    const common = {
      stamp: this.stamp,
      complete: (r: Result) => this.complete(r),
      deliver: (m: JSONRPCMessage) => this.onMessage(m),
      now: () => deps.platform.now(),
      log: deps.log,
    };
    if (transport) {
      // stdio has no per-request stream to close: cancellation is a notification (transports/stdio).
      this.caller = new DirectCaller({
        ...common,
        send: (m) => transport.send(m),
        cancel: (requestId, reason) => {
          transport
            .send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason } })
            .catch(() => {});
        },
      });
      transport.onmessage = (given) => {
        const m = admitMessage(given);
        if (m && !this.caller.route(m)) this.onMessage(m);
      };
      transport.onclose = () => events.onClosed();
      transport.onerror = (e) => deps.log.debug('upstream.transport_error', { error: logReason(e) });
    } else {
      // Over HTTP, closing a request's stream is its cancellation (patterns/cancellation).
      this.caller = new DirectCaller({
        ...common,
        http: {
          url: deps.config.url ?? '',
          post: postJsonOf(deps.platform),
          wire: modernWire(deps.config.headers, info.version, () => this.plans),
        },
        cancel: () => {},
      });
    }
  }

  /** A session over HTTP, or on a stdio child that is already started (and answered the probe). */
  static open(
    deps: SessionDeps,
    info: DiscoverInfo,
    events: SessionEvents,
    transport?: Transport,
  ): ModernSession {
    const s = new ModernSession(deps, info, events, transport);
    s.listen();
    return s;
  }

  /**
   * Requests only, no `subscriptions/listen` loop: for a runtime where a stream cannot outlive the
   * request that opened it (a Worker isolate, #15); changes reach it by its published snapshot.
   */
  static published(deps: SessionDeps, info: DiscoverInfo, events: SessionEvents): ModernSession {
    return new ModernSession(deps, info, events, undefined);
  }

  get protocolVersion(): string {
    return this.info.version;
  }

  get hasTools(): boolean {
    return declaresTools(this.info.capabilities);
  }

  get capabilities(): Record<string, unknown> {
    return this.info.capabilities;
  }

  /** What to ask `subscriptions/listen` for: the list changes the server says it announces. */
  private get listenFilter(): Record<string, boolean> {
    const changes = (cap: string) =>
      (this.info.capabilities[cap] as { listChanged?: unknown } | undefined)?.listChanged === true;
    const filter: Record<string, boolean> = {};
    if (changes('tools')) filter.toolsListChanged = true;
    if (changes('prompts')) filter.promptsListChanged = true;
    if (changes('resources')) filter.resourcesListChanged = true;
    return filter;
  }

  async listPage(kind: ListKind, cursor: string | undefined, signal: AbortSignal): Promise<ItemsPage> {
    const { method, field } = LISTS[kind];
    const r = await this.listRequest(method, cursor, signal);
    const items = r[field];
    if (!Array.isArray(items)) throw new UpstreamProtocolError(`${method} answered without a ${field} array`);
    const page: ItemsPage = { items };
    if (typeof r.nextCursor === 'string') page.nextCursor = r.nextCursor;
    if (typeof r.ttlMs === 'number' && r.ttlMs > 0) page.ttlMs = r.ttlMs;
    return page;
  }

  /** Relays one request; a question the upstream asks is answered here in `ask` mode (rounds). */
  request(method: string, params: Result, options: SessionCallOptions): Promise<Result> {
    const first = this.caller.request(method, params, options);
    const ask = options.inputMode === 'ask' ? options.onInput : undefined;
    if (!ask) return first;
    return first.then((r) =>
      r.resultType === 'input_required' ? this.rounds(method, params, options, ask, r) : r,
    );
  }

  /** Answers the server's questions and sends the request again until it completes (patterns/mrtr). */
  private async rounds(method: string, sent: Result, o: SessionCallOptions, ask: InputHandler, r: Result) {
    for (let round = 1; r.resultType === 'input_required'; round++) {
      if (round > MAX_INPUT_ROUNDS) {
        throw new ManifoldError(
          'ERR_UPSTREAM_ERROR',
          `server ${this.deps.config.name} kept asking for input after ${MAX_INPUT_ROUNDS} rounds; the call was stopped`,
        );
      }
      // The retry carries the answers and the server's own state, exactly.
      const answers = await ask((r.inputRequests as InputRequests | undefined) ?? {});
      // The round is over: answered, and the request goes again. (One the client cannot answer
      // ends the request instead, and the caller audits that end.)
      o.onInputRound?.();
      const { requestState: _old, inputResponses: _prev, ...rest } = sent;
      sent = {
        ...rest,
        inputResponses: answers,
        ...(typeof r.requestState === 'string' ? { requestState: r.requestState } : {}),
      };
      r = await this.caller.request(method, sent, o);
    }
    return r;
  }

  /** One page request, tied to the listing's signal (a listing has one deadline for all pages). */
  private async listRequest(
    method: string,
    cursor: string | undefined,
    signal: AbortSignal,
  ): Promise<Result> {
    const timeout = this.deps.gateway.listTimeoutMs;
    const cancellation = new Cancellation();
    const onAbort = () => cancellation.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await this.caller.request(method, cursor ? { cursor } : {}, {
        cancellation,
        timeoutMs: timeout,
        maxTotalMs: timeout,
      });
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  noteTools(tools: readonly Tool[]): void {
    this.plans = headerPlans(tools);
  }

  /**
   * A complete result without its 2026 dress, or an `input_required` one as it came (the edge
   * decides what the client sees of it). An unknown `resultType` is invalid (basic/index,
   * "ResultType").
   */
  private complete(r: Result): Result {
    const type = r.resultType;
    // A question for the client, or a task handle (SEP-2663): the downstream edge answers them.
    if (type === 'input_required' || type === 'task') return r;
    if (type !== undefined && type !== 'complete') {
      throw new UpstreamInvalidAnswer(
        `the result has an unknown resultType ${JSON.stringify(String(type).slice(0, 40))}`,
      );
    }
    const { resultType: _type, _meta, ...rest } = r;
    if (!isObject(_meta)) return _meta === undefined ? rest : { _meta, ...rest };
    const { [META.serverInfo]: _server, ...others } = _meta;
    return Object.keys(others).length > 0 ? { _meta: others, ...rest } : rest;
  }

  /**
   * Subscriptions travel in the `subscriptions/listen` filter (patterns/subscriptions): a new set
   * of URIs opens a new listen request, and the old one is ended.
   */
  async subscribe(uri: string): Promise<void> {
    if (this.watched.has(uri)) return;
    this.watched.add(uri);
    this.relisten();
  }

  async unsubscribe(uri: string): Promise<void> {
    if (!this.watched.delete(uri)) return;
    this.relisten();
  }

  private relisten(): void {
    this.stopListening?.();
    this.stopListening = undefined;
    this.generationOfListen++;
    this.listen();
  }

  async ping(timeoutMs: number): Promise<void> {
    await this.caller.request('server/discover', {}, { timeoutMs, maxTotalMs: timeoutMs });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopListening?.();
    this.caller.closeAll(new McpError(ErrorCode.ConnectionClosed, 'Connection closed'));
    await this.transport?.close().catch(() => {});
  }

  private onMessage(m: JSONRPCMessage): void {
    const method = (m as { method?: unknown }).method;
    if (method === 'notifications/tools/list_changed') this.events.onListChanged('tools');
    else if (method === 'notifications/prompts/list_changed') this.events.onListChanged('prompts');
    else if (method === 'notifications/resources/list_changed') this.events.onListChanged('resources');
    else if (method === 'notifications/resources/updated') {
      const uri = (m as { params?: { uri?: unknown } }).params?.uri;
      if (typeof uri === 'string') this.events.onResourceUpdated(uri);
    }
  }

  /** Opens `subscriptions/listen` for tools/list_changed when the server offers it. */
  private listen(): void {
    const filter: Record<string, unknown> = { ...this.listenFilter };
    if (this.watched.size > 0) filter.resourceSubscriptions = [...this.watched];
    if (Object.keys(filter).length === 0) return;
    const params = this.stamp({ notifications: filter });
    const transport = this.transport;
    if (transport) {
      // On stdio the subscription is a request on the shared channel, identified by its id.
      const id = `manifold:listen:${this.generationOfListen}`;
      transport.send({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params }).catch(() => {});
      this.stopListening = () => {
        transport
          .send({
            jsonrpc: '2.0',
            method: 'notifications/cancelled',
            params: { requestId: id, reason: 'closing' },
          })
          .catch(() => {});
      };
      return;
    }
    void this.listenHttp(params, this.generationOfListen);
  }

  /**
   * Keeps one listen stream open over HTTP. A stream that ends is opened again with backoff, and
   * the tools are listed again then, since a change may have gone by unannounced.
   */
  private async listenHttp(params: Result, generation: number): Promise<void> {
    const { deps } = this;
    const wire = modernWire(deps.config.headers, this.info.version, () => new Map());
    let failures = 0;
    let rounds = 0;
    const current = () => !this.closed && generation === this.generationOfListen;
    while (current()) {
      const controller = new AbortController();
      this.stopListening = () => controller.abort(new Error('closing'));
      const opened = deps.platform.now();
      try {
        await postMessage(
          {
            url: deps.config.url ?? '',
            post: postJsonOf(deps.platform),
            wire,
            log: deps.log,
            receive: (m) => this.onMessage(m as JSONRPCMessage),
          },
          { jsonrpc: '2.0', id: `manifold:listen:${++rounds}`, method: 'subscriptions/listen', params },
          controller.signal,
        );
      } catch (e) {
        if (!current()) return;
        // A refused listen is the server's problem to see (and the reason changes arrive late).
        deps.log.warn('upstream.listen_failed', { error: brief(e) });
      }
      if (!current()) return;
      failures = deps.platform.now() - opened >= LISTEN_STABLE_MS ? 1 : failures + 1;
      const delay = backoffDelay(failures, { baseMs: 1000, capMs: 30_000, jitter: 0.2 });
      await new Promise((r) => setTimeout(r, delay));
      if (!current()) return;
      for (const key of Object.keys(params.notifications as object)) {
        this.events.onListChanged(
          key === 'toolsListChanged' ? 'tools' : key === 'promptsListChanged' ? 'prompts' : 'resources',
        );
      }
    }
  }
}

/** Reads a DiscoverResult; undefined when it is not one (then the server is not modern). */
export function readDiscover(result: unknown, supported: readonly string[]): DiscoverInfo | undefined {
  const offered = isObject(result) ? result.supportedVersions : undefined;
  const version = Array.isArray(offered) ? supported.find((v) => offered.includes(v)) : undefined;
  if (!version || !isObject(result)) return undefined;
  return { version, capabilities: isObject(result.capabilities) ? result.capabilities : {} };
}
