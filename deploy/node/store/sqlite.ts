/**
 * The state store on Node: a SQLite file through better-sqlite3, behind the same `SqlExec` seam a
 * Durable Object offers on Workers.
 */
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { SqlCredentialStore } from '../../../src/store/credentials.js';
import type { CredentialStore } from '../../../src/store/credentials-types.js';
import { migrate } from '../../../src/store/schema.js';
import type { SqlExec, SqlValue } from '../../../src/store/sql.js';
import { execSql } from '../../../src/store/sql.js';
import { SqlStateStore } from '../../../src/store/state.js';

/** How long a writer waits for another process's lock (the CLI's `retrust` while serving). */
const BUSY_TIMEOUT_MS = 5000;

/** Wraps a better-sqlite3 connection as `SqlExec`. Statements are prepared once per query text. */
export function sqliteExec(db: Database.Database): SqlExec {
  const statements = new Map<string, Database.Statement<SqlValue[]>>();
  const prepare = (query: string) => {
    let statement = statements.get(query);
    if (!statement) {
      statement = db.prepare<SqlValue[]>(query);
      statements.set(query, statement);
    }
    return statement;
  };
  return {
    exec<T>(query: string, ...bindings: SqlValue[]): T[] {
      const statement = prepare(query);
      // `all` refuses a statement that returns no data, and `run` one that does.
      if (statement.reader) return statement.all(...bindings) as T[];
      statement.run(...bindings);
      return [];
    },
    transaction<T>(fn: () => T): T {
      // Immediate: take the write lock up front, so a read-then-write inside `fn` cannot fail
      // with SQLITE_BUSY when another process wrote in between; it waits out the busy timeout.
      return db.transaction(fn).immediate();
    },
    close() {
      statements.clear();
      db.close();
    },
  };
}

/**
 * Opens (creating if needed) the state file at `path` and brings its schema up to date. Throws a
 * ManifoldError (ERR_CONFIG) for a file written by a newer Manifold. `:memory:` is accepted for
 * tests (a private database, no WAL).
 */
export function openSqliteStore(path: string): SqlStateStore & { credentials: CredentialStore } {
  const inMemory = path === ':memory:';
  // Catalogs describe the operator's servers; keep them to the operator's user.
  if (!inMemory) mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const created = !inMemory && !existsSync(path);
  const db = new Database(path);
  try {
    // Before the first write, so the -wal and -shm files SQLite creates inherit the mode.
    if (created) chmodSync(path, 0o600);
    // WAL: the gateway keeps reading while the CLI's `retrust` writes from another process.
    db.pragma('journal_mode = WAL');
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    const exec = sqliteExec(db);
    // The one schema of the file, credentials tables (v3, v4) included.
    migrate(exec);
    const store = new SqlStateStore(execSql(exec));
    return Object.assign(store, { credentials: new SqlCredentialStore((q, v) => exec.exec(q, ...v)) });
  } catch (e) {
    db.close();
    throw e;
  }
}
