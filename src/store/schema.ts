/**
 * The state schema and its migrations. The version lives in the `meta` table, so one database
 * file (or Durable Object) can be opened by any Manifold that knows at least its version.
 */
import { ManifoldError } from '../errors.js';
import type { SqlExec } from './sql.js';

/**
 * Ordered; entry i takes the schema from version i to i + 1, and the schema version is simply
 * how many entries have been applied. Each entry is exactly one statement (see sql.ts); a change
 * that needs several statements is several entries. Never edit or reorder an entry once released:
 * a database that already applied it would silently differ from a fresh one.
 */
export const MIGRATIONS: readonly string[] = [
  // v1: one row per configured server. Identity is name + transport + target (URL, or the JSON
  // of [command, ...args]); env, headers, cwd and tokens have no column, so they cannot be written.
  // `baseline` is NULL until the first listing is trusted; only an explicit re-trust rewrites it.
  `CREATE TABLE servers (
    name TEXT PRIMARY KEY NOT NULL,
    transport TEXT NOT NULL,
    target TEXT NOT NULL,
    catalog TEXT,
    catalog_at INTEGER,
    baseline TEXT,
    trusted_at INTEGER,
    created_at INTEGER NOT NULL
  )`,
  // v2: single-use keys (#14: an approval is claimed before its call is sent, so a replayed
  // answer can never send the call twice, whichever instance receives it).
  `CREATE TABLE claims (
    key TEXT PRIMARY KEY NOT NULL,
    expires_at INTEGER NOT NULL
  )`,
  // v3 (#19): the gateway's OAuth client registrations at its upstreams' authorization servers,
  // one per server (or `server#cli`) and issuer. Only DCR and CIMD clients: pre-registered ones
  // stay in the config. `secret` is sealed (SecretBox).
  `CREATE TABLE oauth_clients (
    server TEXT NOT NULL,
    issuer TEXT NOT NULL,
    client_id TEXT NOT NULL,
    secret TEXT,
    auth_method TEXT NOT NULL,
    source TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (server, issuer)
  )`,
  // v4 (#19): upstream tokens per server and subject ('' = the deployment identity), sealed with
  // AAD server, subject, issuer; `version` is the compare-and-set guard of a refresh.
  `CREATE TABLE oauth_tokens (
    server TEXT NOT NULL,
    subject TEXT NOT NULL,
    issuer TEXT NOT NULL,
    resource TEXT NOT NULL,
    sealed TEXT NOT NULL,
    scope TEXT NOT NULL,
    expires_at INTEGER,
    version INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (server, subject)
  )`,
  // --- #52 the approvals queue (src/store/approvals.ts): a call staged for an operator, decided
  // once, run once. `shown` is the arguments as the operator sees them (bounded, secrets redacted);
  // `result` the one run's result for the caller that asks again.
  `CREATE TABLE approvals (
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
    decided_at INTEGER,
    reason TEXT,
    result TEXT,
    delivered INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  )`,
  'CREATE INDEX approvals_call ON approvals (principal, tool, digest)',
  // Servers added through the admin API (src/store/stored-servers.ts), merged over the file's.
  `CREATE TABLE stored_servers (
    name TEXT PRIMARY KEY NOT NULL,
    entry TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at INTEGER NOT NULL
  )`,
  // Tokens seen, by id (jti or a digest), never the token; revoked ones refused until they expire.
  `CREATE TABLE seen_tokens (
    id TEXT PRIMARY KEY NOT NULL,
    subject TEXT NOT NULL,
    tenant TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    first_seen INTEGER NOT NULL,
    revoked_at INTEGER,
    revoked_by TEXT
  )`,
  // --- end #52
  // #50: the journal of a code-mode run paused for input, keyed by principal and run id,
  // so a retry on any instance answers the calls it completed without sending them again.
  `CREATE TABLE code_runs (
    key TEXT PRIMARY KEY NOT NULL,
    journal TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  )`,
  // #52: drift history (src/store/drift-history.ts): per tool, each time drift held it back and
  // each accepted change, with who accepted it; names and fingerprints only, never a tool's text.
  `CREATE TABLE drift_events (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    digest TEXT,
    accepted_by TEXT,
    decided_at INTEGER NOT NULL
  )`,
  'CREATE INDEX drift_events_tool ON drift_events (server, tool, decided_at)',
];

/** Holds `schema_version` and `trust_epoch`; created outside the migrations so it can version them. */
const CREATE_META = 'CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL)';

/** Reads one integer from `meta`: 0 when the key is absent, undefined when the value is not an integer. */
export function readMeta(sql: SqlExec, key: string): number | undefined {
  const row = sql.exec<{ value: unknown }>('SELECT value FROM meta WHERE key = ?', key)[0];
  if (row === undefined) return 0;
  return typeof row.value === 'number' && Number.isSafeInteger(row.value) ? row.value : undefined;
}

/**
 * Brings the schema up to date. Idempotent, and safe when two processes open the same file at
 * once: the version is read and the pending migrations applied in one transaction (an immediate
 * one on Node), so the second process finds the work done. Refuses a database written by a newer
 * Manifold rather than guess at a schema it does not know.
 */
export function migrate(sql: SqlExec): void {
  sql.transaction(() => {
    sql.exec(CREATE_META);
    const version = readMeta(sql, 'schema_version');
    if (version === undefined || version < 0) {
      throw new ManifoldError(
        'ERR_CONFIG',
        'the state store has an unreadable schema version; restore it from a backup or point the store at a new file',
      );
    }
    if (version > MIGRATIONS.length) {
      throw new ManifoldError(
        'ERR_CONFIG',
        `the state store was written by a newer Manifold (schema version ${version}; this one knows up to ${MIGRATIONS.length}); upgrade Manifold or point the store at another file`,
      );
    }
    if (version === MIGRATIONS.length) return;
    for (const statement of MIGRATIONS.slice(version)) sql.exec(statement);
    sql.exec(
      'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      'schema_version',
      MIGRATIONS.length,
    );
  });
}
