import type { ServerConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import type { Cancellation } from '../lib/cancellation.js';
import type { Logger } from '../lib/log.js';
import {
  brief,
  httpStatusOf,
  mapCallError,
  type NotResent,
  notResentError,
  sessionExpired,
} from './call-errors.js';
import type { SessionCallOptions, UpstreamSession } from './session.js';
import type { CallOptions, UpstreamDeps, UpstreamState } from './types.js';

/** What recovery reads of its upstream, and the few things it asks of it. */
export interface RecoveryHost {
  readonly name: string;
  readonly config: ServerConfig;
  readonly deps: UpstreamDeps;
  readonly log: Logger;
  readonly state: UpstreamState;
  readonly session: UpstreamSession | undefined;
  readonly generation: number;
  /** Opens a new session in place of the current one; the listing stays meanwhile. */
  renewSession(): Promise<void>;
  /** The connection is gone: a new generation, then the usual failure path (reconnects). */
  lose(error: unknown): void;
  /** Brings a pending reconnect forward to the quick schedule. */
  hurry(): void;
}

/**
 * One upstream's requests and what happens when one fails: the resend loop (#14), the renewal of
 * a session the server forgot, the ping of a connection that may be dead, and the accounting that
 * closes a replaced session only once nothing is in flight on it. Split from `Upstream`, which
 * owns the connection and the listing and tells this class when anything changes (`notify`).
 */
export class Recovery {
  /** Requests relayed and not yet answered (an isolated instance is not closed while busy). */
  inflight = 0;
  /** The ping of a connection that may be dead, while it runs. */
  private probing: Promise<void> | undefined;
  /** A new session replacing one the server no longer knew, while it opens (the listing stays). */
  private renewal: Promise<void> | undefined;
  /** Requests in flight per session, so a replaced session is closed only once they are done. */
  private readonly busy = new Map<UpstreamSession, number>();
  /** Replaced sessions to close when their last request ends. */
  private readonly retiring = new Set<UpstreamSession>();
  /** Resolved at the next change of state, probe or renewal (what a waiting resend watches). */
  private wake: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(private readonly up: RecoveryHost) {}

  /** Whether a session is being replaced (nothing should be asked of the old one). */
  get renewing(): boolean {
    return this.renewal !== undefined;
  }

  /**
   * Relays one request, with the call deadlines. A failure is resent, at most `retry` times, only
   * where running it again is safe (#14):
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
    const up = this.up;
    this.inflight++;
    // `--log-level debug`: one summary line per upstream request (#16), never its arguments.
    const started = up.log.debugEnabled ? up.deps.platform.now() : -1;
    let resends = 0;
    try {
      if (this.renewal) await this.renewal;
      let session = up.session;
      if (!session || up.state !== 'ready') {
        throw new ManifoldError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `server ${up.name} is not connected right now (${up.state}); the call was not sent`,
        );
      }
      const timeout = up.config.timeoutMs;
      const { cancellation, onprogress } = options;
      // Keys before the spread: a kept optimisation for Node 20 (docs/architecture.md).
      const sent: SessionCallOptions = {
        timeoutMs: timeout,
        maxTotalMs: Math.max(timeout, up.deps.gateway.maxCallTimeoutMs),
        ...options,
      };
      if (onprogress) {
        // Progress must keep increasing (spec: utilities/progress): a resent request starts again
        // from zero, so what does not pass the last value relayed is dropped.
        let last = Number.NEGATIVE_INFINITY;
        sent.onprogress = (p) => {
          if (resends > 0 && !(p.progress > last)) return;
          last = Math.max(last, p.progress);
          onprogress(p);
        };
      }
      // Whether an attempt may have reached the tool (one refused for its session did not).
      let mayHaveRun = false;
      for (;;) {
        const on = session;
        let e: unknown;
        this.hold(on);
        try {
          const result = await on.request(method, params, sent);
          if (started >= 0) this.summary(method, params, started, 'ok', resends, result);
          return result;
        } catch (failure) {
          e = failure;
        } finally {
          this.release(on);
        }
        const expired = sessionExpired(e);
        const cancelled = cancellation?.aborted === true;
        const mapped = mapCallError(e, up.name, timeout, cancelled, method);
        if (expired) void this.renew(on);
        else if (mapped.code === 'ERR_OUTCOME_UNKNOWN') this.probe(up.generation);
        if (!expired && (mapped.code !== 'ERR_OUTCOME_UNKNOWN' || options.repeatable !== true)) {
          if (mapped.code !== 'ERR_OUTCOME_UNKNOWN') throw mapped;
          throw notResentError(up.name, e, { mayHaveRun: true, why: { kind: 'not-read' } });
        }
        if (!expired) mayHaveRun = true;
        if (cancelled) throw mapped;
        const limit = up.config.retry;
        const reason = expired ? 'session-expired' : 'connection-lost';
        const giveUp = (why: NotResent) => {
          up.log.info('upstream.call_not_resent', { method, reason, why: why.kind, resends });
          return notResentError(up.name, e, { mayHaveRun, why });
        };
        if (resends >= limit) {
          throw giveUp(limit === 0 ? { kind: 'retry-zero' } : { kind: 'exhausted', resends });
        }
        const waitMs = up.deps.gateway.connectTimeoutMs;
        const fresh = await this.awaitFresh(on, expired, waitMs, cancellation);
        if (cancellation?.aborted) throw mapCallError(e, up.name, timeout, true, method);
        if (!fresh) throw giveUp({ kind: 'no-connection', waitedMs: waitMs });
        session = fresh;
        resends++;
        // The tool's name, never its arguments.
        up.log.info('upstream.call_resent', {
          method,
          ...(method === 'tools/call' && typeof params.name === 'string' ? { tool: params.name } : {}),
          reason,
          resend: resends,
          retry: limit,
        });
      }
    } catch (e) {
      if (started >= 0)
        this.summary(method, params, started, e instanceof ManifoldError ? e.code : 'error', resends);
      throw e;
    } finally {
      this.inflight--;
    }
  }

  /** The debug line of one upstream request: what was asked, how it ended, how long it took. */
  private summary(
    method: string,
    params: Record<string, unknown>,
    started: number,
    outcome: string,
    resends: number,
    result?: Record<string, unknown>,
  ): void {
    const up = this.up;
    const name = method === 'tools/call' || method === 'prompts/get' ? params.name : params.uri;
    up.log.debug('upstream.traffic', {
      method,
      ...(typeof name === 'string' ? { target: name.slice(0, 256) } : {}),
      outcome: outcome === 'ok' && result?.isError === true ? 'isError' : outcome,
      durationMs: up.deps.platform.now() - started,
      ...(resends > 0 ? { resends } : {}),
    });
  }

  /** Closes a replaced session once nothing is in flight on it (a request on it ends by itself). */
  retire(old: UpstreamSession): void {
    if (this.busy.has(old)) this.retiring.add(old);
    else void old.close().catch(() => {});
  }

  /** Closes every replaced session now (the upstream is closing). */
  closeRetiring(): Promise<void> {
    const retiring = [...this.retiring];
    this.retiring.clear();
    return Promise.all(retiring.map((s) => s.close().catch(() => {}))).then(() => undefined);
  }

  /**
   * Checks a connection that may be dead with one ping. HTTP transports do not close when their
   * server goes away (and a restarted server no longer knows our session), so a failed ping is
   * what turns that into a reconnect, and the reconnect into a list_changed on recovery (F4).
   */
  probe(gen: number): void {
    const up = this.up;
    const session = up.session;
    if (this.probing || this.renewal || !session || gen !== up.generation || up.state !== 'ready') {
      return;
    }
    this.probing = session
      .ping(Math.min(up.deps.gateway.connectTimeoutMs, 10_000))
      .then(
        () => undefined,
        (e: unknown) => {
          if (gen !== up.generation || up.state !== 'ready') return;
          // A restarted server that forgot our session: a new one, without emptying the listing.
          if (this.forgotSession(session, e)) {
            void this.renew(session);
            return;
          }
          up.lose(new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', `connection lost: ${brief(e)}`));
        },
      )
      .finally(() => {
        this.probing = undefined;
        this.notify();
      });
  }

  /** Wakes whatever waits for the next change (a resend waiting for a connection). */
  notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.resolve();
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

  /**
   * Opens a new session in place of one the server no longer knows (it answered 404 to it),
   * keeping the listing meanwhile: the server is there, only its memory of us is gone. If that
   * fails, the server is unavailable after all, and the usual reconnect loop takes over.
   */
  private renew(expired: UpstreamSession): Promise<void> {
    if (this.renewal) return this.renewal;
    const up = this.up;
    if (up.session !== expired || up.state !== 'ready') return Promise.resolve();
    up.log.info('upstream.session_expired');
    const renewal = up.renewSession().finally(() => {
      this.renewal = undefined;
      this.notify();
    });
    this.renewal = renewal;
    return renewal;
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
    const up = this.up;
    const { platform } = up.deps;
    const until = platform.now() + waitMs;
    for (;;) {
      const left = until - platform.now();
      if (cancellation?.aborted || left <= 0) return undefined;
      if (up.state === 'closed' || up.state === 'disabled' || up.state === 'unsupported') return undefined;
      const pending = this.renewal ?? this.probing;
      if (!pending && up.state === 'ready' && up.session) {
        if (!expired || up.session !== failed) return up.session;
        void this.renew(failed);
        if (!this.renewal) return undefined;
        continue;
      }
      if (!pending) up.hurry();
      await this.nextChange(left, cancellation);
    }
  }

  /**
   * Whether a failure on `session` says the server no longer knows it: our own wire's verdict,
   * or (the SDK's own requests, such as the ping) a 404 to a legacy streamable-HTTP session, which
   * always carries its Mcp-Session-Id. A modern server has no session to forget.
   */
  private forgotSession(session: UpstreamSession, e: unknown): boolean {
    if (sessionExpired(e)) return true;
    return session.era === 'legacy' && this.up.config.type === 'streamable-http' && httpStatusOf(e) === 404;
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
}
