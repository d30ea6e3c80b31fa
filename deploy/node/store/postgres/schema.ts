/**
 * The Postgres schema of the state store and its migrations. The same rows as src/store/schema.ts
 * (SQLite and Durable Objects), in Postgres's dialect, under `manifold_`-prefixed names so that
 * the database can be one an operator already runs for other things.
 */
import type pg from 'pg';
import { ManifoldError } from '../../../../src/errors.js';

/**
 * Ordered, one statement each, never edited once released (see src/store/schema.ts). Later parts
 * of #15 (shared rate limits, legacy sessions) append their tables here.
 */
export const PG_MIGRATIONS: readonly string[] = [
  // v1: one row per configured server; no column for env, headers, cwd or tokens.
  `CREATE TABLE manifold_servers (
    name TEXT PRIMARY KEY NOT NULL,
    transport TEXT NOT NULL,
    target TEXT NOT NULL,
    catalog TEXT,
    catalog_at BIGINT,
    baseline TEXT,
    trusted_at BIGINT,
    created_at BIGINT NOT NULL
  )`,
  // v2: single-use keys (#14 approvals), claimed by whichever instance receives the answer.
  `CREATE TABLE manifold_claims (
    key TEXT PRIMARY KEY NOT NULL,
    expires_at BIGINT NOT NULL
  )`,
  `CREATE INDEX manifold_claims_expiry ON manifold_claims (expires_at)`,
  // -- v3 rate limits: calls granted per tenant per one-minute window, leased in blocks
  // (rate-limit.ts); the window leads the key so that the sweep of old windows is a range.
  `CREATE TABLE manifold_rate_windows (
    window_start BIGINT NOT NULL,
    tenant TEXT NOT NULL,
    used BIGINT NOT NULL,
    granted BIGINT NOT NULL,
    PRIMARY KEY (window_start, tenant)
  )`,
  // -- v4 legacy sessions: what a session needs on any instance (sessions.ts); no token,
  // header or secret, only the owner's Principal.key.
  `CREATE TABLE manifold_sessions (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    client_capabilities TEXT NOT NULL,
    log_level TEXT,
    created_at BIGINT NOT NULL,
    seen_at BIGINT NOT NULL
  )`,
  // -- v5 instances: where each running instance is reached (instances.ts), so that a held MRTR
  // retry that lands elsewhere is forwarded to the one holding the call.
  `CREATE TABLE manifold_instances (
    id TEXT PRIMARY KEY NOT NULL,
    url TEXT NOT NULL,
    seen_at BIGINT NOT NULL
  )`,
  // -- v6 (#19) OAuth client registrations at the upstreams' authorization servers (DCR, CIMD);
  // `secret` is sealed (SecretBox). See src/store/schema.ts v3.
  `CREATE TABLE manifold_oauth_clients (
    server TEXT NOT NULL,
    issuer TEXT NOT NULL,
    client_id TEXT NOT NULL,
    secret TEXT,
    auth_method TEXT NOT NULL,
    source TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (server, issuer)
  )`,
  // -- v7 (#19) upstream tokens per server and subject, sealed; `version` guards a refresh that
  // several instances race (compare-and-set). See src/store/schema.ts v4.
  `CREATE TABLE manifold_oauth_tokens (
    server TEXT NOT NULL,
    subject TEXT NOT NULL,
    issuer TEXT NOT NULL,
    resource TEXT NOT NULL,
    sealed TEXT NOT NULL,
    scope TEXT NOT NULL,
    expires_at BIGINT,
    version BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (server, subject)
  )`,
  // --- #52 the approvals queue (src/store/approvals.ts, approvals.ts here). See src/store/schema.ts.
  `CREATE TABLE manifold_approvals (
    id TEXT PRIMARY KEY NOT NULL,
    principal TEXT NOT NULL,
    tenant TEXT NOT NULL,
    subject TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    digest TEXT NOT NULL,
    shown TEXT NOT NULL,
    risk TEXT NOT NULL,
    status TEXT NOT NULL,
    decided_by TEXT,
    decided_at BIGINT,
    reason TEXT,
    result TEXT,
    delivered INTEGER NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  )`,
  'CREATE INDEX manifold_approvals_call ON manifold_approvals (principal, tool, digest)',
  `CREATE TABLE manifold_stored_servers (
    name TEXT PRIMARY KEY NOT NULL,
    entry TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at BIGINT NOT NULL
  )`,
  `CREATE TABLE manifold_seen_tokens (
    id TEXT PRIMARY KEY NOT NULL,
    subject TEXT NOT NULL,
    tenant TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    first_seen BIGINT NOT NULL,
    revoked_at BIGINT,
    revoked_by TEXT
  )`,
  // --- end #52
  // #50: the journal of a code-mode run paused for input (src/code/journal.ts); see
  // src/store/schema.ts.
  `CREATE TABLE manifold_code_runs (
    key TEXT PRIMARY KEY NOT NULL,
    journal TEXT NOT NULL,
    expires_at BIGINT NOT NULL
  )`,
  // #52: drift history (src/store/drift-history.ts); see src/store/schema.ts.
  `CREATE TABLE manifold_drift_events (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    digest TEXT,
    accepted_by TEXT,
    decided_at BIGINT NOT NULL
  )`,
  'CREATE INDEX manifold_drift_events_tool ON manifold_drift_events (server, tool, decided_at)',
];

/** One lock id for every Manifold migrating this database (an arbitrary constant: "mfld"). */
const MIGRATION_LOCK = 0x6d666c64;

/**
 * Brings the schema up to date, safely when several instances start at once: each takes the same
 * transaction-scoped advisory lock first, so the second finds the work done. Refuses a database
 * written by a newer Manifold.
 */
export async function migratePostgres(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(
      'CREATE TABLE IF NOT EXISTS manifold_meta (key TEXT PRIMARY KEY NOT NULL, value BIGINT NOT NULL)',
    );
    const { rows } = await client.query<{ value: unknown }>(
      "SELECT value FROM manifold_meta WHERE key = 'schema_version'",
    );
    const version = rows[0] === undefined ? 0 : rows[0].value;
    if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 0) {
      throw new ManifoldError(
        'ERR_CONFIG',
        'the Postgres state store has an unreadable schema version; restore the manifold_ tables from a backup or point the store at a new database',
      );
    }
    if (version > PG_MIGRATIONS.length) {
      throw new ManifoldError(
        'ERR_CONFIG',
        `the Postgres state store was written by a newer Manifold (schema version ${version}; this one knows up to ${PG_MIGRATIONS.length}); upgrade Manifold or point the store at another database`,
      );
    }
    for (const statement of PG_MIGRATIONS.slice(version)) await client.query(statement);
    if (version < PG_MIGRATIONS.length) {
      await client.query(
        `INSERT INTO manifold_meta (key, value) VALUES ('schema_version', $1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
        [PG_MIGRATIONS.length],
      );
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}
