import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ErrorCode,
  ListToolsResultSchema,
  McpError,
  type Tool,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { Cancellation } from '../cancellation.js';
import type { GatewayConfig, ServerConfig } from '../config/types.js';
import type { VerifiedListing } from '../drift-gate.js';
import { ManifoldError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Platform } from '../platform.js';
import { type BackoffOptions, backoffDelay, defaultBackoff } from './backoff.js';
import { brief, mapCallError } from './call-errors.js';
import { DirectCaller, routeMessages } from './direct-call.js';
import { listAllTools } from './discovery.js';
import { newSdkClient, PassThrough, withDeadline } from './sdk-client.js';
import { createTransport } from './transports.js';

export type UpstreamState =
  | 'connecting'
  | 'ready'
  | 'backoff'
  | 'failed'
  | 'disabled'
  | 'unsupported'
  | 'closed';

export interface UpstreamStatus {
  name: string;
  transport: ServerConfig['type'];
  state: UpstreamState;
  tools: number;
  lastError?: string;
  rule?: string;
  consecutiveFailures: number;
}

/** Consecutive failures after which a server is reported `failed` (it is still probed at the cap). */
export const FAILED_AFTER = 5;
/** A connection that stayed up this long ends a failure streak when it drops. */
const STABLE_MS = 30_000;

export interface UpstreamDeps {
  platform: Platform;
  gateway: GatewayConfig;
  log: Logger;
  backoff?: BackoffOptions;
  clientVersion: string;
}

export interface CallOptions {
  cancellation?: Cancellation;
  onprogress?: (p: { progress: number; total?: number; message?: string }) => void;
}

/**
 * One configured upstream server: its SDK Client, its last complete tool listing, and the
 * reconnect loop. It never throws into its siblings: every failure becomes state + lastError.
 */
export class Upstream {
  readonly config: ServerConfig;
  state: UpstreamState = 'connecting';
  tools: Tool[] = [];
  lastError?: string;
  rule?: string;
  consecutiveFailures = 0;
  /** Called whenever the set of tools this upstream contributes may have changed. */
  onChange: () => void = () => {};
  /**
   * Checks a complete listing before it is published (drift). Without one, every tool is trusted.
   * Runs before `tools` changes, so no client ever sees an unverified catalog (C4).
   */
  verify: (tools: Tool[]) => Promise<VerifiedListing> = async (tools) => ({
    trusted: tools,
    quarantined: [],
    removed: [],
    identityChanged: false,
  });
  verified: VerifiedListing | undefined;

  private client: Client | undefined;
  /** The tools/call fast path of a streamable-HTTP upstream (see direct-call.ts). */
  private direct: DirectCaller | undefined;
  private generation = 0;
  private readyAt = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private relisting: Promise<void> | undefined;
  private relistAgain = false;
  private probing = false;
  private readonly log: Logger;

  constructor(
    config: ServerConfig,
    private readonly deps: UpstreamDeps,
  ) {
    this.config = config;
    this.log = deps.log.child({ server: config.name });
    if (config.disabled) this.state = 'disabled';
  }

  get name(): string {
    return this.config.name;
  }

  /** Settles when the first connection attempt has settled, either way. */
  firstAttempt: Promise<void> = Promise.resolve();

  /** The first attempt; resolves once it has settled either way. */
  start(): Promise<void> {
    if (this.state === 'disabled') return Promise.resolve();
    this.firstAttempt = this.connect();
    return this.firstAttempt;
  }

  status(): UpstreamStatus {
    return {
      name: this.name,
      transport: this.config.type,
      state: this.state,
      tools: this.state === 'ready' ? this.tools.length : 0,
      consecutiveFailures: this.consecutiveFailures,
      ...(this.lastError ? { lastError: this.lastError } : {}),
      ...(this.rule ? { rule: this.rule } : {}),
    };
  }

  private async connect(): Promise<void> {
    const gen = ++this.generation;
    const { gateway, platform } = this.deps;
    this.state = 'connecting';
    let client: Client | undefined;
    try {
      const transport: Transport = createTransport(this.config, platform, this.log);
      client = newSdkClient(this.deps.clientVersion);
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.onListChanged(gen));
      client.onclose = () => this.onClosed(gen);
      client.onerror = (e) => {
        this.log.debug('upstream.transport_error', { error: brief(e) });
        // HTTP and SSE transports report a dead stream here and never close; find out for sure.
        this.probe(gen);
      };
      await withDeadline(
        client.connect(transport, { timeout: gateway.connectTimeoutMs }),
        gateway.connectTimeoutMs,
        'connect',
      );
      const direct = this.routeMessages(transport, client);
      const tools = client.getServerCapabilities()?.tools ? await this.list(client) : [];
      const verified = await this.verify(tools);
      if (gen !== this.generation) {
        await client.close().catch(() => {});
        return;
      }
      this.client = client;
      this.direct = direct;
      this.tools = tools;
      this.verified = verified;
      this.state = 'ready';
      this.readyAt = platform.now();
      this.lastError = undefined;
      this.rule = undefined;
      this.log.info('upstream.ready', { tools: tools.length });
      this.onChange();
    } catch (e) {
      if (client) await client.close().catch(() => {});
      if (gen !== this.generation) return;
      this.fail(e);
    }
  }

  private list(client: Client): Promise<Tool[]> {
    const { gateway } = this.deps;
    return listAllTools(
      async (cursor, signal) =>
        client.request({ method: 'tools/list', params: cursor ? { cursor } : {} }, ListToolsResultSchema, {
          signal,
          timeout: gateway.listTimeoutMs,
        }),
      {
        maxPages: gateway.maxListPages,
        deadlineMs: gateway.listTimeoutMs,
        maxTools: gateway.maxToolsPerServer,
      },
    );
  }

  private fail(e: unknown): void {
    this.dropDirect();
    this.client = undefined;
    this.tools = [];
    this.verified = undefined;
    this.lastError = brief(e);
    const rule = e instanceof ManifoldError ? (e.data?.rule as string | undefined) : undefined;
    if (rule === 'unsupported-transport') {
      this.state = 'unsupported';
      this.rule = rule;
      this.log.warn('upstream.unsupported', { rule, error: this.lastError });
      this.onChange();
      return;
    }
    // Kept for /healthz so an operator can tell policy (egress-denied) from an outage.
    this.rule = rule;
    this.consecutiveFailures++;
    this.state = this.consecutiveFailures >= FAILED_AFTER ? 'failed' : 'backoff';
    const delay = backoffDelay(this.consecutiveFailures, this.deps.backoff ?? defaultBackoff);
    this.log.warn('upstream.unavailable', {
      ...(rule ? { rule } : {}),
      error: this.lastError,
      failures: this.consecutiveFailures,
      retryInMs: delay,
      state: this.state,
    });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.state !== 'closed') void this.connect();
    }, delay);
    this.onChange();
  }

  private onClosed(gen: number): void {
    if (gen !== this.generation || this.state !== 'ready') return;
    // A connection that held for a while starts a fresh failure streak; a crash loop does not.
    if (this.deps.platform.now() - this.readyAt >= STABLE_MS) this.consecutiveFailures = 0;
    this.generation++;
    this.fail(new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', 'connection closed by the upstream'));
  }

  private onListChanged(gen: number): void {
    if (gen !== this.generation || this.state !== 'ready') return;
    this.log.info('upstream.list_changed');
    void this.refresh();
  }

  /** Lists again (serialised: changes that arrive meanwhile cause one more pass). */
  refresh(): Promise<void> {
    if (this.relisting) {
      this.relistAgain = true;
      return this.relisting;
    }
    this.relisting = (async () => {
      do {
        this.relistAgain = false;
        const client = this.client;
        const gen = this.generation;
        if (!client || this.state !== 'ready') return;
        try {
          const tools = await this.list(client);
          const verified = await this.verify(tools);
          if (gen !== this.generation) return;
          this.tools = tools;
          this.verified = verified;
          this.onChange();
        } catch (e) {
          // Keep the last complete listing: never load half of one.
          this.lastError = brief(e);
          this.log.warn('upstream.relist_failed', { error: this.lastError });
        }
      } while (this.relistAgain);
    })().finally(() => {
      this.relisting = undefined;
    });
    return this.relisting;
  }

  /** Checks the current listing again (after a re-trust) without asking the upstream. */
  async reverify(): Promise<void> {
    if (this.state !== 'ready') return;
    const gen = this.generation;
    const verified = await this.verify(this.tools);
    if (gen !== this.generation) return;
    this.verified = verified;
    this.onChange();
  }

  /** Relays one tools/call. Never retried: a failure after sending has an unknown outcome. */
  async callTool(
    params: Record<string, unknown>,
    options: CallOptions = {},
  ): Promise<Record<string, unknown>> {
    const client = this.client;
    if (!client || this.state !== 'ready') {
      throw new ManifoldError(
        'ERR_UPSTREAM_UNAVAILABLE',
        `server ${this.name} is not connected right now (${this.state}); the call was not sent`,
      );
    }
    const timeout = this.config.timeoutMs;
    const maxTotal = Math.max(timeout, this.deps.gateway.maxCallTimeoutMs);
    const direct = this.direct;
    if (direct) {
      try {
        return await direct.call(params, {
          cancellation: options.cancellation,
          onprogress: options.onprogress,
          timeoutMs: timeout,
          maxTotalMs: maxTotal,
        });
      } catch (e) {
        throw this.callFailed(e, timeout, options.cancellation);
      }
    }
    // Our own signal, so that hitting the absolute maximum also cancels upstream (E2): the SDK
    // sends notifications/cancelled on an idle timeout, but not when the total cap is reached.
    const local = new AbortController();
    const cancellation = options.cancellation;
    if (cancellation?.aborted) local.abort(cancellation.reason);
    const off = cancellation?.onAbort((reason) => local.abort(reason));
    try {
      return await client.request({ method: 'tools/call', params: params as { name: string } }, PassThrough, {
        signal: local.signal,
        ...(options.onprogress ? { onprogress: options.onprogress } : {}),
        timeout,
        resetTimeoutOnProgress: true,
        maxTotalTimeout: maxTotal,
      });
    } catch (e) {
      const data = e instanceof McpError ? (e.data as { maxTotalTimeout?: unknown } | undefined) : undefined;
      if (typeof data?.maxTotalTimeout === 'number' && !local.signal.aborted) local.abort(e);
      throw this.callFailed(e, timeout, cancellation);
    } finally {
      off?.();
    }
  }

  private callFailed(e: unknown, timeout: number, cancellation: Cancellation | undefined): ManifoldError {
    const mapped = mapCallError(e, this.name, timeout, cancellation?.aborted === true);
    if (mapped.code === 'ERR_OUTCOME_UNKNOWN') this.probe(this.generation);
    return mapped;
  }

  /**
   * Checks a connection that may be dead with one ping. HTTP transports do not close when their
   * server goes away (and a restarted server no longer knows our session), so a failed ping is
   * what turns that into a reconnect, and the reconnect into a list_changed on recovery (F4).
   */
  private probe(gen: number): void {
    const client = this.client;
    if (this.probing || !client || gen !== this.generation || this.state !== 'ready') return;
    this.probing = true;
    client
      .ping({ timeout: Math.min(this.deps.gateway.connectTimeoutMs, 10_000) })
      .then(
        () => undefined,
        (e: unknown) => {
          if (gen !== this.generation || this.state !== 'ready') return;
          this.generation++;
          this.client = undefined;
          this.dropDirect();
          void client.close().catch(() => {});
          this.fail(new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', `connection lost: ${brief(e)}`));
        },
      )
      .finally(() => {
        this.probing = false;
      });
  }

  async close(): Promise<void> {
    this.state = 'closed';
    this.generation++;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    this.dropDirect();
    if (client) await client.close().catch(() => {});
  }

  /** Messages go to the SDK client, except answers to direct calls (streamable HTTP only). */
  private routeMessages(transport: Transport, client: Client): DirectCaller | undefined {
    return routeMessages(transport, (deliver) =>
      transport instanceof StreamableHTTPClientTransport
        ? new DirectCaller({
            url: this.config.url ?? '',
            fetch: this.deps.platform.fetch,
            headers: this.config.headers,
            endpoint: transport,
            deliver,
            cancel: (requestId, reason) => {
              client
                .notification({ method: 'notifications/cancelled', params: { requestId, reason } })
                .catch(() => {});
            },
            now: () => this.deps.platform.now(),
            log: this.log,
          })
        : undefined,
    );
  }

  private dropDirect(): void {
    this.direct?.closeAll(new McpError(ErrorCode.ConnectionClosed, 'Connection closed'));
    this.direct = undefined;
  }
}
