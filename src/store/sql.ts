/**
 * The persistence seam: the smallest SQL surface that both a SQLite file on Node (better-sqlite3)
 * and a Durable Object's `ctx.storage.sql` can offer. Everything under src/store speaks only this,
 * so the schema and queries are written once and run on both runtimes.
 *
 * Portability rules for every query passed to `exec`:
 * - plain SQLite (UPSERT, RETURNING, no extensions, no PRAGMA);
 * - exactly one statement per call (better-sqlite3 prepares one statement; keeping to one keeps
 *   the two runtimes identical);
 * - never `BEGIN`/`COMMIT`/`SAVEPOINT` text: a Durable Object refuses them. Atomic groups go
 *   through `transaction(fn)` instead (better-sqlite3 `db.transaction`, DO `transactionSync`).
 */

/** What a binding or a column may hold. Integers come back as JS numbers (timestamps in ms fit). */
export type SqlValue = string | number | null;

export interface SqlExec {
  /**
   * Runs one statement with positional `?` bindings and returns its rows (an empty array for a
   * statement that returns none). Synchronous, like a Durable Object's `sql.exec(...).toArray()`.
   * The row type is the caller's claim; readers still check each column at run time.
   */
  exec<T = Record<string, SqlValue>>(query: string, ...bindings: SqlValue[]): T[];
  /** Runs `fn` atomically: all of its statements commit, or none do (a throw rolls back). */
  transaction<T>(fn: () => T): T;
  /** Releases the connection, where there is one to release (a Durable Object has none). */
  close?(): void;
}

/** One statement and its `?` bindings. */
export type Statement = readonly [query: string, values: SqlValue[]];

/**
 * What the stores need of a SQL database: SQLite (a file, a Durable Object) or Postgres. Every
 * store under src/store writes one SQL text per operation, with `?` bindings and tables prefixed
 * by `prefix`; Postgres numbers the bindings (deploy/node/store/postgres/store.ts).
 */
export interface StateSql {
  /** Runs one statement with positional `?` bindings; its rows (none for a statement without). */
  query(query: string, values: SqlValue[]): Record<string, unknown>[] | Promise<Record<string, unknown>[]>;
  /** Runs the statements so that all of them commit, or none does; each one's rows, in order. */
  atomically(
    statements: readonly Statement[],
  ): Record<string, unknown>[][] | Promise<Record<string, unknown>[][]>;
  /** Prefixed to the tables' names (Postgres: `manifold_`). */
  prefix?: string;
  /** One more statement in a re-trust's transaction (Postgres: the NOTIFY that others listen for). */
  afterRetrust?: Statement;
  close?(): void | Promise<void>;
}

/** A `StateSql` over the synchronous `SqlExec` of a SQLite file or a Durable Object. */
export function execSql(sql: SqlExec): StateSql {
  return {
    query: (query, values) => sql.exec(query, ...values),
    atomically: (statements) =>
      sql.transaction(() =>
        statements.map(([query, values]) => sql.exec<Record<string, unknown>>(query, ...values)),
      ),
    close: () => sql.close?.(),
  };
}
