import type { Prompt, Resource, ResourceTemplate, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Cancellation } from '../cancellation.js';
import type { GatewayConfig, ServerConfig } from '../config/types.js';
import type { VerifiedListing } from '../drift-gate.js';
import { ManifoldError } from '../errors.js';
import { driftListing } from '../guards/drift-kinds.js';
import type { Logger } from '../log.js';
import type { Platform } from '../platform.js';
import type { Era } from '../protocol/versions.js';
import { type BackoffOptions, backoffDelay, defaultBackoff } from './backoff.js';
import {
  brief,
  httpStatusOf,
  logReason,
  mapCallError,
  type NotResent,
  notResentError,
  publicReason,
  sessionExpired,
} from './call-errors.js';
import { ALL_KINDS, emptyListing, type Listing, listUpstream } from './listing.js';
import type { ListKind, SessionCallOptions, UpstreamSession } from './session.js';

/**
 * The session layer (the SDK client, its transports, the HTTP wires) is loaded on the first
 * connection, not with the gateway: the listener opens before any of it is needed (#18, start time).
 */
let sessionLayer: Promise<typeof import('./probe.js')> | undefined;
const sessions = () => {
  sessionLayer ??= import('./probe.js');
  return sessionLayer;
};

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
  /** The era it speaks and the revision in use, once connected. */
  era?: Era;
  protocolVersion?: string;
}

/** Consecutive failures after which a server is reported `failed` (it is still probed at the cap). */
export const FAILED_AFTER = 5;
/** A connection that stayed up this long ends a failure streak when it drops. */
const STABLE_MS = 30_000;
/** A server's `ttlMs` never makes the gateway list more often than this. */
const MIN_TTL_RELIST_MS = 5_000;
/**
 * While a resend waits for the connection to come back, reconnects follow this quicker schedule
 * (100 ms, 200 ms … 2 s after each failure) instead of the normal backoff (#14).
 */
const QUICK_RECONNECT: BackoffOptions = { baseMs: 100, capMs: 2_000, jitter: 0.1 };

export interface UpstreamDeps {
  platform: Platform;
  gateway: GatewayConfig;
  log: Logger;
  backoff?: BackoffOptions;
  clientVersion: string;
}

/** What a caller may attach to a relayed request; the deadlines are the server's own. */
export type CallOptions = Omit<SessionCallOptions, 'timeoutMs' | 'maxTotalMs'>;

/**
 * One configured upstream server: its session (in whichever era it speaks), its last complete
 * tool listing, and the reconnect loop. It never throws into its siblings: every failure becomes
 * state + lastError.
 */
export class Upstream {
  readonly config: ServerConfig;
  state: UpstreamState = 'connecting';
  /** The last complete listing of every kind (tools, prompts, resources, templates). */
  listing: Listing = emptyListing();
  lastError?: string;
  rule?: string;
  consecutiveFailures = 0;
  /** Called whenever what this upstream contributes may have changed. */
  onChange: () => void = () => {};
  /** `notifications/resources/updated` from this upstream (original URI). */
  onResourceUpdated: (uri: string) => void = () => {};
  /**
   * Checks a complete listing before it is published (drift): tools, prompts and templates as
   * tool-shaped records (guards/drift-kinds.ts). Without one, everything is trusted. Runs before
   * the listing changes, so no client ever sees an unverified catalog (C4).
   */
  verify: (tools: Tool[]) => Promise<VerifiedListing> = async (tools) => ({
    trusted: tools,
    quarantined: [],
    removed: [],
    identityChanged: false,
  });
  verified: VerifiedListing | undefined;

  private session: UpstreamSession | undefined;
  /** The era of the last good connection: the next one skips the probe (basic/versioning). */
  private eraHint: Era | undefined;
  private ttlTimer: ReturnType<typeof setTimeout> | undefined;
  private generation = 0;
  private readyAt = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  /** When the pending reconnect is due, and when the last attempt failed (platform clock). */
  private retryAt = 0;
  private failedAt = 0;
  private relisting: Promise<void> | undefined;
  /** Kinds to list again once the current relisting ends. */
  private relistKinds = new Set<ListKind>();
  /** The ping of a connection that may be dead, while it runs. */
  private probing: Promise<void> | undefined;
  /** A new session replacing one the server no longer knew, while it opens (the listing stays). */
  private renewing: Promise<void> | undefined;
  /** Requests in flight per session, so a replaced session is closed only once they are done. */
  private readonly busy = new Map<UpstreamSession, number>();
  /** Replaced sessions to close when their last request ends. */
  private readonly retiring = new Set<UpstreamSession>();
  /** Resolved at the next change of state, probe or renewal (what a waiting resend watches). */
  private wake: { promise: Promise<void>; resolve: () => void } | undefined;
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

  get tools(): Tool[] {
    return this.listing.tools;
  }

  get prompts(): Prompt[] {
    return this.listing.prompts;
  }

  get resources(): Resource[] {
    return this.listing.resources;
  }

  get templates(): ResourceTemplate[] {
    return this.listing.templates;
  }

  /** URIs someone downstream watches; asked for again after every reconnect. */
  private readonly watched = new Set<string>();

  /** Starts watching a URI upstream (`resources/subscribe`, or the modern listen filter). */
  async subscribe(uri: string): Promise<void> {
    this.watched.add(uri);
    const session = this.session;
    if (session && this.state === 'ready') await session.subscribe(uri);
  }

  async unsubscribe(uri: string): Promise<void> {
    if (!this.watched.delete(uri)) return;
    const session = this.session;
    if (session && this.state === 'ready') await session.unsubscribe(uri).catch(() => {});
  }

  /** Whether the server can send resource updates at all (its resources.subscribe capability). */
  get canSubscribe(): boolean {
    const resources = this.capabilities.resources as { subscribe?: unknown } | undefined;
    return resources?.subscribe === true;
  }

  /** What drift covers of the current listing (tools, prompts and templates), tool-shaped. */
  driftRecords(): Tool[] {
    return driftListing(this.listing);
  }

  /** The era the server speaks on the current connection. */
  get era(): Era | undefined {
    return this.session?.era;
  }

  /** What the server declared, once connected. */
  get capabilities(): Record<string, unknown> {
    return this.session?.capabilities ?? {};
  }

  /** Settles when the first connection attempt has settled, either way. */
  firstAttempt: Promise<void> = Promise.resolve();
  /** Requests relayed and not yet answered (an isolated instance is not closed while busy). */
  inflight = 0;

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
      ...(this.session ? { era: this.session.era, protocolVersion: this.session.protocolVersion } : {}),
    };
  }

  /**
   * Opens a session, lists and verifies, and publishes. `renew`: in place of a session the server
   * no longer knows; the upstream stays `ready` with its listing meanwhile, so a client sees no
   * change unless the listing really changed.
   */
  private async connect(renew = false): Promise<void> {
    const gen = ++this.generation;
    const { gateway, platform } = this.deps;
    if (!renew) this.state = 'connecting';
    let session: UpstreamSession | undefined;
    try {
      session = await (await sessions()).openSession(
        { config: this.config, gateway, platform, log: this.log, clientVersion: this.deps.clientVersion },
        {
          onListChanged: (kind) => this.onListChanged(gen, kind),
          onResourceUpdated: (uri) => {
            if (gen === this.generation && this.state === 'ready') this.onResourceUpdated(uri);
          },
          onClosed: () => this.onClosed(gen),
          onSuspect: () => this.probe(gen),
        },
        this.eraHint,
      );
      const listed = await listUpstream(session, gateway, this.log);
      const verified = await this.verify(driftListing(listed));
      if (gen !== this.generation) {
        await session.close();
        return;
      }
      const replaced = this.session;
      this.session = session;
      if (replaced) this.retire(replaced);
      this.eraHint = session.era;
      session.noteTools(listed.tools);
      this.listing = listed;
      this.verified = verified;
      this.state = 'ready';
      this.readyAt = platform.now();
      this.lastError = undefined;
      this.rule = undefined;
      this.log.info('upstream.ready', {
        tools: listed.tools.length,
        prompts: listed.prompts.length,
        resources: listed.resources.length,
        templates: listed.templates.length,
        era: session.era,
        protocolVersion: session.protocolVersion,
        ...(renew ? { renewed: true } : {}),
      });
      this.relistAfter(listed.ttlMs);
      for (const uri of this.watched) {
        session
          .subscribe(uri)
          .catch((e: unknown) => this.log.warn('upstream.subscribe_failed', { error: brief(e) }));
      }
      this.onChange();
    } catch (e) {
      if (session) await session.close().catch(() => {});
      if (gen !== this.generation) return;
      // The era may have changed under a cached verdict (a server upgraded): probe next time.
      this.eraHint = undefined;
      this.fail(e);
    } finally {
      this.notify();
    }
  }

  /**
   * A server's `ttlMs` on its listing is a hint for when the list may be stale (2026-07-28:
   * caching); the gateway lists again then, and drift verification runs on that listing as on
   * every other.
   */
  private relistAfter(ttlMs: number | undefined): void {
    if (this.ttlTimer) clearTimeout(this.ttlTimer);
    this.ttlTimer = undefined;
    if (ttlMs === undefined || this.state !== 'ready') return;
    const delay = Math.min(Math.max(ttlMs, MIN_TTL_RELIST_MS), 2_147_483_647);
    this.ttlTimer = setTimeout(() => {
      this.ttlTimer = undefined;
      void this.refresh();
    }, delay);
  }

  private fail(e: unknown): void {
    this.dropSession();
    this.listing = emptyListing();
    this.verified = undefined;
    this.lastError = publicReason(e);
    const detail = logReason(e);
    const rule = e instanceof ManifoldError ? (e.data?.rule as string | undefined) : undefined;
    if (rule === 'unsupported-transport') {
      this.state = 'unsupported';
      this.rule = rule;
      this.log.warn('upstream.unsupported', { rule, error: detail });
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
      error: detail,
      failures: this.consecutiveFailures,
      retryInMs: delay,
      state: this.state,
    });
    this.failedAt = this.deps.platform.now();
    this.reconnectIn(delay);
    this.onChange();
    this.notify();
  }

  private reconnectIn(delay: number): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryAt = this.deps.platform.now() + delay;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.state !== 'closed') void this.connect();
    }, delay);
  }

  /**
   * A resend waits on the reconnect: brings it forward from the normal backoff to the quick
   * schedule, counted from the last failure (so a server that stays down is not hammered).
   */
  private hurry(): void {
    if (!this.retryTimer || (this.state !== 'backoff' && this.state !== 'failed')) return;
    const at = this.failedAt + backoffDelay(this.consecutiveFailures, QUICK_RECONNECT);
    if (at >= this.retryAt) return;
    this.reconnectIn(Math.max(0, at - this.deps.platform.now()));
  }

  /** Wakes whatever waits for the next change (a resend waiting for a connection). */
  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.resolve();
  }

  /** Resolves at the next change, after `ms`, or when the request is cancelled, whichever is first. */
  private nextChange(ms: number, cancellation: Cancellation | undefined): Promise<void> {
    if (!this.wake) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      this.wake = { promise, resolve };
    }
    const changed = this.wake.promise;
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        off?.();
        resolve();
      };
      const timer = setTimeout(done, ms);
      const off = cancellation?.onAbort(done);
      void changed.then(done);
    });
  }

  private onClosed(gen: number): void {
    if (gen !== this.generation || this.state !== 'ready') return;
    // A connection that held for a while starts a fresh failure streak; a crash loop does not.
    if (this.deps.platform.now() - this.readyAt >= STABLE_MS) this.consecutiveFailures = 0;
    this.generation++;
    this.fail(new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', 'connection closed by the upstream'));
  }

  private onListChanged(gen: number, kind: 'tools' | 'prompts' | 'resources'): void {
    if (gen !== this.generation || this.state !== 'ready') return;
    this.log.info('upstream.list_changed', { list: kind });
    void this.refresh(kind === 'resources' ? ['resources', 'templates'] : [kind]);
  }

  /** Lists again (serialised: changes that arrive meanwhile cause one more pass). */
  refresh(kinds: readonly ListKind[] = ALL_KINDS): Promise<void> {
    for (const k of kinds) this.relistKinds.add(k);
    if (this.relisting) return this.relisting;
    this.relisting = (async () => {
      while (this.relistKinds.size > 0) {
        const pending = [...this.relistKinds];
        this.relistKinds.clear();
        const session = this.session;
        const gen = this.generation;
        // A session being replaced is not asked: the new one is listed in full anyway.
        if (!session || this.state !== 'ready' || this.renewing) return;
        try {
          const listed = await listUpstream(session, this.deps.gateway, this.log, this.listing, pending);
          const verified = await this.verify(driftListing(listed));
          if (gen !== this.generation) return;
          session.noteTools(listed.tools);
          this.listing = listed;
          this.verified = verified;
          if (pending.includes('tools')) this.relistAfter(listed.ttlMs);
          this.onChange();
        } catch (e) {
          // Keep the last complete listing: never load half of one.
          this.lastError = publicReason(e);
          this.log.warn('upstream.relist_failed', { error: logReason(e) });
        }
      }
    })().finally(() => {
      this.relisting = undefined;
    });
    return this.relisting;
  }

  /** Checks the current listing again (after a re-trust) without asking the upstream. */
  async reverify(): Promise<void> {
    if (this.state !== 'ready') return;
    const gen = this.generation;
    const verified = await this.verify(this.driftRecords());
    if (gen !== this.generation) return;
    this.verified = verified;
    this.onChange();
  }

  /**
   * Relays one tools/call. Resent (up to the server's `retry`) only where that is safe: a `read`
   * tool after the connection failed, or a session the server did not know (see `request`).
   */
  callTool(params: Record<string, unknown>, options: CallOptions = {}): Promise<Record<string, unknown>> {
    return this.request('tools/call', params, options);
  }

  /**
   * Relays one request to this server, with the call deadlines. A failure is resent, at most
   * `retry` times, only where running it again is safe (#14):
   *
   * - the server answered 404 to our legacy session: it no longer knows it and ran nothing
   *   (spec 2025-11-25: transports, session management). Any request; a new session is opened in
   *   place of the old one, without emptying the listing.
   * - the connection failed during a request marked `repeatable` (a `read` tool), once there is
   *   a working connection again: the old one if a ping finds it alive, else a new one.
   *
   * A resend waits for that connection at most the connect timeout, and never happens after the
   * client cancelled. Anything else whose outcome is unknown is said to be so.
   */
  async request(
    method: string,
    params: Record<string, unknown>,
    options: CallOptions = {},
  ): Promise<Record<string, unknown>> {
    this.inflight++;
    try {
      if (this.renewing) await this.renewing;
      let session = this.session;
      if (!session || this.state !== 'ready') {
        throw new ManifoldError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `server ${this.name} is not connected right now (${this.state}); the call was not sent`,
        );
      }
      const timeout = this.config.timeoutMs;
      const { cancellation, onprogress } = options;
      let resends = 0;
      // Progress must keep increasing (spec: utilities/progress): a resent request starts again
      // from zero, so what does not pass the last value relayed is dropped.
      let last = Number.NEGATIVE_INFINITY;
      const sent: SessionCallOptions = {
        ...options,
        ...(onprogress
          ? {
              onprogress: (p) => {
                if (resends > 0 && !(p.progress > last)) return;
                last = Math.max(last, p.progress);
                onprogress(p);
              },
            }
          : {}),
        timeoutMs: timeout,
        maxTotalMs: Math.max(timeout, this.deps.gateway.maxCallTimeoutMs),
      };
      // Whether an attempt may have reached the tool (one refused for its session did not).
      let mayHaveRun = false;
      for (;;) {
        const on = session;
        let e: unknown;
        this.hold(on);
        try {
          return await on.request(method, params, sent);
        } catch (failure) {
          e = failure;
        } finally {
          this.release(on);
        }
        const expired = sessionExpired(e);
        const cancelled = cancellation?.aborted === true;
        const mapped = mapCallError(e, this.name, timeout, cancelled, method);
        if (expired) void this.renew(on);
        else if (mapped.code === 'ERR_OUTCOME_UNKNOWN') this.probe(this.generation);
        if (!expired && (mapped.code !== 'ERR_OUTCOME_UNKNOWN' || options.repeatable !== true)) {
          if (mapped.code !== 'ERR_OUTCOME_UNKNOWN') throw mapped;
          throw notResentError(this.name, e, { mayHaveRun: true, why: { kind: 'not-read' } });
        }
        if (!expired) mayHaveRun = true;
        if (cancelled) throw mapped;
        const limit = this.config.retry;
        const reason = expired ? 'session-expired' : 'connection-lost';
        const giveUp = (why: NotResent) => {
          this.log.info('upstream.call_not_resent', { method, reason, why: why.kind, resends });
          return notResentError(this.name, e, { mayHaveRun, why });
        };
        if (resends >= limit) {
          throw giveUp(limit === 0 ? { kind: 'retry-zero' } : { kind: 'exhausted', resends });
        }
        const waitMs = this.deps.gateway.connectTimeoutMs;
        const fresh = await this.awaitFresh(on, expired, waitMs, cancellation);
        if (cancellation?.aborted) throw mapCallError(e, this.name, timeout, true, method);
        if (!fresh) throw giveUp({ kind: 'no-connection', waitedMs: waitMs });
        session = fresh;
        resends++;
        // The tool's name, never its arguments.
        this.log.info('upstream.call_resent', {
          method,
          ...(method === 'tools/call' && typeof params.name === 'string' ? { tool: params.name } : {}),
          reason,
          resend: resends,
          retry: limit,
        });
      }
    } finally {
      this.inflight--;
    }
  }

  /** Counts a request in flight on `session` (see `retire`). */
  private hold(session: UpstreamSession): void {
    this.busy.set(session, (this.busy.get(session) ?? 0) + 1);
  }

  private release(session: UpstreamSession): void {
    const left = (this.busy.get(session) ?? 1) - 1;
    if (left > 0) {
      this.busy.set(session, left);
      return;
    }
    this.busy.delete(session);
    if (this.retiring.delete(session)) void session.close().catch(() => {});
  }

  /** Closes a replaced session once nothing is in flight on it (a request on it ends by itself). */
  private retire(old: UpstreamSession): void {
    if (this.busy.has(old)) this.retiring.add(old);
    else void old.close().catch(() => {});
  }

  /**
   * Opens a new session in place of one the server no longer knows (it answered 404 to it),
   * keeping the listing meanwhile: the server is there, only its memory of us is gone. If that
   * fails, the server is unavailable after all, and the usual reconnect loop takes over.
   */
  private renew(expired: UpstreamSession): Promise<void> {
    if (this.renewing) return this.renewing;
    if (this.session !== expired || this.state !== 'ready') return Promise.resolve();
    this.log.info('upstream.session_expired');
    const renewing = this.connect(true).finally(() => {
      this.renewing = undefined;
      this.notify();
    });
    this.renewing = renewing;
    return renewing;
  }

  /**
   * Waits, at most `waitMs`, for a connection a request that failed on `failed` may be resent
   * on: `failed` itself if a ping found it alive (never when the server did not know it), or a
   * new one. The reconnect is brought forward meanwhile (`hurry`). Undefined when there is none
   * in time, the upstream was closed, or the request was cancelled.
   */
  private async awaitFresh(
    failed: UpstreamSession,
    expired: boolean,
    waitMs: number,
    cancellation: Cancellation | undefined,
  ): Promise<UpstreamSession | undefined> {
    const { platform } = this.deps;
    const until = platform.now() + waitMs;
    for (;;) {
      const left = until - platform.now();
      if (cancellation?.aborted || left <= 0) return undefined;
      if (this.state === 'closed' || this.state === 'disabled' || this.state === 'unsupported')
        return undefined;
      const pending = this.renewing ?? this.probing;
      if (!pending && this.state === 'ready' && this.session) {
        if (!expired || this.session !== failed) return this.session;
        void this.renew(failed);
        if (!this.renewing) return undefined;
        continue;
      }
      if (!pending) this.hurry();
      await this.nextChange(left, cancellation);
    }
  }

  /**
   * Checks a connection that may be dead with one ping. HTTP transports do not close when their
   * server goes away (and a restarted server no longer knows our session), so a failed ping is
   * what turns that into a reconnect, and the reconnect into a list_changed on recovery (F4).
   */
  private probe(gen: number): void {
    const session = this.session;
    if (this.probing || this.renewing || !session || gen !== this.generation || this.state !== 'ready') {
      return;
    }
    this.probing = session
      .ping(Math.min(this.deps.gateway.connectTimeoutMs, 10_000))
      .then(
        () => undefined,
        (e: unknown) => {
          if (gen !== this.generation || this.state !== 'ready') return;
          // A restarted server that forgot our session: a new one, without emptying the listing.
          if (this.forgotSession(session, e)) {
            void this.renew(session);
            return;
          }
          this.generation++;
          this.fail(new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', `connection lost: ${brief(e)}`));
        },
      )
      .finally(() => {
        this.probing = undefined;
        this.notify();
      });
  }

  /**
   * Whether a failure on `session` says the server no longer knows it: our own wire's verdict,
   * or (the SDK's own requests, such as the ping) a 404 to a legacy streamable-HTTP session, which
   * always carries its Mcp-Session-Id. A modern server has no session to forget.
   */
  private forgotSession(session: UpstreamSession, e: unknown): boolean {
    if (sessionExpired(e)) return true;
    return session.era === 'legacy' && this.config.type === 'streamable-http' && httpStatusOf(e) === 404;
  }

  async close(): Promise<void> {
    this.state = 'closed';
    this.generation++;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.notify();
    const retiring = [...this.retiring];
    this.retiring.clear();
    await Promise.all([this.dropSession(), ...retiring.map((s) => s.close().catch(() => {}))]);
  }

  private dropSession(): Promise<void> {
    if (this.ttlTimer) clearTimeout(this.ttlTimer);
    this.ttlTimer = undefined;
    const session = this.session;
    this.session = undefined;
    return session ? session.close().catch(() => {}) : Promise.resolve();
  }
}
