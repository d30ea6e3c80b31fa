/**
 * The configured state store on Node: a SQLite file (one machine), a Postgres database (several
 * instances, #15), or none (`store: false`). `serve`, `check`, `drift` and `retrust` all open it here.
 */
import { resolve } from 'node:path';
import type { CallLimiterFactory } from '../../../src/auth/shared-limit.js';
import type { GatewayConfig } from '../../../src/config/types.js';
import { ManifoldError } from '../../../src/errors.js';
import type { Logger } from '../../../src/lib/log.js';
import type { SessionStore } from '../../../src/server/mcp/shared-sessions.js';
import type { CredentialStore } from '../../../src/store/credentials-types.js';
import type { StateStore } from '../../../src/store/state.js';
import type { PostgresInstances } from './postgres/instances.js';
import { openSqliteStore } from './sqlite.js';

export type OpenedStore = StateStore & {
  close(): void | Promise<void>;
  /** Upstream OAuth credentials (#19), in the same file or database as the rest of the state. */
  readonly credentials: CredentialStore;
  /** A store several instances share (Postgres) counts rate limits for all of them. */
  readonly callLimiter?: CallLimiterFactory;
  /** Present on a store several instances share (Postgres): legacy sessions then live in it too. */
  sessionStore?(idleMs: number): SessionStore;
  /** Present on a store several instances share (Postgres): this process in their registry. */
  instances?(): PostgresInstances;
};

/** Opens the store `gateway.store` names; a relative SQLite path is relative to the working directory. */
export async function openConfiguredStore(
  store: GatewayConfig['store'],
  log?: Logger,
): Promise<OpenedStore | undefined> {
  if (!store) return undefined;
  if ('postgres' in store) {
    // Loaded only when configured: the driver is not part of a SQLite gateway's start.
    const { openPostgresStore } = await import('./postgres/store.js');
    return openPostgresStore(store.postgres, log);
  }
  const path = resolve(store.path);
  try {
    return openSqliteStore(path);
  } catch (e) {
    // SQLite's own words ("file is not a database") name neither the file nor the setting.
    throw new ManifoldError(
      'ERR_CONFIG',
      `cannot open the SQLite state store (gateway.store.path, ${path}): ${e instanceof Error ? e.message : String(e)}; point it at a SQLite file this user may write, or set "store": false`,
      { cause: e },
    );
  }
}
