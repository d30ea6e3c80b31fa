/**
 * Every protected upstream's UpstreamAuth, built once from the config, the credential store and
 * the SecretBox (#19). Node's serve.ts and the Worker hand the result to the Gateway; the
 * callback route and the CLI complete logins through it.
 */
import { OAUTH_DEFAULTS } from '../../config/defaults.js';
import { CALLBACK_PATH } from '../../config/oauth.js';
import type { Config, ServerConfig } from '../../config/types.js';
import type { Platform } from '../../platform.js';
import type { CredentialStore } from '../../store/credentials-types.js';
import type { StateStore } from '../../store/state.js';
import { UserKeyAuth } from '../user-key.js';
import type { UpstreamAuth } from './auth-fetch.js';
import { SecretBox } from './box.js';
import { createUpstreamAuth, OAuthManager } from './manager.js';
import { createStaticAuth } from './static-auth.js';

/** The HKDF label of the key for credentials at rest (docs/security.md). */
export const CREDENTIALS_LABEL = 'manifold/upstream-credentials/v1';

export interface RegistryOptions {
  platform: Platform;
  credentials: CredentialStore;
  claims: Pick<StateStore, 'claim'>;
  /** Where the AS sends the browser back: read when a login begins (the port may be known late). */
  redirectUri(): string;
  /** Adds a value re-read at run time (a rotated static secret) to the log redaction set. */
  addSecret?(value: string): void;
}

/** Whether a server needs an UpstreamAuth: OAuth, or a static `${VAR}` header that can be re-read. */
export function isProtected(s: ServerConfig, platform: Pick<Platform, 'readSecret'>): boolean {
  if (!s.url || s.disabled) return false;
  const mode = s.auth?.mode ?? 'static';
  if (mode !== 'static') return true;
  return (
    platform.readSecret !== undefined &&
    Object.values(s.headerTemplates ?? {}).some((t) => /\$\{[A-Za-z_]/.test(t))
  );
}

/** The gateway's redirect URI: configured, else the advertised origin's, else the bound address's. */
export function defaultRedirectUri(config: Config, bound?: { host: string; port: number }): string {
  const g = config.gateway;
  if (g.oauth?.redirectUri) return g.oauth.redirectUri;
  if (g.advertiseUrl) return `${new URL(g.advertiseUrl).origin}${CALLBACK_PATH}`;
  const host = bound?.host ?? g.host;
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${shown}:${bound?.port ?? g.port}${CALLBACK_PATH}`;
}

export async function createUpstreamAuths(
  config: Config,
  o: RegistryOptions,
): Promise<Map<string, UpstreamAuth>> {
  const out = new Map<string, UpstreamAuth>();
  const servers = config.servers.filter((s) => isProtected(s, o.platform));
  if (servers.length === 0) return out;
  const oauth = { ...OAUTH_DEFAULTS, ...config.gateway.oauth };
  const readSecret = o.platform.readSecret ? (n: string) => o.platform.readSecret?.(n) : undefined;
  const log = o.platform.log;
  const usesOAuth = servers.some(
    (s) => s.auth?.mode === 'gateway' || s.auth?.mode === 'user' || s.auth?.mode === 'user-key',
  );
  // The config check requires a secret whenever a server uses OAuth; static servers need no key.
  const box =
    usesOAuth && oauth.secret
      ? await SecretBox.create(new TextEncoder().encode(oauth.secret), CREDENTIALS_LABEL)
      : undefined;
  const gateway = {
    ...oauth,
    get redirectUri() {
      return o.redirectUri();
    },
  };
  for (const s of servers) {
    const mode = s.auth?.mode ?? 'static';
    if (mode === 'static' || !box) {
      if (mode !== 'static')
        log.warn('oauth.no_secret', { server: s.name, message: 'gateway.oauth.secret is not set' });
      out.set(
        s.name,
        createStaticAuth(s, {
          log,
          ...(readSecret ? { readSecret } : {}),
          ...(o.addSecret ? { addSecret: o.addSecret } : {}),
        }),
      );
      continue;
    }
    if (mode === 'user-key') {
      // #52: each caller's own key, given on the gateway's page, sealed like a user's tokens.
      const base = () => new URL(o.redirectUri()).origin;
      out.set(
        s.name,
        new UserKeyAuth(s, { credentials: o.credentials, box, log, now: () => o.platform.now(), base }),
      );
      continue;
    }
    const auth = createUpstreamAuth(s, {
      fetch: o.platform.fetch,
      credentials: o.credentials,
      claims: o.claims,
      box,
      gateway,
      log,
      now: () => o.platform.now(),
      ...(readSecret ? { readSecret } : {}),
      ...(o.addSecret ? { addSecret: o.addSecret } : {}),
    });
    // The deployment identity's state is known before the first request (status, /healthz).
    if (auth instanceof OAuthManager) await auth.preload('');
    out.set(s.name, auth);
  }
  return out;
}
