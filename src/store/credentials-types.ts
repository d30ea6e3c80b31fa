import type { TokenAuthMethod } from '../config/types.js';

/**
 * Upstream OAuth credentials at rest (#19). `secret` and `sealed` are SecretBox output
 * (AES-GCM, AAD `server\0subject\0issuer` for tokens, `server\0issuer` for clients): the store
 * never sees a token or a client secret in the clear.
 */
export interface StoredClient {
  clientId: string;
  /** Sealed client secret, when the registration has one. */
  secret?: string;
  authMethod: TokenAuthMethod;
  source: 'dcr' | 'cimd';
  redirectUri: string;
}

export interface StoredToken {
  issuer: string;
  resource: string;
  /**
   * Sealed `{ accessToken, refreshToken?, tokenType, obtainedAt?, clientId?, asked?, stepUp? }`:
   * when and to which client it was issued, the scopes its authorization asked for, and the union
   * a scope step-up waits for travel with the token.
   */
  sealed: string;
  scope: string[];
  /** Epoch ms. */
  expiresAt?: number;
  version: number;
}

export interface CredentialStore {
  /** `key` is the server name, or `server#cli` for the CLI's own loopback registration. */
  getClient(key: string, issuer: string): Promise<StoredClient | undefined>;
  putClient(key: string, issuer: string, client: StoredClient, now: number): Promise<void>;
  /** Drops registrations of `key` for every other issuer (credentials are bound to their issuer); how many. */
  dropClientsExcept(key: string, issuer: string): Promise<number>;
  getToken(server: string, subject: string): Promise<StoredToken | undefined>;
  /**
   * Compare-and-set: writes only when the stored version is `expect` (undefined: no row yet). A
   * refresh or a re-issue writes this way: it continues the token it read, so it never replaces
   * one written since.
   */
  putToken(
    server: string,
    subject: string,
    token: Omit<StoredToken, 'version'>,
    expect: number | undefined,
    now: number,
  ): Promise<boolean>;
  /**
   * Writes whatever is stored (a completed login: the newest sign-in wins, whichever process
   * finished it) and returns the version it took, the stored one plus one. Every writer, on every
   * instance and in the CLI, takes its version from the row, so versions order the tokens.
   */
  replaceToken(
    server: string,
    subject: string,
    token: Omit<StoredToken, 'version'>,
    now: number,
  ): Promise<number>;
  /** One subject's token, or every subject's when `subject` is absent; how many rows went. */
  deleteToken(server: string, subject?: string): Promise<number>;
  /** For status and logout: never the sealed column. */
  listTokens(
    server: string,
  ): Promise<{ subject: string; issuer: string; scope: string[]; expiresAt?: number }[]>;
}
