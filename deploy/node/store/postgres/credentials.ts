/**
 * Upstream OAuth credentials on Postgres (#19): the same rules as SqlCredentialStore
 * (src/store/credentials.ts) over the state store's pool, so that every instance of a deployment
 * uses the token the first one obtained, and a refresh raced by two instances is written once (the
 * UPDATE's `WHERE version = $n` decides; the loser re-reads the row).
 */
import type pg from 'pg';
import {
  type ListedToken,
  parseClient,
  parseListed,
  parseToken,
  scopeText,
} from '../../../../src/store/credentials.js';
import type { CredentialStore, StoredClient, StoredToken } from '../../../../src/store/credentials-types.js';

const CLIENT_COLUMNS = 'client_id, secret, auth_method, source, redirect_uri';
const TOKEN_COLUMNS = 'issuer, resource, sealed, scope, expires_at, version';

const PUT_CLIENT = `INSERT INTO manifold_oauth_clients (server, issuer, ${CLIENT_COLUMNS}, created_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
  ON CONFLICT (server, issuer) DO UPDATE SET client_id = excluded.client_id, secret = excluded.secret,
    auth_method = excluded.auth_method, source = excluded.source, redirect_uri = excluded.redirect_uri,
    created_at = excluded.created_at`;
const INSERT_TOKEN = `INSERT INTO manifold_oauth_tokens (server, subject, ${TOKEN_COLUMNS}, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8)
  ON CONFLICT (server, subject) DO NOTHING RETURNING version`;
const UPDATE_TOKEN = `UPDATE manifold_oauth_tokens SET issuer = $1, resource = $2, sealed = $3, scope = $4,
    expires_at = $5, version = version + 1, updated_at = $6
  WHERE server = $7 AND subject = $8 AND version = $9 RETURNING version`;
// A login's write: the row whatever it holds, one version past it (see src/store/credentials.ts).
const REPLACE_TOKEN = `INSERT INTO manifold_oauth_tokens (server, subject, ${TOKEN_COLUMNS}, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8)
  ON CONFLICT (server, subject) DO UPDATE SET issuer = excluded.issuer, resource = excluded.resource,
    sealed = excluded.sealed, scope = excluded.scope, expires_at = excluded.expires_at,
    version = manifold_oauth_tokens.version + 1, updated_at = excluded.updated_at
  RETURNING version`;

type Value = string | number | null;

export class PostgresCredentialStore implements CredentialStore {
  constructor(private readonly pool: pg.Pool) {}

  async getClient(key: string, issuer: string): Promise<StoredClient | undefined> {
    const row = await this.one(
      `SELECT ${CLIENT_COLUMNS} FROM manifold_oauth_clients WHERE server = $1 AND issuer = $2`,
      [key, issuer],
    );
    return row ? parseClient(row) : undefined;
  }

  async putClient(key: string, issuer: string, c: StoredClient, now: number): Promise<void> {
    await this.pool.query(PUT_CLIENT, [
      key,
      issuer,
      c.clientId,
      c.secret ?? null,
      c.authMethod,
      c.source,
      c.redirectUri,
      now,
    ]);
  }

  dropClientsExcept(key: string, issuer: string): Promise<number> {
    return this.count('DELETE FROM manifold_oauth_clients WHERE server = $1 AND issuer <> $2', [key, issuer]);
  }

  async getToken(server: string, subject: string): Promise<StoredToken | undefined> {
    const row = await this.one(
      `SELECT ${TOKEN_COLUMNS} FROM manifold_oauth_tokens WHERE server = $1 AND subject = $2`,
      [server, subject],
    );
    return row ? parseToken(row) : undefined;
  }

  async putToken(
    server: string,
    subject: string,
    t: Omit<StoredToken, 'version'>,
    expect: number | undefined,
    now: number,
  ): Promise<boolean> {
    const values: Value[] = [t.issuer, t.resource, t.sealed, scopeText(t.scope), t.expiresAt ?? null];
    const written =
      expect === undefined
        ? await this.count(INSERT_TOKEN, [server, subject, ...values, now])
        : await this.count(UPDATE_TOKEN, [...values, now, server, subject, expect]);
    return written > 0;
  }

  async replaceToken(
    server: string,
    subject: string,
    t: Omit<StoredToken, 'version'>,
    now: number,
  ): Promise<number> {
    const values: Value[] = [t.issuer, t.resource, t.sealed, scopeText(t.scope), t.expiresAt ?? null];
    const row = await this.one(REPLACE_TOKEN, [server, subject, ...values, now]);
    const version = row?.version;
    if (typeof version !== 'number' || !Number.isSafeInteger(version))
      throw new Error('the token row took no version');
    return version;
  }

  deleteToken(server: string, subject?: string): Promise<number> {
    return subject === undefined
      ? this.count('DELETE FROM manifold_oauth_tokens WHERE server = $1', [server])
      : this.count('DELETE FROM manifold_oauth_tokens WHERE server = $1 AND subject = $2', [server, subject]);
  }

  async listTokens(server: string): Promise<ListedToken[]> {
    // COLLATE "C": byte order, as SQLite and the memory store sort, whatever the database's locale.
    const { rows } = await this.pool.query<Record<string, unknown>>(
      `SELECT subject, issuer, scope, expires_at FROM manifold_oauth_tokens WHERE server = $1
       ORDER BY subject COLLATE "C"`,
      [server],
    );
    return rows.map(parseListed).filter((r): r is ListedToken => r !== undefined);
  }

  private async one(query: string, values: Value[]): Promise<Record<string, unknown> | undefined> {
    const { rows } = await this.pool.query<Record<string, unknown>>(query, values);
    return rows[0];
  }

  private async count(query: string, values: Value[]): Promise<number> {
    const { rowCount } = await this.pool.query(query, values);
    return rowCount ?? 0;
  }
}
