import type { Resource, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import { driftListing } from '../guards/drift/kinds.js';
import type { VerifiedListing } from '../guards/drift/verdict.js';
import { isObject } from '../lib/json.js';
import type { Logger } from '../lib/log.js';
import { type Era, TASKS_EXTENSION } from '../protocol/versions.js';
import { authAware, withUpstreamAuth } from './auth-deps.js';
import { backoffDelay, defaultBackoff, ReconnectTimer } from './backoff.js';
import { brief, logReason, publicReason } from './call-errors.js';
import { reachedOverSse } from './legacy/transports.js';
import { ALL_KINDS, emptyListing, type Listing, listUpstream } from './listing.js';
import type { SubjectKey } from './oauth/types.js';
import { Recovery } from './recovery.js';
import type { RunningServer } from './running.js';
import { type ListKind, NotServing, type UpstreamSession } from './session.js';
import type { CallOptions, UpstreamDeps, UpstreamState, UpstreamStatus } from './types.js';
import { FAILED_AFTER, MIN_TTL_RELIST_MS, STABLE_MS, trustEverything } from './types.js';

/** One connection attempt of an upstream (see `Upstream.attempts`). */
interface Attempt {
  readonly abort: AbortController;
  /** Its session, once opened: listed and verified before it is published. */
  session?: UpstreamSession;
  readonly settled: Promise<void>;
}

/**
 * One configured upstream server: its session (in whichever era it speaks), its last complete
 * tool listing, and the reconnect loop. It never throws into its siblings: every failure becomes
 * state + lastError.
 */
export class Upstream implements RunningServer {
  config: ServerConfig; // replaced by a reload that changed only the gateway's view of it (reload-plan.ts)
  state: UpstreamState = 'connecting';
  /** The last complete listing of every kind (tools, prompts, resources, templates). */
  listing: Listing = emptyListing();
  lastError?: string;
  rule?: string;
  consecutiveFailures = 0;
  /** Connection attempts after the first: retries after a failure or a lost connection, renewals. */
  reconnects = 0;
  private attempted = false;
  /** Called whenever what this upstream contributes may have changed. */
  onChange: () => void = () => {};
  /** `notifications/resources/updated` from this upstream (original URI). */
  onResourceUpdated: (uri: string) => void = () => {};
  /**
   * Checks a complete listing (tools, prompts and templates as tool-shaped records, guards/drift/kinds.ts)
   * before it is published, so no client ever sees an unverified catalog (C4). Default: trust all.
   */
  verify: (tools: Tool[]) => Promise<VerifiedListing> = trustEverything;
  verified: VerifiedListing | undefined;
  /** While not ready: what it last published, verified, as the opener reported it (a warm start). */
  stored: VerifiedListing | undefined;

  private session: UpstreamSession | undefined;
  /**
   * Connection attempts under way: each one's abort, its session once opened (still listing), and
   * when it has settled. `close` ends them too, or a stdio child being listed would outlive the
   * gateway until its listing deadline (SECURITY F6, J2).
   */
  private readonly attempts = new Set<Attempt>();
  /** The era of the last good connection: the next one skips the probe (basic/versioning). */
  private eraHint: Era | undefined;
  private ttlTimer: ReturnType<typeof setTimeout> | undefined;
  private generation = 0;
  private readyAt = 0;
  /** The reconnect after a failure (and the quicker one a waiting resend asks for). */
  private readonly retry: ReconnectTimer;
  private relisting: Promise<void> | undefined;
  /** Kinds to list again once the current relisting ends. */
  private relistKinds = new Set<ListKind>();
  private readonly log: Logger;
  /** Requests, resends, session renewal and probes (recovery.ts). */
  private readonly recovery: Recovery;

  private readonly deps: UpstreamDeps;
  /** When a request last began or ended (#53: idle stop, least recently used first). */
  lastUsed = 0;
  /** A start on demand under way (`wake`). */
  private waking: Promise<void> | undefined;

  /** `subject`: whose upstream credentials it uses (#19); '' is the deployment's identity. */
  constructor(
    config: ServerConfig,
    deps: UpstreamDeps,
    readonly subject: SubjectKey = '',
  ) {
    this.config = config;
    this.deps = deps = withUpstreamAuth(deps, config, subject);
    this.log = deps.log.child({ server: config.name });
    if (config.disabled) this.state = 'disabled';
    this.retry = new ReconnectTimer(
      () => deps.platform.now(),
      () => {
        if (this.state !== 'closed') void this.connect();
      },
    );
    const self = this;
    this.recovery = new Recovery({
      name: config.name,
      get config() {
        return self.config;
      },
      deps,
      log: this.log,
      get state() {
        return self.state;
      },
      get session() {
        return self.session;
      },
      get generation() {
        return self.generation;
      },
      renewSession: () => this.connect(true),
      lose: (e) => {
        this.generation++;
        this.fail(e);
      },
      hurry: () => this.hurry(),
    });
    this.lastUsed = deps.platform.now();
    if (!config.disabled) deps.running?.add(this);
  }

  get name(): string {
    return this.config.name;
  }
  get tools(): Tool[] {
    return this.listing.tools;
  }
  get resources(): Resource[] {
    return this.listing.resources;
  }

  /**
   * The resource URIs someone downstream watches (`resources/subscribe`, or the modern listen
   * filter). They outlive a connection: every new session is asked for all of them.
   */
  readonly watched = new Set<string>();

  async subscribe(uri: string): Promise<void> {
    this.watched.add(uri);
    // An open subscription keeps a server running (#53): a stopped one starts to send its updates.
    if (this.state === 'idle') await this.wake();
    if (this.state === 'ready') await this.session?.subscribe(uri);
  }

  async unsubscribe(uri: string): Promise<void> {
    if (!this.watched.delete(uri)) return;
    if (this.state === 'ready') await this.session?.unsubscribe(uri).catch(() => {});
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
  /** Whether it runs tools/call as tasks (2025: capabilities.tasks; 2026: the tasks extension). */
  get runsTasks(): boolean {
    const caps = this.capabilities;
    if (this.era === 'modern') return isObject(caps.extensions) && isObject(caps.extensions[TASKS_EXTENSION]);
    const tasks = caps.tasks as { requests?: { tools?: { call?: unknown } } } | undefined;
    return isObject(tasks?.requests?.tools?.call);
  }

  /** Settles when the first connection attempt has settled, either way. */
  firstAttempt: Promise<void> = Promise.resolve();
  /** Requests relayed and not yet answered (an isolated instance is not closed while busy). */
  get inflight(): number {
    return this.recovery.inflight;
  }

  start(): Promise<void> {
    // Closed before its first attempt (the gateway stopped while it was still starting): it
    // stays closed, or its retries would keep the process alive.
    if (this.state === 'disabled' || this.state === 'closed') return Promise.resolve();
    this.firstAttempt = this.connect();
    return this.firstAttempt;
  }

  /**
   * A `lazy` server whose verified catalog is known (#53): not started; it stays `idle`, listed from
   * that catalog, until a request needs it (`wake`).
   */
  park(): void {
    if (this.state !== 'connecting' || this.attempted) return;
    this.state = 'idle';
  }

  /** Whether its process or session is up, or coming up (counted by `gateway.maxRunningServers`). */
  get running(): boolean {
    return this.state === 'ready' || (this.state === 'connecting' && this.attempted);
  }

  /** Nothing in flight, no open subscription, no start under way: it may be stopped. */
  get idle(): boolean {
    return this.inflight === 0 && this.watched.size === 0 && this.waking === undefined;
  }

  get idleStopSeconds(): number {
    return this.config.idleStopSeconds ?? 0;
  }

  /**
   * Starts an `idle` server for a request that needs it, within `gateway.maxRunningServers`; drift
   * is checked as on any connection (the listing is verified before it is published). Resolves
   * when the attempt has settled, either way: the caller reads `state`.
   */
  wake(): Promise<void> {
    if (this.state !== 'idle') return this.state === 'connecting' ? this.firstAttempt : Promise.resolve();
    if (this.waking) return this.waking;
    const started = this.deps.platform.now();
    const admit = (start: () => Promise<void>) => this.deps.running?.admit(this, start) ?? start();
    this.waking = admit(() => {
      this.lastUsed = this.deps.platform.now();
      this.firstAttempt = this.connect();
      return this.firstAttempt;
    })
      .then(() => {
        if (this.state === 'ready')
          this.log.info('upstream.started_on_demand', { ms: this.deps.platform.now() - started });
      })
      .finally(() => {
        this.waking = undefined;
        this.deps.running?.released();
      });
    return this.waking;
  }

  /**
   * Stops a running server nothing uses (#53): idle past its `idleStopSeconds`, or making room
   * under `gateway.maxRunningServers`. Its last verified listing stays published, so clients see
   * no change; the next request that needs it starts it again.
   */
  async stop(reason: 'idle' | 'make-room' | 'listed'): Promise<void> {
    if (this.state !== 'ready' || !this.idle) return;
    this.stored = this.verified;
    this.state = 'idle';
    this.generation++;
    this.retry.cancel();
    this.log.info('upstream.stopped', { reason });
    await this.dropSession();
    this.deps.running?.released();
    this.onChange();
  }

  /** What /healthz and `manifold check` show of this upstream. */
  status(): UpstreamStatus {
    const v = this.verified;
    const held = v && (v.quarantined.length > 0 || v.withheld.length > 0 || v.identityChanged);
    return {
      name: this.name,
      transport: reachedOverSse(this.config) ? 'sse' : this.config.type,
      state: this.state,
      tools: this.state === 'ready' ? this.tools.length : 0,
      consecutiveFailures: this.consecutiveFailures,
      reconnects: this.reconnects,
      ...(this.lastError ? { lastError: this.lastError } : {}),
      ...(this.rule ? { rule: this.rule } : {}),
      ...(this.session ? { era: this.session.era, protocolVersion: this.session.protocolVersion } : {}),
      // What drift holds back (names only).
      ...(held
        ? {
            drift: {
              quarantined: v.quarantined.map((t) => t.name),
              withheld: v.withheld,
              ...(v.identityChanged ? { identityChanged: true } : {}),
            },
          }
        : {}),
    };
  }
  /**
   * Opens a session, lists and verifies, and publishes. `renew`: in place of a session the server
   * no longer knows; the upstream stays `ready` with its listing meanwhile, so a client sees no
   * change unless the listing really changed.
   */
  private async connect(renew = false): Promise<void> {
    if (this.state === 'closed') return;
    const gen = ++this.generation;
    const { gateway, platform } = this.deps;
    if (this.attempted) this.reconnects++;
    this.attempted = true;
    if (!renew) this.state = 'connecting';
    let session: UpstreamSession | undefined;
    let settled!: () => void;
    const attempt: Attempt = {
      abort: new AbortController(),
      settled: new Promise<void>((resolve) => {
        settled = resolve;
      }),
    };
    this.attempts.add(attempt);
    const { signal } = attempt.abort;
    try {
      const open = this.deps.openSession ?? (await sessions()).openSession;
      signal.throwIfAborted();
      session = await open(
        {
          config: this.config,
          gateway,
          platform,
          log: this.log,
          clientVersion: this.deps.clientVersion,
          signal,
        },
        {
          onListChanged: (kind) => this.onListChanged(gen, kind),
          onResourceUpdated: (uri) => {
            if (gen === this.generation && this.state === 'ready') this.onResourceUpdated(uri);
          },
          onClosed: () => this.onClosed(gen),
          onSuspect: () => this.recovery.probe(gen),
        },
        this.eraHint,
      );
      attempt.session = session;
      // Closed while it opened (an opener that finished anyway): it goes now, with its child.
      signal.throwIfAborted();
      // Published elsewhere (a Worker isolate, #15): listed and verified by the upstream's object.
      const listed = session.published?.listing ?? (await listUpstream(session, gateway, this.log));
      const verified = session.published?.verified ?? (await this.verify(driftListing(listed)));
      if (gen !== this.generation) {
        await session.close();
        return;
      }
      const replaced = this.session;
      this.session = session;
      if (replaced) this.recovery.retire(replaced);
      this.eraHint = session.era;
      session.noteTools(listed.tools);
      this.listing = listed;
      this.verified = verified;
      this.stored = undefined;
      this.state = 'ready';
      this.readyAt = platform.now();
      this.lastError = undefined;
      this.rule = undefined;
      if (!renew || !session.published)
        // a snapshot reread every few seconds (#15) is not news
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
      this.fail(authAware(e, this.deps, this.config, this.subject));
    } finally {
      this.attempts.delete(attempt);
      settled();
      this.recovery.notify();
    }
  }

  /** A listing's `ttlMs` hints when it may be stale (2026-07-28: caching): listed (and verified) again then. */
  private relistAfter(ttlMs: number | undefined): void {
    if (this.ttlTimer) clearTimeout(this.ttlTimer);
    this.ttlTimer = undefined;
    if (ttlMs === undefined || this.state !== 'ready' || this.deps.openSession) return;
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
    // A stopped server that fails to start again (#53) keeps its last verified catalog listed, as a
    // warm start does until its upstream answers: one failed start does not make its tools vanish.
    this.stored = e instanceof NotServing ? e.stored : this.stored;
    const detail = logReason(e);
    const rule = e instanceof ManifoldError ? (e.data?.rule as string | undefined) : undefined;
    // Neither heals by retrying: the runtime has no stdio, or cannot build the sandbox asked for (#53).
    if (rule === 'unsupported-transport' || rule === 'sandbox-unavailable') {
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
    // Pulled (session.ts SessionOpener): the runtime reopens on a later request.
    if (!this.deps.openSession) this.retry.afterFailure(delay);
    this.onChange();
    this.recovery.notify();
  }

  /** A resend waits on the reconnect of a server that is down: bring it forward. */
  private hurry(): void {
    if (this.state === 'backoff' || this.state === 'failed') this.retry.hurry(this.consecutiveFailures);
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
    if (this.deps.openSession) return this.reopen();
    for (const k of kinds) this.relistKinds.add(k);
    if (this.relisting) return this.relisting;
    this.relisting = (async () => {
      while (this.relistKinds.size > 0) {
        const pending = [...this.relistKinds];
        this.relistKinds.clear();
        const session = this.session;
        const gen = this.generation;
        // A session being replaced is not asked: the new one is listed in full anyway.
        if (!session || this.state !== 'ready' || this.recovery.renewing) return;
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
    if (this.deps.openSession) return this.reopen();
    // An idle server (#53) keeps its last listing: checked again too, without starting it.
    if (this.state !== 'ready' && !(this.state === 'idle' && this.stored)) return;
    const gen = this.generation;
    const verified = await this.verify(this.driftRecords());
    if (gen !== this.generation) return;
    if (this.state === 'idle') this.stored = verified;
    else this.verified = verified;
    this.onChange();
  }

  /** Opens again through the runtime's opener (a fresher snapshot), keeping the listing meanwhile. */
  reopen(): Promise<void> {
    if (this.state !== 'ready') this.retry.cancel(); // this attempt replaces a pending retry
    const attempt = this.connect(this.state === 'ready');
    // Not serving meanwhile (a login just completed, #19): callers wait for this attempt.
    if (this.state === 'connecting') this.firstAttempt = attempt;
    return attempt;
  }

  /** Relays one request to this server, with the call deadlines and safe resends (recovery.ts). */
  request(
    method: string,
    params: Record<string, unknown>,
    options: CallOptions = {},
  ): Promise<Record<string, unknown>> {
    // Stopped while unused (#53): started for this request, which waits for it.
    if (this.state === 'idle' || this.waking) {
      return this.wake().then(() => this.request(method, params, options));
    }
    this.lastUsed = this.deps.platform.now();
    const sent = this.recovery.request(method, params, options).finally(() => {
      this.lastUsed = this.deps.platform.now();
      if (this.inflight === 0) this.deps.running?.released();
    });
    if (!this.deps.auths?.has(this.name)) return sent;
    return sent.catch((e) => {
      throw authAware(e, this.deps, this.config, this.subject);
    });
  }

  async close(): Promise<void> {
    this.deps.running?.delete(this);
    this.state = 'closed';
    this.generation++;
    this.retry.cancel();
    this.recovery.notify();
    // An attempt still opening or listing is abandoned: its opener closes what it started, its
    // session (if open) is closed here, and this waits until each has settled, its child gone.
    const attempts = [...this.attempts];
    const closing = new ManifoldError('ERR_SHUTTING_DOWN', `server ${this.name} is closing`);
    for (const a of attempts) a.abort.abort(closing);
    await Promise.all([
      this.dropSession(),
      this.recovery.closeRetiring(),
      ...attempts.map((a) => a.session?.close().catch(() => {})),
      ...attempts.map((a) => a.settled),
    ]);
  }

  private dropSession(): Promise<void> {
    if (this.ttlTimer) clearTimeout(this.ttlTimer);
    this.ttlTimer = undefined;
    const session = this.session;
    this.session = undefined;
    return session ? session.close().catch(() => {}) : Promise.resolve();
  }
}

/**
 * The session layer (the SDK client, its transports, the HTTP wires) is loaded on the first
 * connection, not with the gateway: the listener opens before any of it is needed (start time).
 */
let sessionLayer: Promise<typeof import('./probe.js')> | undefined;

export const sessions = (): Promise<typeof import('./probe.js')> => {
  sessionLayer ??= import('./probe.js');
  return sessionLayer;
};
