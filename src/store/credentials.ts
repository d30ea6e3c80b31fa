/**
 * Upstream OAuth credentials at rest: the `CredentialStore` of credentials-types.ts over SQL (a
 * SQLite file on Node, a Durable Object on Workers, Postgres), and in memory for a gateway without
 * a store. Columns `secret` and `sealed` are SecretBox output, so nothing read or written here is
 * a token or a client secret in the clear.
 *
 * Every row is checked column by column when read (parseClient, parseToken): a row that does not
 * parse is treated as absent, which sends the manager back to a login rather than into a crash.
 */
import type { TokenAuthMethod } from '../config/types.js';
import type { CredentialStore, StoredClient, StoredToken } from './credentials-types.js';
import type { SqlValue } from './sql.js';

/** One token as listed for status and logout: never the sealed column. */
export type ListedToken = Awaited<ReturnType<CredentialStore['listTokens']>>[number];

const METHODS: readonly TokenAuthMethod[] = ['none', 'client_secret_basic', 'client_secret_post'];
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const int = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) ? v : undefined;

/** Scopes are stored space-separated, as OAuth writes them (RFC 6749 §3.3: a scope has no space). */
const scopeText = (scope: readonly string[]): string => scope.join(' ');
const scopeList = (text: string): string[] => text.split(' ').filter((s) => s.length > 0);

/** A client row as stored; undefined when any column is not what a Manifold writes. */
function parseClient(row: Record<string, unknown>): StoredClient | undefined {
  const clientId = str(row.client_id);
  const authMethod = METHODS.find((m) => m === row.auth_method);
  const source = row.source === 'dcr' || row.source === 'cimd' ? row.source : undefined;
  const redirectUri = str(row.redirect_uri);
  const secret = row.secret === null || row.secret === undefined ? undefined : str(row.secret);
  if (!clientId || !authMethod || !source || redirectUri === undefined) return undefined;
  if (row.secret !== null && row.secret !== undefined && secret === undefined) return undefined;
  return { clientId, ...(secret !== undefined ? { secret } : {}), authMethod, source, redirectUri };
}

/** A token row as stored; undefined when any column is not what a Manifold writes. */
function parseToken(row: Record<string, unknown>): StoredToken | undefined {
  const issuer = str(row.issuer);
  const resource = str(row.resource);
  const sealed = str(row.sealed);
  const scope = str(row.scope);
  const version = int(row.version);
  const expiresAt = row.expires_at === null ? undefined : int(row.expires_at);
  if (issuer === undefined || resource === undefined || !sealed || scope === undefined) return undefined;
  if (version === undefined || (row.expires_at !== null && expiresAt === undefined)) return undefined;
  return {
    issuer,
    resource,
    sealed,
    scope: scopeList(scope),
    ...(expiresAt !== undefined ? { expiresAt } : {}),
    version,
  };
}

/** A listed token row; undefined when it does not parse. */
function parseListed(row: Record<string, unknown>): ListedToken | undefined {
  const subject = str(row.subject);
  const issuer = str(row.issuer);
  const scope = str(row.scope);
  const expiresAt = row.expires_at === null ? undefined : int(row.expires_at);
  if (subject === undefined || issuer === undefined || scope === undefined) return undefined;
  if (row.expires_at !== null && expiresAt === undefined) return undefined;
  return { subject, issuer, scope: scopeList(scope), ...(expiresAt !== undefined ? { expiresAt } : {}) };
}

const CLIENT_COLUMNS = 'client_id, secret, auth_method, source, redirect_uri';
const TOKEN_COLUMNS = 'issuer, resource, sealed, scope, expires_at, version';

/** Runs one statement with positional `?` bindings; resolves with its rows. */
export type CredentialSql = (
  query: string,
  values: SqlValue[],
) => Record<string, unknown>[] | Promise<Record<string, unknown>[]>;

/** What differs between the SQL databases the store runs on. */
export interface CredentialDialect {
  /** Prefixed to the tables' names (Postgres: `manifold_`). */
  prefix?: string;
  /** Appended to `ORDER BY subject` for byte order (Postgres: ` COLLATE "C"`, whatever the locale). */
  bytewise?: string;
}

function queries(prefix: string, bytewise: string) {
  const clients = `${prefix}oauth_clients`;
  const tokens = `${prefix}oauth_tokens`;
  return {
    getClient: `SELECT ${CLIENT_COLUMNS} FROM ${clients} WHERE server = ? AND issuer = ?`,
    putClient: `INSERT INTO ${clients} (server, issuer, ${CLIENT_COLUMNS}, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (server, issuer) DO UPDATE SET client_id = excluded.client_id, secret = excluded.secret,
    auth_method = excluded.auth_method, source = excluded.source, redirect_uri = excluded.redirect_uri,
    created_at = excluded.created_at`,
    dropClients: `DELETE FROM ${clients} WHERE server = ? AND issuer <> ? RETURNING issuer`,
    getToken: `SELECT ${TOKEN_COLUMNS} FROM ${tokens} WHERE server = ? AND subject = ?`,
    // Compare-and-set, each one statement whose WHERE is the rule: a first write only when no row
    // exists, a later one only over the version its writer read. Whoever loses gets no row back.
    insertToken: `INSERT INTO ${tokens} (server, subject, ${TOKEN_COLUMNS}, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)
  ON CONFLICT (server, subject) DO NOTHING RETURNING version`,
    updateToken: `UPDATE ${tokens} SET issuer = ?, resource = ?, sealed = ?, scope = ?, expires_at = ?,
    version = version + 1, updated_at = ?
  WHERE server = ? AND subject = ? AND version = ? RETURNING version`,
    // A login's write: the row whatever it holds, one version past it.
    replaceToken: `INSERT INTO ${tokens} (server, subject, ${TOKEN_COLUMNS}, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)
  ON CONFLICT (server, subject) DO UPDATE SET issuer = excluded.issuer, resource = excluded.resource,
    sealed = excluded.sealed, scope = excluded.scope, expires_at = excluded.expires_at,
    version = ${tokens}.version + 1, updated_at = excluded.updated_at
  RETURNING version`,
    deleteTokens: `DELETE FROM ${tokens} WHERE server = ? RETURNING subject`,
    deleteToken: `DELETE FROM ${tokens} WHERE server = ? AND subject = ? RETURNING subject`,
    listTokens: `SELECT subject, issuer, scope, expires_at FROM ${tokens} WHERE server = ?
  ORDER BY subject${bytewise}`,
  };
}

/**
 * The store over SQL: SQLite (a file on Node, a Durable Object; the schema is the state store's,
 * schema.ts v3 and v4, migrated by it) or Postgres, one set of queries for both. A refresh raced by
 * two instances is written once: the UPDATE's `WHERE version = ?` decides, the loser re-reads.
 */
export class SqlCredentialStore implements CredentialStore {
  private readonly q: ReturnType<typeof queries>;

  constructor(
    private readonly run: CredentialSql,
    dialect: CredentialDialect = {},
  ) {
    this.q = queries(dialect.prefix ?? '', dialect.bytewise ?? '');
  }

  async getClient(key: string, issuer: string): Promise<StoredClient | undefined> {
    const row = (await this.run(this.q.getClient, [key, issuer]))[0];
    return row ? parseClient(row) : undefined;
  }

  async putClient(key: string, issuer: string, c: StoredClient, now: number): Promise<void> {
    const { clientId, secret, authMethod, source, redirectUri } = c;
    await this.run(this.q.putClient, [
      key,
      issuer,
      clientId,
      secret ?? null,
      authMethod,
      source,
      redirectUri,
      now,
    ]);
  }

  async dropClientsExcept(key: string, issuer: string): Promise<number> {
    return (await this.run(this.q.dropClients, [key, issuer])).length;
  }

  async getToken(server: string, subject: string): Promise<StoredToken | undefined> {
    const row = (await this.run(this.q.getToken, [server, subject]))[0];
    return row ? parseToken(row) : undefined;
  }

  async putToken(
    server: string,
    subject: string,
    t: Omit<StoredToken, 'version'>,
    expect: number | undefined,
    now: number,
  ): Promise<boolean> {
    const values: SqlValue[] = [t.issuer, t.resource, t.sealed, scopeText(t.scope), t.expiresAt ?? null];
    const rows =
      expect === undefined
        ? await this.run(this.q.insertToken, [server, subject, ...values, now])
        : await this.run(this.q.updateToken, [...values, now, server, subject, expect]);
    return rows.length > 0;
  }

  async replaceToken(
    server: string,
    subject: string,
    t: Omit<StoredToken, 'version'>,
    now: number,
  ): Promise<number> {
    const values: SqlValue[] = [t.issuer, t.resource, t.sealed, scopeText(t.scope), t.expiresAt ?? null];
    const version = int((await this.run(this.q.replaceToken, [server, subject, ...values, now]))[0]?.version);
    if (version === undefined) throw new Error('the token row took no version');
    return version;
  }

  async deleteToken(server: string, subject?: string): Promise<number> {
    const rows =
      subject === undefined
        ? await this.run(this.q.deleteTokens, [server])
        : await this.run(this.q.deleteToken, [server, subject]);
    return rows.length;
  }

  async listTokens(server: string): Promise<ListedToken[]> {
    const rows = await this.run(this.q.listTokens, [server]);
    return rows.map(parseListed).filter((r): r is ListedToken => r !== undefined);
  }
}

/**
 * A process's own credentials, lost on restart: for a gateway without a configured store (the
 * manager warns when a server in mode gateway or user runs on it). The same rules as the SQL store.
 */
export class MemoryCredentialStore implements CredentialStore {
  private readonly clients = new Map<string, Map<string, StoredClient>>();
  private readonly tokens = new Map<string, Map<string, StoredToken>>();

  async getClient(key: string, issuer: string): Promise<StoredClient | undefined> {
    const c = this.clients.get(key)?.get(issuer);
    return c ? { ...c } : undefined;
  }

  async putClient(key: string, issuer: string, c: StoredClient): Promise<void> {
    const byIssuer = this.clients.get(key) ?? new Map<string, StoredClient>();
    this.clients.set(key, byIssuer);
    byIssuer.set(issuer, { ...c });
  }

  async dropClientsExcept(key: string, issuer: string): Promise<number> {
    const byIssuer = this.clients.get(key);
    if (!byIssuer) return 0;
    let dropped = 0;
    for (const other of [...byIssuer.keys()]) {
      if (other !== issuer && byIssuer.delete(other)) dropped++;
    }
    return dropped;
  }

  async getToken(server: string, subject: string): Promise<StoredToken | undefined> {
    const t = this.tokens.get(server)?.get(subject);
    return t ? { ...t, scope: [...t.scope] } : undefined;
  }

  async putToken(
    server: string,
    subject: string,
    t: Omit<StoredToken, 'version'>,
    expect: number | undefined,
  ): Promise<boolean> {
    const bySubject = this.tokens.get(server) ?? new Map<string, StoredToken>();
    this.tokens.set(server, bySubject);
    const current = bySubject.get(subject);
    if (current?.version !== expect) return false;
    const { expiresAt, ...rest } = t;
    bySubject.set(subject, {
      ...rest,
      scope: [...t.scope],
      ...(expiresAt !== undefined ? { expiresAt } : {}),
      version: (current?.version ?? 0) + 1,
    });
    return true;
  }

  async replaceToken(server: string, subject: string, t: Omit<StoredToken, 'version'>): Promise<number> {
    const bySubject = this.tokens.get(server) ?? new Map<string, StoredToken>();
    this.tokens.set(server, bySubject);
    const version = (bySubject.get(subject)?.version ?? 0) + 1;
    const { expiresAt, ...rest } = t;
    bySubject.set(subject, {
      ...rest,
      scope: [...t.scope],
      ...(expiresAt !== undefined ? { expiresAt } : {}),
      version,
    });
    return version;
  }

  async deleteToken(server: string, subject?: string): Promise<number> {
    const bySubject = this.tokens.get(server);
    if (!bySubject) return 0;
    if (subject !== undefined) return bySubject.delete(subject) ? 1 : 0;
    const n = bySubject.size;
    bySubject.clear();
    return n;
  }

  async listTokens(server: string): Promise<ListedToken[]> {
    const bySubject = this.tokens.get(server);
    if (!bySubject) return [];
    return [...bySubject.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([subject, t]) => ({
        subject,
        issuer: t.issuer,
        scope: [...t.scope],
        ...(t.expiresAt !== undefined ? { expiresAt: t.expiresAt } : {}),
      }));
  }
}
