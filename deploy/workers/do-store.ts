import type { SqlExec, SqlValue } from '../../src/store/sql.js';
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
  const exec: SqlExec = {
    exec: <T>(query: string, ...bindings: SqlValue[]) =>
      storage.sql.exec(query, ...bindings).toArray() as T[],
    transaction: (fn) => storage.transactionSync(fn),
  };
  return new SqlStateStore(exec);
}
