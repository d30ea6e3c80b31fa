/**
 * A legacy upstream (2025-11-25 and earlier): the SDK client owns the handshake, the session, the
 * GET stream and listings; tools/call over streamable HTTP goes out directly (direct-call.ts).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListPromptsResultSchema,
  ListResourcesResultSchema,
  ListResourceTemplatesResultSchema,
  ListRootsRequestSchema,
  ListToolsResultSchema,
  McpError,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type Tool,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { ManifoldError } from '../../errors.js';
import { offeredCapabilities } from '../../guards/client-features.js';
import { logReason, UpstreamProtocolError } from '../call-errors.js';
import {
  type ItemsPage,
  LISTS,
  type ListKind,
  type SessionCallOptions,
  type SessionDeps,
  type SessionEvents,
  type UpstreamSession,
} from '../session.js';
import { DirectCaller, routeMessages } from '../wire/direct-call.js';
import { postJsonOf } from '../wire/egress-fetch.js';
import { legacyWire } from '../wire/http.js';
import { fromLegacyCreate, readTask, withoutRelatedTask } from '../wire/tasks.js';

/** Methods whose answers change shape at this edge (tasks, in the 2026 extension's flat form). */
const RESHAPED = new Set(['tasks/get', 'tasks/cancel', 'tasks/result']);

const LIST_SCHEMAS = {
  tools: ListToolsResultSchema,
  prompts: ListPromptsResultSchema,
  resources: ListResourcesResultSchema,
  templates: ListResourceTemplatesResultSchema,
} as const;

export class LegacySession implements UpstreamSession {
  readonly era = 'legacy' as const;
  private closed = false;

  private constructor(
    private readonly deps: SessionDeps,
    private readonly client: Client,
    /** Sends every request after the handshake (the SDK client keeps the rest). */
    private readonly direct: DirectCaller,
    /** The revision the handshake settled on. */
    readonly protocolVersion: string,
  ) {}

  get hasTools(): boolean {
    return Boolean(this.client.getServerCapabilities()?.tools);
  }

  get capabilities(): Record<string, unknown> {
    return (this.client.getServerCapabilities() as Record<string, unknown> | undefined) ?? {};
  }

  /** Runs the initialize handshake on `transport` (which may already be started, see probe.ts). */
  static async open(deps: SessionDeps, transport: Transport, events: SessionEvents): Promise<LegacySession> {
    const features = deps.config.clientFeatures;
    const client = newSdkClient(deps.clientVersion, offeredCapabilities(features));
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => events.onListChanged('tools'));
    client.setNotificationHandler(PromptListChangedNotificationSchema, () => events.onListChanged('prompts'));
    client.setNotificationHandler(ResourceListChangedNotificationSchema, () =>
      events.onListChanged('resources'),
    );
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) =>
      events.onResourceUpdated(n.params.uri),
    );
    // Log lines are taken off the transport by the direct caller (routeMessages below), which
    // alone can tell whose they are. Requests from the server to the client (sampling,
    // elicitation, roots) go to the call they belong to: the one on whose stream they came (HTTP),
    // else the one call in flight when one caller ever used the connection (DirectCaller.unnamed).
    const owners = new Map<string | number, string>();
    let direct: DirectCaller | undefined;
    const ask = async (
      method: string,
      params: unknown,
      requestId: string | number,
    ): Promise<Record<string, unknown>> => {
      const callId = owners.get(requestId);
      owners.delete(requestId);
      // On a call's stream: that call's. Otherwise only guessed, and only within one caller.
      const owned = callId !== undefined ? direct?.inputFor(callId) : undefined;
      const input = owned ?? (callId === undefined ? direct?.inputFor(undefined) : undefined);
      if (!input) {
        // Refused upstream, so the server does not wait for an answer nobody will give.
        deps.log.debug('upstream.unattributed', { method });
        throw new McpError(
          ErrorCode.InternalError,
          `Manifold cannot tell which call ${method} belongs to, so it has no client to ask`,
        );
      }
      let answers: Record<string, Record<string, unknown>>;
      try {
        answers = await input(
          { r: { method, ...(params !== undefined ? { params: params as Record<string, unknown> } : {}) } },
          // Only streamable HTTP tells a call's requests (on its POST stream) from others.
          owned === undefined && transport instanceof StreamableHTTPClientTransport,
        );
      } catch (e) {
        // The server hears why (the client's own error code when it refused), never a stack.
        const code =
          e instanceof ManifoldError && typeof e.data?.clientCode === 'number'
            ? e.data.clientCode
            : ErrorCode.InternalError;
        throw new McpError(
          code,
          e instanceof ManifoldError ? e.publicMessage : `the client could not be asked for ${method}`,
        );
      }
      const answer = answers.r;
      if (!answer) throw new McpError(ErrorCode.InvalidRequest, `the client gave no answer to ${method}`);
      return answer;
    };
    for (const [on, schema] of [
      [features.elicitation, ElicitRequestSchema],
      [features.sampling, CreateMessageRequestSchema],
      [features.roots, ListRootsRequestSchema],
    ] as const) {
      if (on)
        client.setRequestHandler(schema, (r, extra) => ask(r.method, r.params, extra.requestId) as never);
    }
    client.onclose = () => events.onClosed();
    client.onerror = (e) => {
      deps.log.debug('upstream.transport_error', { error: logReason(e) });
      // HTTP and SSE transports report a dead stream here and never close; find out for sure.
      events.onSuspect(e);
    };
    // The SDK tells the transport which revision initialize settled on; keep it for /healthz.
    let negotiated = 'unknown';
    const tell = transport.setProtocolVersion?.bind(transport);
    transport.setProtocolVersion = (v: string) => {
      negotiated = v;
      tell?.(v);
    };
    const timeout = deps.gateway.connectTimeoutMs;
    try {
      await withDeadline(client.connect(transport, { timeout }), timeout, 'connect');
    } catch (e) {
      await client.close().catch(() => {});
      throw e;
    }
    const cancel = (requestId: string, reason: string) => {
      client
        .notification({ method: 'notifications/cancelled', params: { requestId, reason } })
        .catch(() => {});
    };
    // Requests go out directly, after the SDK's handshake: a POST of their own over streamable
    // HTTP, a line written to the transport over stdio and SSE. Answers, progress and log lines of those requests are taken off the transport before the
    // SDK client sees them; everything else is still the SDK's.
    direct = routeMessages(transport, (deliver) =>
      transport instanceof StreamableHTTPClientTransport
        ? new DirectCaller({
            http: {
              url: deps.config.url ?? '',
              post: postJsonOf(deps.platform),
              wire: legacyWire(transport, deps.config.headers),
            },
            deliver,
            noteServerRequest: (requestId, callId) => owners.set(requestId, callId),
            cancel,
            now: () => deps.platform.now(),
            log: deps.log,
          })
        : new DirectCaller({
            send: (m) => transport.send(m),
            deliver,
            cancel,
            now: () => deps.platform.now(),
            log: deps.log,
          }),
    );
    return new LegacySession(deps, client, direct, negotiated);
  }

  async listPage(kind: ListKind, cursor: string | undefined, signal: AbortSignal): Promise<ItemsPage> {
    const { method, field } = LISTS[kind];
    const page = (await this.client.request(
      { method, params: cursor ? { cursor } : {} },
      LIST_SCHEMAS[kind],
      {
        signal,
        timeout: this.deps.gateway.listTimeoutMs,
      },
    )) as Record<string, unknown>;
    return { items: page[field] as unknown[], nextCursor: page.nextCursor as string | undefined };
  }

  noteTools(_tools: readonly Tool[]): void {}

  request(
    method: string,
    params: Record<string, unknown>,
    options: SessionCallOptions,
  ): Promise<Record<string, unknown>> {
    // Tasks and their methods are reshaped to the 2026 extension's flat form (wire/tasks.ts).
    if (method === 'tools/call' ? params.task === undefined : !RESHAPED.has(method)) {
      return this.send(method, params, options);
    }
    return this.reshaped(method, params, options);
  }

  private async reshaped(
    method: string,
    params: Record<string, unknown>,
    options: SessionCallOptions,
  ): Promise<Record<string, unknown>> {
    const result = await this.send(method, params, options);
    // Tasks leave this edge in the flat shape of the 2026 extension (wire/tasks.ts).
    if (method === 'tools/call' && params.task !== undefined) return fromLegacyCreate(result);
    if (method === 'tasks/get' || method === 'tasks/cancel') {
      const task = readTask(result);
      if (!task) throw new UpstreamProtocolError(`${method} answered without a task`);
      return { ...task };
    }
    if (method === 'tasks/result') return withoutRelatedTask(result);
    return result;
  }

  private send(
    method: string,
    params: Record<string, unknown>,
    options: SessionCallOptions,
  ): Promise<Record<string, unknown>> {
    if (this.closed) return Promise.reject(new McpError(ErrorCode.ConnectionClosed, 'Connection closed'));
    return this.direct.request(method, params, options);
  }

  /** `resources/subscribe` (spec 2025-11-25: server/resources, subscriptions). */
  subscribe(uri: string): Promise<void> {
    return this.watch('resources/subscribe', uri);
  }

  unsubscribe(uri: string): Promise<void> {
    return this.watch('resources/unsubscribe', uri);
  }

  private async watch(method: string, uri: string): Promise<void> {
    const ms = this.deps.gateway.callTimeoutMs;
    await this.request(method, { uri }, { timeoutMs: ms, maxTotalMs: ms });
  }

  async ping(timeoutMs: number): Promise<void> {
    await this.client.ping({ timeout: timeoutMs });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.direct.closeAll(new McpError(ErrorCode.ConnectionClosed, 'Connection closed'));
    await this.client.close().catch(() => {});
  }
}

// The gateway never validates upstream output through the SDK; this keeps Ajv (which uses
// `new Function`, forbidden on Workers) out of the client.
const noValidation: jsonSchemaValidator = {
  getValidator: () => (input) => ({ valid: true, data: input as never, errorMessage: undefined }),
};

/**
 * The SDK client an upstream connection uses. `capabilities` are the client features the gateway
 * relays for this server (legacy servers learn them once, at initialize).
 */
function newSdkClient(version: string, capabilities: Record<string, unknown> = {}): Client {
  const client = new Client(
    { name: 'manifold', version },
    { capabilities, jsonSchemaValidator: noValidation },
  );
  // Any other upstream -> client request is refused clearly.
  client.fallbackRequestHandler = async (request) => {
    throw new McpError(ErrorCode.MethodNotFound, `Manifold does not relay ${request.method} to clients`);
  };
  return client;
}

function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ManifoldError('ERR_UPSTREAM_TIMEOUT', `${what} timed out after ${ms} ms`)),
      ms,
    );
  });
  return Promise.race([p, deadline]).finally(() => timer !== undefined && clearTimeout(timer));
}
