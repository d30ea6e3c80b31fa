/**
 * Which client the gateway is at one authorization server (#19, client-registration.mdx): the
 * pre-registered one from config, else the CIMD URL when the server supports it, else the DCR
 * registration kept (sealed) in the store for that issuer, else a new DCR registration. Rows are
 * keyed by server name, or `server#cli` for the CLI's own loopback registration (its redirect URI
 * differs), and are bound to one issuer (SEP-2352).
 */
import type { ServerAuthConfig, TokenAuthMethod } from '../../config/types.js';
import type { CredentialStore } from '../../store/credentials-types.js';
import type { SecretBox } from './box.js';
import { obtainClient } from './registration.js';
import type { AsMetadata, Fetch, OAuthClient } from './types.js';

export interface ClientDeps {
  fetch: Fetch;
  credentials: CredentialStore;
  box: SecretBox;
  cimdUrl?: string;
  clientName: string;
  now(): number;
}

export class ClientBook {
  private readonly cache = new Map<string, OAuthClient>();

  constructor(
    private readonly auth: ServerAuthConfig,
    private readonly deps: ClientDeps,
  ) {}

  /** The pre-registered client, with the token-endpoint method the AS lists when none is configured. */
  private configured(as: AsMetadata, redirectUri: string): OAuthClient | undefined {
    const { clientId, clientSecret, issuer, tokenEndpointAuthMethod } = this.auth;
    if (!clientId) return undefined;
    const methods = as.tokenAuthMethods ?? [];
    const method: TokenAuthMethod =
      tokenEndpointAuthMethod ??
      (!clientSecret
        ? 'none'
        : methods.includes('client_secret_post') && !methods.includes('client_secret_basic')
          ? 'client_secret_post'
          : 'client_secret_basic');
    return {
      ...(issuer ? { issuer } : {}),
      clientId,
      ...(clientSecret ? { clientSecret } : {}),
      authMethod: method,
      source: 'config',
      redirectUri,
    };
  }

  private async stored(key: string, as: AsMetadata, redirectUri: string): Promise<OAuthClient | undefined> {
    const row = await this.deps.credentials.getClient(key, as.issuer);
    if (!row || row.redirectUri !== redirectUri) return undefined;
    let clientSecret: string | undefined;
    if (row.secret !== undefined) {
      const opened = await this.deps.box.open(row.secret, `${key}\0${as.issuer}`);
      // Sealed under another key (the secret changed): register again.
      if (typeof opened !== 'string') return undefined;
      clientSecret = opened;
    }
    return {
      issuer: as.issuer,
      clientId: row.clientId,
      ...(clientSecret !== undefined ? { clientSecret } : {}),
      authMethod: row.authMethod,
      source: row.source,
      redirectUri,
    };
  }

  /** The client for `key` at this AS with this redirect URI, registering (and storing) one if needed. */
  async get(key: string, as: AsMetadata, redirectUri: string): Promise<OAuthClient> {
    const id = `${key}\0${as.issuer}\0${redirectUri}`;
    const cached = this.cache.get(id);
    if (cached) return cached;
    const stored = await this.stored(key, as, redirectUri);
    const configured = this.configured(as, redirectUri);
    const { client, registered } = await obtainClient(this.deps.fetch, as, {
      ...(configured ? { configured } : {}),
      ...(this.deps.cimdUrl ? { cimdUrl: this.deps.cimdUrl } : {}),
      ...(stored ? { stored } : {}),
      redirectUri,
      clientName: this.deps.clientName,
      grantTypes:
        this.auth.grant === 'client_credentials'
          ? ['client_credentials']
          : ['authorization_code', 'refresh_token'],
    });
    if (registered && client.source !== 'config') {
      const secret =
        client.clientSecret !== undefined
          ? await this.deps.box.seal(client.clientSecret, `${key}\0${as.issuer}`)
          : undefined;
      await this.deps.credentials.putClient(
        key,
        as.issuer,
        {
          clientId: client.clientId,
          ...(secret !== undefined ? { secret } : {}),
          authMethod: client.authMethod,
          source: client.source,
          redirectUri,
        },
        this.deps.now(),
      );
    }
    this.cache.set(id, client);
    return client;
  }

  /**
   * The client a stored token was issued to, for refresh and revocation: the one whose id the
   * token names (the gateway's registration, or the CLI's for a token from `manifold login`:
   * both exist once each has signed in). A token stored without one gets the gateway's own
   * client, else the CLI's.
   */
  async forToken(
    server: string,
    as: AsMetadata,
    gatewayRedirect: string,
    clientId?: string,
  ): Promise<OAuthClient | undefined> {
    const fits = (c: OAuthClient | undefined) =>
      c !== undefined && (clientId === undefined || c.clientId === clientId);
    const configured = this.configured(as, gatewayRedirect);
    if (fits(configured)) return configured;
    if (this.deps.cimdUrl && as.cimdSupported) {
      const cimd: OAuthClient = {
        clientId: this.deps.cimdUrl,
        authMethod: 'none',
        source: 'cimd',
        redirectUri: gatewayRedirect,
      };
      if (fits(cimd)) return cimd;
    }
    for (const key of [server, `${server}#cli`]) {
      const row = await this.deps.credentials.getClient(key, as.issuer);
      if (row) {
        const c = await this.stored(key, as, row.redirectUri);
        if (fits(c)) return c;
      }
    }
    return undefined;
  }

  /** Credentials are bound to their issuer: a new one drops the others' registrations. */
  async rebind(server: string, issuer: string): Promise<void> {
    for (const key of [server, `${server}#cli`]) await this.deps.credentials.dropClientsExcept(key, issuer);
    for (const id of [...this.cache.keys()]) if (id.split('\0')[1] !== issuer) this.cache.delete(id);
  }
}
