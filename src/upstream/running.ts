/**
 * Servers on demand (#53): which upstreams run now, which stop. A server idle for its
 * `idleStopSeconds` (nothing in flight, no open subscription) stops; `gateway.maxRunningServers`
 * bounds how many run at once, shared and isolated instances alike: a start past the bound stops
 * the least recently used idle one first, and when none is idle it waits briefly for one, then
 * fails with a clear error. A stopped server keeps its verified catalog published, and starts
 * again on the next request that needs it (upstream.ts `wake`).
 */
import type { GatewayConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import { unrefTimer } from '../platform.js';

/** What this module needs of an upstream (upstream.ts implements it). */
export interface RunningServer {
  readonly name: string;
  /** Whether its process or session is up, or coming up. */
  readonly running: boolean;
  /** Nothing in flight and no open subscription: it may be stopped. */
  readonly idle: boolean;
  /** When a request last began or ended (platform clock). */
  readonly lastUsed: number;
  readonly idleStopSeconds: number;
  /** Stops it if it is still idle; its catalog stays published. */
  stop(reason: 'idle' | 'make-room'): Promise<void>;
}

/** How long a start waits for a running server to become idle when the bound is reached. */
export const ROOM_WAIT_MS = 5_000;
/** How often idle servers are looked for. */
const SWEEP_MS = 1_000;

export class RunningServers {
  private readonly servers = new Set<RunningServer>();
  private sweeper: ReturnType<typeof setInterval> | undefined;
  /** Starts waiting for room: woken whenever a server becomes idle or stops. */
  private waiters = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly gateway: () => GatewayConfig,
    private readonly now: () => number,
  ) {}

  add(server: RunningServer): void {
    if (this.closed) return;
    this.servers.add(server);
    if (server.idleStopSeconds > 0 || this.gateway().maxRunningServers > 0) this.startSweeper();
  }

  delete(server: RunningServer): void {
    this.servers.delete(server);
    this.released();
  }

  /** Running now, for /healthz, metrics and tests. */
  count(): number {
    let n = 0;
    for (const s of this.servers) if (s.running) n++;
    return n;
  }

  /** A server became idle or stopped: a start waiting for room may proceed. */
  released(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const w of waiters) w();
  }

  /**
   * Starts `starting` (with `start`, which must make it `running` at once) once there is room under
   * `gateway.maxRunningServers`: stops the least recently used idle server when the bound is
   * reached, or waits for one to become idle, at most ROOM_WAIT_MS (or the connect timeout, when
   * shorter); then refuses. The count and the start happen in one turn, so two starts never both
   * take the last slot.
   */
  async admit(starting: RunningServer, start: () => Promise<void>): Promise<void> {
    const max = this.gateway().maxRunningServers;
    if (max <= 0) return start();
    const until = this.now() + Math.min(ROOM_WAIT_MS, this.gateway().connectTimeoutMs);
    for (;;) {
      const running = [...this.servers].filter((s) => s !== starting && s.running);
      if (running.length < max) return start();
      const lru = running.filter((s) => s.idle).sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (lru) {
        await lru.stop('make-room');
        continue;
      }
      const left = until - this.now();
      if (left <= 0 || this.closed) {
        throw new ManifoldError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `server ${starting.name} cannot start: gateway.maxRunningServers (${max}) servers are running and every one is busy; try again shortly, or raise gateway.maxRunningServers`,
          { data: { rule: 'max-running-servers' } },
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        unrefTimer(timer);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.waiters.add(done);
      });
    }
  }

  private startSweeper(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_MS);
    unrefTimer(this.sweeper);
  }

  /** Stops each server idle past its idleStopSeconds, then the least recently used idle ones past the bound. */
  async sweep(now = this.now()): Promise<void> {
    const stops: Promise<void>[] = [];
    for (const s of this.servers) {
      if (s.running && s.idle && s.idleStopSeconds > 0 && now - s.lastUsed >= s.idleStopSeconds * 1000) {
        stops.push(s.stop('idle'));
      }
    }
    await Promise.allSettled(stops);
    const max = this.gateway().maxRunningServers;
    if (max <= 0) return;
    const running = [...this.servers].filter((s) => s.running);
    const over = running.length - max;
    if (over <= 0) return;
    const idle = running.filter((s) => s.idle).sort((a, b) => a.lastUsed - b.lastUsed);
    await Promise.allSettled(idle.slice(0, over).map((s) => s.stop('make-room')));
  }

  close(): void {
    this.closed = true;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
    this.servers.clear();
    this.released();
  }
}
