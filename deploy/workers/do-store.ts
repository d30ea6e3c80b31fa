import { SqlCredentialStore } from '../../src/store/credentials.js';
import { migrate } from '../../src/store/schema.js';
import type { SqlExec, SqlValue } from '../../src/store/sql.js';
import { execSql } from '../../src/store/sql.js';
import { SqlStateStore } from '../../src/store/state.js';

interface DurableSql {
  exec(query: string, ...bindings: SqlValue[]): { toArray(): unknown[] };
}
interface DurableStorage {
  sql: DurableSql;
  transactionSync<T>(fn: () => T): T;
}

/** The same schema and store as Node, over a SQLite-backed Durable Object's storage. */
export function durableObjectStore(storage: DurableStorage): SqlStateStore {
  const exec = durableExec(storage);
  migrate(exec);
  return new SqlStateStore(execSql(exec));
}

/**
 * Upstream OAuth credentials in the same Durable Object's SQLite: migrated here too (an
 * idempotent check), so it does not matter which of the two an object opens first.
 */
export function durableObjectCredentials(storage: DurableStorage): SqlCredentialStore {
  const exec = durableExec(storage);
  migrate(exec);
  return new SqlCredentialStore((q, v) => exec.exec(q, ...v));
}

function durableExec(storage: DurableStorage): SqlExec {
  return {
    exec: <T>(query: string, ...bindings: SqlValue[]) =>
      storage.sql.exec(query, ...bindings).toArray() as T[],
    transaction: (fn) => storage.transactionSync(fn),
  };
}
