/**
 * The instances of one deployment on Postgres (#15), and how one reaches another: each process
 * registers `{id, url, seen_at}` in `manifold_instances` and heartbeats; a modern client's retry
 * of a call held on another instance (src/server/mcp/forward.ts) is sent to that instance's URL, and
 * its answer streamed back as it comes.
 *
 * The URL comes from the operator's own database and config (gateway.advertiseUrl), not from a
 * client or an upstream, so it is not checked against the upstream egress allowlist (which would
 * refuse the private addresses instances usually have); redirects are never followed.
 */
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type pg from 'pg';
import type { Agent } from 'undici';
import { describeError } from '../../../../src/errors.js';
import type { Logger } from '../../../../src/lib/log.js';
import type { Forwarder, ForwardRequest } from '../../../../src/server/mcp/forward.js';

/** How often an instance says it is alive, and when the others stop believing it. */
export const HEARTBEAT_MS = 5_000;
export const STALE_MS = 20_000;
/** Rows of instances gone this long are swept by whichever instance registers next. */
const FORGET_MS = 24 * 3600_000;

const UPSERT = `INSERT INTO manifold_instances (id, url, seen_at) VALUES ($1, $2, $3)
  ON CONFLICT (id) DO UPDATE SET url = excluded.url, seen_at = excluded.seen_at`;
const LOOKUP = 'SELECT url FROM manifold_instances WHERE id = $1 AND seen_at >= $2';

export class PostgresInstances implements Forwarder {
  readonly id = randomUUID();
  private url: string | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private agent: Promise<Agent> | undefined;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log?: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Announces this instance at `url` (an origin) and keeps its row fresh until `close`. A failed
   * first write rejects, but the heartbeat is already running and writes the row when it can.
   */
  async register(url: string): Promise<void> {
    this.url = url;
    this.timer = setInterval(() => {
      this.beat().catch((e) =>
        this.log?.warn('instances.heartbeat_failed', { error: describeError(e).slice(0, 300) }),
      );
    }, HEARTBEAT_MS);
    this.timer.unref();
    await this.pool.query('DELETE FROM manifold_instances WHERE seen_at < $1', [this.now() - FORGET_MS]);
    await this.beat();
  }

  private async beat(): Promise<void> {
    if (this.url !== undefined && !this.closed)
      await this.pool.query(UPSERT, [this.id, this.url, this.now()]);
  }

  async send(to: string, request: ForwardRequest): Promise<Response | undefined> {
    try {
      const { rows } = await this.pool.query<{ url: string }>(LOOKUP, [to, this.now() - STALE_MS]);
      const base = rows[0]?.url;
      if (base === undefined) return undefined;
      const undici = await import('undici');
      this.agent ??= Promise.resolve(
        // No header or body timeout: the held call may run long after its answers arrive; the
        // holder enforces its own deadline, and the client's going away aborts the forward.
        new undici.Agent({ headersTimeout: 0, bodyTimeout: 0, connect: { timeout: 5_000 } }),
      );
      const answer = await undici.request(new URL(request.path, base), {
        method: 'POST',
        headers: request.headers,
        body: request.body,
        signal: request.signal,
        dispatcher: await this.agent,
      });
      // A body left unread is dumped, not destroyed: a destroyed one emits an error nobody handles.
      if (answer.statusCode >= 300 && answer.statusCode < 400) {
        await answer.body.dump().catch(() => {});
        return undefined;
      }
      const headers = new Headers();
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
      }
      const empty = answer.statusCode === 204 || answer.statusCode === 304;
      if (empty) await answer.body.dump().catch(() => {});
      return new Response(empty ? null : (Readable.toWeb(answer.body) as ReadableStream), {
        status: answer.statusCode,
        headers,
      });
    } catch (e) {
      // Unknown, killed, unreachable: the caller answers that the state is no longer valid.
      this.log?.warn('instances.forward_failed', { error: describeError(e).slice(0, 300) });
      return undefined;
    }
  }

  /** Leaves the registry: retries for this instance's calls are refused from now on. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.pool.query('DELETE FROM manifold_instances WHERE id = $1', [this.id]).catch(() => {});
    await (await this.agent)?.close().catch(() => {});
  }
}
