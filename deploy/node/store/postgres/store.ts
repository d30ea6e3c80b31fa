/**
 * The state store on Postgres (#15): several Node instances share drift baselines, the verified
 * catalog cache, approval claims and the trust epoch through one database. The same rules as
 * SqlStateStore (src/store/state.ts), each write one statement whose WHERE is the rule, so the
 * database itself decides what "first" means across instances:
 * - the baseline is written only `WHERE baseline IS NULL`: two instances starting at once on a
 *   fresh database record one (the second's upsert waits on the first's row lock, then finds it set);
 * - a claim is an INSERT that does nothing on conflict: granted once, whichever instance asks;
 * - a re-trust and its epoch bump commit together, with a NOTIFY for whoever listens.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import pg from 'pg';
import type { CallLimiterFactory } from '../../../../src/auth/shared-limit.js';
import { describeError, ManifoldError } from '../../../../src/errors.js';
import type { Logger } from '../../../../src/lib/log.js';
import { parseRow, type RawRow } from '../../../../src/store/rows.js';
import type { Baseline, ServerIdentity, ServerRow, StateStore } from '../../../../src/store/state.js';
import { PostgresCredentialStore } from './credentials.js';
import { PostgresInstances } from './instances.js';
import { postgresRateLimiter } from './rate-limit.js';
import { migratePostgres } from './schema.js';
import { PostgresSessions } from './sessions.js';
import { listenForTrust, type TrustListener } from './trust-listener.js';

/** The channel a re-trust notifies (payload: the new epoch). */
export const TRUST_CHANNEL = 'manifold_trust';

const INT8_OID = 20;
/** BIGINT columns hold milliseconds and counters, all within 2^53: read them as numbers. */
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8_OID
      ? (text: string) => Number(text)
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

const COLUMNS = 'name, transport, target, catalog, catalog_at, baseline, trusted_at, created_at';
const SAME_IDENTITY = 's.transport = excluded.transport AND s.target = excluded.target';

const SAVE_CATALOG = `INSERT INTO manifold_servers AS s (name, transport, target, catalog, catalog_at, created_at)
  VALUES ($1, $2, $3, $4, $5, $5)
  ON CONFLICT (name) DO UPDATE SET catalog = excluded.catalog, catalog_at = excluded.catalog_at
  WHERE ${SAME_IDENTITY}
  RETURNING name`;
const CREATE_BASELINE = `INSERT INTO manifold_servers AS s (name, transport, target, baseline, trusted_at, created_at)
  VALUES ($1, $2, $3, $4, $5, $5)
  ON CONFLICT (name) DO UPDATE SET baseline = excluded.baseline, trusted_at = excluded.trusted_at
  WHERE s.baseline IS NULL AND ${SAME_IDENTITY}
  RETURNING name`;
// The right-hand sides see the old row, so the CASEs compare the identity before the rewrite.
const RETRUST = `INSERT INTO manifold_servers AS s (name, transport, target, baseline, trusted_at, created_at)
  VALUES ($1, $2, $3, $4, $5, $5)
  ON CONFLICT (name) DO UPDATE SET
    catalog = CASE WHEN ${SAME_IDENTITY} THEN s.catalog ELSE NULL END,
    catalog_at = CASE WHEN ${SAME_IDENTITY} THEN s.catalog_at ELSE NULL END,
    transport = excluded.transport,
    target = excluded.target,
    baseline = excluded.baseline,
    trusted_at = excluded.trusted_at`;
const BUMP_EPOCH = `INSERT INTO manifold_meta AS m (key, value) VALUES ('trust_epoch', 1)
  ON CONFLICT (key) DO UPDATE SET value = m.value + 1
  RETURNING value`;
const CLAIM =
  'INSERT INTO manifold_claims (key, expires_at) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING key';
const SWEEP_CLAIMS = 'DELETE FROM manifold_claims WHERE expires_at < $1';
/** Sweep expired claims once per this many claims (one indexed DELETE). */
const SWEEP_EVERY = 64;
const SAVE_RUN = `INSERT INTO manifold_code_runs (key, journal, expires_at) VALUES ($1, $2, $3)
  ON CONFLICT (key) DO UPDATE SET journal = excluded.journal, expires_at = excluded.expires_at`;
const LOAD_RUN = 'SELECT journal FROM manifold_code_runs WHERE key = $1 AND expires_at >= $2';
const SWEEP_RUNS = 'DELETE FROM manifold_code_runs WHERE expires_at < $1';

export class PostgresStateStore implements StateStore {
  private claims = 0;
  private listener: TrustListener | undefined;
  private sessions: PostgresSessions | undefined;
  /** Upstream OAuth credentials (#19), in the same database. */
  readonly credentials: PostgresCredentialStore;

  /** The pool is open to later parts of #15 (shared counters, sessions): one pool per process. */
  constructor(
    readonly pool: pg.Pool,
    private readonly connection: pg.ClientConfig = {},
    private readonly log?: Logger,
  ) {
    this.credentials = new PostgresCredentialStore(pool);
  }

  async get(name: string): Promise<ServerRow | undefined> {
    const { rows } = await this.pool.query<RawRow>(
      `SELECT ${COLUMNS} FROM manifold_servers WHERE name = $1`,
      [name],
    );
    return rows[0] ? parseRow(rows[0]) : undefined;
  }

  saveCatalog(identity: ServerIdentity, tools: Tool[], now: number): Promise<boolean> {
    const { name, transport, target } = identity;
    return this.write(SAVE_CATALOG, [name, transport, target, JSON.stringify(tools), now]);
  }

  createBaseline(identity: ServerIdentity, baseline: Baseline, now: number): Promise<boolean> {
    const { name, transport, target } = identity;
    return this.write(CREATE_BASELINE, [name, transport, target, JSON.stringify(baseline), now]);
  }

  async retrust(identity: ServerIdentity, baseline: Baseline, now: number): Promise<void> {
    const { name, transport, target } = identity;
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(RETRUST, [name, transport, target, JSON.stringify(baseline), now]);
      const { rows } = await client.query<{ value: number }>(BUMP_EPOCH);
      // Delivered on commit, and only then: a listener never sees an epoch it cannot read.
      await client.query('SELECT pg_notify($1, $2)', [TRUST_CHANNEL, String(rows[0]?.value ?? '')]);
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }

  async trustEpoch(): Promise<number> {
    const { rows } = await this.pool.query<{ value: unknown }>(
      "SELECT value FROM manifold_meta WHERE key = 'trust_epoch'",
    );
    const value = rows[0]?.value ?? 0;
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
      throw new ManifoldError('ERR_CONFIG', 'the Postgres state store has an unreadable trust epoch');
    }
    return value;
  }

  async claim(key: string, expiresAt: number, now: number): Promise<boolean> {
    if (this.claims++ % SWEEP_EVERY === 0) await this.pool.query(SWEEP_CLAIMS, [now]);
    // A key still on file after its expiry counts as used: a claim is never granted twice.
    return this.write(CLAIM, [key, expiresAt]);
  }

  private runs = 0;

  async saveRun(key: string, journal: string, expiresAt: number, now: number): Promise<void> {
    if (this.runs++ % SWEEP_EVERY === 0) await this.pool.query(SWEEP_RUNS, [now]);
    await this.pool.query(SAVE_RUN, [key, journal, expiresAt]);
  }

  async loadRun(key: string, now: number): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ journal: unknown }>(LOAD_RUN, [key, now]);
    const journal = rows[0]?.journal;
    return typeof journal === 'string' ? journal : undefined;
  }

  watchTrust(listener: () => void): void {
    this.listener ??= listenForTrust(this.connection, TRUST_CHANNEL, listener, (e) =>
      this.log?.warn('store.trust_listen_lost', {
        error: safeMessage(e, this.connection.connectionString ?? ''),
      }),
    );
  }

  /** Rate limits counted in this database, shared by every instance on it (rate-limit.ts). */
  get callLimiter(): CallLimiterFactory {
    return postgresRateLimiter(this.pool, {
      ...(this.log ? { log: this.log } : {}),
      describe: (e) => safeMessage(e, this.connection.connectionString ?? ''),
    });
  }

  /** Legacy session records any instance can serve (#15), over this pool; one per process. */
  sessionStore(idleMs: number): PostgresSessions {
    const url = this.connection.connectionString ?? '';
    this.sessions ??= new PostgresSessions(
      this.pool,
      this.connection,
      idleMs,
      (e) => safeMessage(e, url),
      (e) => this.log?.warn('store.sessions_listen_lost', { error: safeMessage(e, url) }),
    );
    return this.sessions;
  }

  /** This process in the deployment's registry of instances (instances.ts). */
  instances(): PostgresInstances {
    return new PostgresInstances(this.pool, this.log);
  }

  async close(): Promise<void> {
    await this.listener?.close();
    await this.sessions?.close();
    await this.pool.end();
  }

  private async write(query: string, values: (string | number)[]): Promise<boolean> {
    const { rowCount } = await this.pool.query(query, values);
    return (rowCount ?? 0) > 0;
  }
}

/** How long to wait for a connection, and for any one query, before failing (not hanging) a request. */
const CONNECT_TIMEOUT_MS = 5000;
const QUERY_TIMEOUT_MS = 10_000;

/**
 * Connects to `url`, brings the schema up to date, and returns the store. Throws a ManifoldError
 * (ERR_CONFIG) that never repeats the URL: it holds a password.
 */
export async function openPostgresStore(url: string, log?: Logger): Promise<PostgresStateStore> {
  const connection: pg.ClientConfig = {
    connectionString: url,
    types,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    application_name: 'manifold',
  };
  const pool = new pg.Pool({ ...connection, max: 8 });
  // An idle connection the server drops is reported here; unhandled, it would end the process.
  pool.on('error', (e) => log?.warn('store.postgres_error', { error: safeMessage(e, url) }));
  try {
    await migratePostgres(pool);
  } catch (e) {
    await pool.end().catch(() => {});
    if (e instanceof ManifoldError) throw e;
    throw new ManifoldError(
      'ERR_CONFIG',
      `cannot open the Postgres state store (gateway.store.postgres): ${safeMessage(e, url)}; check that the database is up and that the URL's user may create tables`,
      { cause: e },
    );
  }
  return new PostgresStateStore(pool, connection, log);
}

/** A driver error in one line, without the URL or its password, whatever the driver put in it. */
function safeMessage(e: unknown, url: string): string {
  let text = describeError(e).split(url).join('[store url]');
  try {
    const password = decodeURIComponent(new URL(url).password);
    if (password) text = text.split(password).join('[secret]');
  } catch {
    // A URL that does not parse never got this far (config validation).
  }
  return text.slice(0, 300);
}
