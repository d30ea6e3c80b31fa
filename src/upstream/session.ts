import type { Prompt, Resource, ResourceTemplate, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { GatewayConfig, ServerConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import type { VerifiedListing } from '../guards/drift/verdict.js';
import type { Cancellation } from '../lib/cancellation.js';
import type { Logger } from '../lib/log.js';
import type { Platform } from '../platform.js';
import type { Era } from '../protocol/versions.js';

/** The list methods of the server features the gateway aggregates, and the field each page holds. */
export const LISTS = {
  tools: { method: 'tools/list', field: 'tools', capability: 'tools' },
  prompts: { method: 'prompts/list', field: 'prompts', capability: 'prompts' },
  resources: { method: 'resources/list', field: 'resources', capability: 'resources' },
  templates: { method: 'resources/templates/list', field: 'resourceTemplates', capability: 'resources' },
} as const;
export type ListKind = keyof typeof LISTS;

/** Everything one upstream offers that the gateway aggregates, as last listed (listing.ts). */
export interface Listing {
  tools: Tool[];
  prompts: Prompt[];
  resources: Resource[];
  templates: ResourceTemplate[];
  /** The smallest `ttlMs` any page carried: when to list again (2026-07-28 caching). */
  ttlMs?: number;
}

/** One page of any list method: the items, as the server sent them. */
export interface ItemsPage {
  items: unknown[];
  nextCursor?: string | undefined;
  ttlMs?: number;
}

/** Requests for the client's input, keyed as MRTR keys them (spec 2026-07-28: patterns/mrtr). */
export type InputRequests = Record<string, { method: string; params?: Record<string, unknown> }>;
/** The client's answers, by the same keys. */
export type InputResponses = Record<string, Record<string, unknown>>;
/**
 * Asks the client that made a call for input (sampling, elicitation, roots) and resolves with
 * its answers; rejects when it cannot be asked (not enabled, not declared, gone).
 */
export type InputHandler = (requests: InputRequests, guessed?: boolean) => Promise<InputResponses>;

/** Whether server capabilities declare the tools capability (an object), as discover and initialize give them. */
export const declaresTools = (capabilities: Record<string, unknown>): boolean =>
  typeof capabilities.tools === 'object' && capabilities.tools !== null;

/** One `notifications/message` from an upstream. */
export interface LogMessage {
  level: string;
  logger?: string;
  data?: unknown;
}

export interface SessionCallOptions {
  cancellation?: Cancellation | undefined;
  onprogress?: ((p: { progress: number; total?: number; message?: string }) => void) | undefined;
  /**
   * Whose request it is (the principal's key). A message that names no request (a log line or a
   * server request on stdio or a GET stream) reaches the one request in flight only while every
   * request the connection carried was this caller's (SECURITY G5: direct-call.ts, `unnamed`).
   */
  caller?: string | undefined;
  /** Log messages that belong to this request (on its stream, or attributed to it: `caller`). */
  onlog?: ((m: LogMessage) => void) | undefined;
  /** The level the client asked for: a modern upstream sends no log message without one. */
  logLevel?: string | undefined;
  /** How to ask the calling client for input; absent: the upstream's requests are refused. */
  onInput?: InputHandler | undefined;
  /**
   * A modern upstream's `input_required` result: `ask` answers it through `onInput` and retries
   * upstream (the client cannot take MRTR: a legacy one); `relay` returns it as it is, for the
   * edge to hand to a modern client. Server requests of legacy upstreams always use `onInput`.
   */
  inputMode?: 'ask' | 'relay' | undefined;
  /**
   * In `ask` mode, a modern upstream's round ended `input_required` and the client answered it;
   * the request is sent again. The caller audits the round, which reached the upstream (SECURITY G3).
   */
  onInputRound?: (() => void) | undefined;
  /** The client capabilities to declare upstream for this request (modern upstreams). */
  clientCapabilities?: Record<string, unknown> | undefined;
  /**
   * Running the request twice does no harm (a `read` tool, #14): if the connection fails during
   * it, `Upstream.request` resends it (at most the server's `retry` times) once a connection works
   * again, where anything else is "outcome unknown". Sessions ignore it. (A request a legacy
   * server refused with 404 for a session it did not know is resent whatever this says: it never
   * ran.)
   */
  repeatable?: boolean | undefined;
  /** Idle timeout, restarted by each progress notification. */
  timeoutMs: number;
  /** Absolute cap, progress notwithstanding. */
  maxTotalMs: number;
}

/** What a session tells the upstream that owns it. */
export interface SessionEvents {
  /** The server says a list changed (legacy notification, or the modern listen stream). */
  onListChanged(kind: 'tools' | 'prompts' | 'resources'): void;
  /** `notifications/resources/updated` for a URI the gateway subscribed to. */
  onResourceUpdated(uri: string): void;
  /** The connection is gone for good (a stdio child exited, the SDK client closed). */
  onClosed(): void;
  /** Something went wrong on the connection that may mean it is dead: check it. */
  onSuspect(error: unknown): void;
}

export interface SessionDeps {
  config: ServerConfig;
  gateway: GatewayConfig;
  platform: Platform;
  log: Logger;
  clientVersion: string;
  /**
   * Aborted when the attempt is abandoned (the upstream is closing, SECURITY F6): an opener closes
   * what it started (a stdio child, a request) and rejects, rather than finishing its handshake.
   */
  signal?: AbortSignal | undefined;
}

/**
 * One live connection to an upstream, in the era it speaks. The era ends here: `Upstream` and
 * everything above it sees tools, results and errors, never `initialize`, sessions or `_meta`.
 * Results come back era-neutral: a modern server's `resultType` and self-reported identity are
 * removed, so the downstream edge dresses them for whichever era its client speaks.
 */
export interface UpstreamSession {
  readonly era: Era;
  readonly protocolVersion: string;
  /** The server has the tools capability (otherwise nothing is listed). */
  readonly hasTools: boolean;
  /** What the server declared it offers (its ServerCapabilities). */
  readonly capabilities: Record<string, unknown>;
  /**
   * A listing already listed and verified elsewhere (a Worker isolate's session over the upstream
   * object's snapshot, #15): `Upstream` publishes it as it is instead of listing and verifying.
   */
  readonly published?: { listing: Listing; verified: VerifiedListing } | undefined;
  /** One page of any list. */
  listPage(kind: ListKind, cursor: string | undefined, signal: AbortSignal): Promise<ItemsPage>;
  /** Relays one request (prompts/get, resources/read, completion/complete…) and returns its result. */
  request(
    method: string,
    params: Record<string, unknown>,
    options: SessionCallOptions,
  ): Promise<Record<string, unknown>>;
  /** The listing now in force (a modern session reads its `x-mcp-header` annotations from it). */
  noteTools(tools: readonly Tool[]): void;
  /** Asks for `notifications/resources/updated` on one of the server's URIs (or stops asking). */
  subscribe(uri: string): Promise<void>;
  unsubscribe(uri: string): Promise<void>;
  /** Resolves if the connection still works. */
  ping(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * How a runtime opens an upstream's session in place of the probe (`probe.ts openSession`): on
 * Workers, from the upstream object's published snapshot (deploy/workers). An upstream opened this
 * way starts no timers of its own (no ttl relist, no reconnect loop): the runtime pulls freshness
 * per request with `Upstream.reopen`, since a timer cannot do I/O for a request that has ended.
 */
export type SessionOpener = (
  deps: SessionDeps,
  events: SessionEvents,
  hint: Era | undefined,
) => Promise<UpstreamSession>;

/** An opener's refusal: the upstream is not serving now; `stored` is served meanwhile (warm start). */
export class NotServing extends ManifoldError {
  constructor(
    message: string,
    readonly stored: VerifiedListing | undefined,
  ) {
    super('ERR_UPSTREAM_UNAVAILABLE', message);
  }
}
