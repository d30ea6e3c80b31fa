/**
 * The state store on Postgres (#15): several Node instances share drift baselines, the verified
 * catalog cache, approval claims and the trust epoch through one database. The queries are
 * SqlStateStore's (src/store/state.ts), each write one statement whose WHERE is the rule, so the
 * database itself decides what "first" means across instances (a second upsert waits on the
 * first's row lock, then finds its rule no longer holds); a re-trust and its epoch bump commit
 * together, with a NOTIFY for whoever listens.
 */
import pg from 'pg';
import type { CallLimiterFactory } from '../../../../src/auth/shared-limit.js';
import { describeError, ManifoldError } from '../../../../src/errors.js';
import type { Logger } from '../../../../src/lib/log.js';
import { SqlCredentialStore } from '../../../../src/store/credentials.js';
import type { StateSql } from '../../../../src/store/sql.js';
import { SqlStateStore } from '../../../../src/store/state.js';
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

/** Postgres numbers its bindings; the shared queries write `?`. */
const numbered = (query: string) => {
  let n = 0;
  return query.replace(/\?/g, () => `$${++n}`);
};

/**
 * The shared SQL stores' seam over a pool (state, drift history, approvals, stored servers,
 * tokens): tables prefixed `manifold_`, a re-trust notifies.
 */
function postgresSql(pool: pg.Pool): StateSql {
  return {
    query: async (query, values) => (await pool.query(numbered(query), values)).rows,
    async atomically(statements) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const rows: Record<string, unknown>[][] = [];
        for (const [query, values] of statements)
          rows.push((await client.query(numbered(query), values)).rows);
        await client.query('COMMIT');
        return rows;
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {});
        throw e;
      } finally {
        client.release();
      }
    },
    prefix: 'manifold_',
    // Delivered on commit, and only then: a listener never sees an epoch it cannot read.
    afterRetrust: [
      `SELECT pg_notify('${TRUST_CHANNEL}', value::text) FROM manifold_meta WHERE key = 'trust_epoch'`,
      [],
    ],
  };
}

export class PostgresStateStore extends SqlStateStore {
  private listener: TrustListener | undefined;
  private sessions: PostgresSessions | undefined;
  /** Upstream OAuth credentials (#19), in the same database. */
  readonly credentials: SqlCredentialStore;

  /** The pool is open to later parts of #15 (shared counters, sessions): one pool per process. */
  constructor(
    readonly pool: pg.Pool,
    private readonly connection: pg.ClientConfig = {},
    private readonly log?: Logger,
  ) {
    const sql = postgresSql(pool);
    super(sql);
    this.credentials = new SqlCredentialStore((query, values) => sql.query(query, values), {
      prefix: 'manifold_',
      bytewise: ' COLLATE "C"',
    });
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

  override async close(): Promise<void> {
    await this.listener?.close();
    await this.sessions?.close();
    await this.pool.end();
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
