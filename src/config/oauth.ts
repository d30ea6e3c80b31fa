/**
 * The upstream OAuth keys (#19): `gateway.oauth` (the gateway as an OAuth client) and a server's
 * `auth` (whose identity reaches it), with the rules that span the two. Messages never show a
 * secret, a client secret or a URL's query.
 */
import { isLoopbackHost } from './bind.js';
import { OAUTH_DEFAULTS, SERVER_AUTH_DEFAULTS } from './defaults.js';
import { FIELD_TEXT } from './field-text.js';
import { OAUTH_SECRET_FIX, OAUTH_SHAPE_TEXT, SERVER_AUTH_OBJECT_TEXT } from './field-text-oauth.js';
import { error, type Findings, readSection } from './findings.js';
import type { GatewayRead } from './gateway.js';
import { keysOf } from './json-parse.js';
import type { PathSegment } from './paths.js';
import { OAUTH_KEYS, oauthEntrySchema, SERVER_AUTH_KEYS, serverAuthEntrySchema } from './schema.js';
import type { GatewayOAuthConfig, ServerAuthConfig, ServerConfig } from './types.js';

/** Where the gateway serves its Client ID Metadata Document and its callback (server/http/oauth.ts). */
export const CLIENT_METADATA_PATH = '/oauth/client-metadata.json';
export const CALLBACK_PATH = '/oauth/callback';

/**
 * What is wrong with an OAuth endpoint URL, worded without its value: OAuth 2.1 §1.5 and §7.5.1
 * allow only https, and http for a loopback redirect (a native app's, RFC 8252 §7.3).
 */
function urlProblem(value: string, o: { loopbackHttp: boolean }): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'is not a valid absolute URL';
  }
  const loopback = isLoopbackHost(url.hostname);
  if (url.protocol !== 'https:' && !(o.loopbackHttp && url.protocol === 'http:' && loopback)) {
    return o.loopbackHttp ? 'must be an https URL, or http to a loopback host' : 'must be an https URL';
  }
  if (url.username || url.password) return 'must not carry credentials';
  if (url.hash) return 'must not have a fragment';
  return undefined;
}

/**
 * `gateway.oauth`. `clientMetadataUrl` defaults to advertiseUrl + /oauth/client-metadata.json when
 * advertiseUrl is https (an authorization server fetches it, so it must be public and https);
 * `redirectUri` stays absent and the server wiring fills it from advertiseUrl or the bound address.
 */
export function readGatewayOAuth(
  f: Findings,
  raw: unknown,
  base: PathSegment[],
  advertiseUrl: string | undefined,
): GatewayOAuthConfig | undefined {
  const picked = readSection(f, raw, base, {
    keys: OAUTH_KEYS,
    schema: oauthEntrySchema,
    table: FIELD_TEXT.oauth,
    shape: OAUTH_SHAPE_TEXT,
  });
  if (!picked) return undefined;
  let ok = true;
  for (const key of ['clientMetadataUrl', 'redirectUri'] as const) {
    const value = picked[key];
    if (typeof value !== 'string') continue;
    const problem = urlProblem(value, { loopbackHttp: key === 'redirectUri' });
    if (problem) {
      error(f, [...base, key], problem, FIELD_TEXT.oauth[key]!.fix);
      ok = false;
    }
  }
  if (!ok) return undefined;
  const config: GatewayOAuthConfig = { ...OAUTH_DEFAULTS };
  for (const key of OAUTH_KEYS) {
    if (picked[key] !== undefined) (config as unknown as Record<string, unknown>)[key] = picked[key];
  }
  if (config.clientMetadataUrl === undefined && advertiseUrl?.startsWith('https:')) {
    config.clientMetadataUrl = `${advertiseUrl}${CLIENT_METADATA_PATH}`;
  }
  return config;
}

/**
 * A server's `auth` (its outer shape already checked) in its full form: the string shorthand is the
 * mode; the object's keys are read, interpolated and checked here, unknown ones warned about.
 * Undefined when something was wrong (recorded with its path).
 */
export function readServerAuth(f: Findings, raw: unknown, base: PathSegment[]): ServerAuthConfig | undefined {
  if (typeof raw === 'string') {
    return { mode: raw as ServerAuthConfig['mode'], ...SERVER_AUTH_DEFAULTS, scopes: [] };
  }
  const picked = readSection(f, raw, base, {
    keys: SERVER_AUTH_KEYS,
    schema: serverAuthEntrySchema,
    table: SERVER_AUTH_OBJECT_TEXT,
    shape: FIELD_TEXT.server.auth!,
  });
  if (!picked) return undefined;
  const given = picked as Partial<ServerAuthConfig>;
  return { mode: 'static', ...SERVER_AUTH_DEFAULTS, ...given, scopes: [...(given.scopes ?? [])] };
}

/**
 * The rules of §4.2 of the #19 design, each reported with its path and fix, all at once. `server`
 * is the entry as read so far; `isolationGiven` whether the file set `isolation` (an absent one
 * becomes per-subject for mode user).
 */
export function checkServerAuth(
  f: Findings,
  base: PathSegment[],
  auth: ServerAuthConfig,
  server: Pick<ServerConfig, 'headers' | 'isolation'>,
  isolationGiven: boolean,
  gateway: GatewayRead,
): void {
  const at = [...base, 'auth'];
  const delegated = auth.mode === 'gateway' || auth.mode === 'user' || auth.mode === 'user-key';
  if (delegated && gateway.config.oauth?.secret === undefined && !gateway.invalid.has('oauth')) {
    error(
      f,
      at,
      `uses mode "${auth.mode}", which needs gateway.oauth.secret: the tokens it obtains are stored sealed with a key derived from it`,
      OAUTH_SECRET_FIX,
    );
  }
  // #52: a user-key server's configured key header is the deployment's, which lists its tools.
  if (delegated && auth.mode !== 'user-key') {
    for (const name of keysOf(server.headers)) {
      if (name.toLowerCase() !== 'authorization') continue;
      error(
        f,
        [...base, 'headers', name],
        `is set, but auth mode "${auth.mode}" sends the token it obtains in Authorization`,
        'remove the Authorization header, or remove auth to keep sending the configured one',
      );
    }
  }
  if (auth.grant === 'client_credentials') {
    if (auth.clientId === undefined || auth.clientSecret === undefined) {
      error(
        f,
        [...at, 'grant'],
        'is "client_credentials", which needs a pre-registered client: clientId and clientSecret',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
        'add "clientId" and "clientSecret": "${CLIENT_SECRET}" to auth, or use "grant": "authorization_code"',
      );
    }
    if (auth.mode !== 'gateway') {
      error(
        f,
        [...at, 'grant'],
        `is "client_credentials", which obtains the deployment's own token, but the mode is "${auth.mode}"`,
        'set "mode": "gateway", or use "grant": "authorization_code" for each user\'s own sign-in',
      );
    }
  }
  if (auth.clientSecret !== undefined && auth.clientId === undefined) {
    error(f, [...at, 'clientSecret'], 'is set without clientId', 'add the "clientId" the secret belongs to');
  }
  if (auth.issuer !== undefined) {
    const problem = urlProblem(auth.issuer, { loopbackHttp: true });
    if (problem) {
      error(f, [...at, 'issuer'], problem, FIELD_TEXT.server['auth.issuer']!.fix);
    }
  }
  if (auth.mode === 'user-key') checkUserKey(f, at, auth);
  if (auth.mode === 'user' || auth.mode === 'user-key') {
    if (isolationGiven && server.isolation !== 'per-subject') {
      error(
        f,
        [...base, 'isolation'],
        `is "${server.isolation}", but auth mode "user" sends each caller's own token, so each caller needs a connection of their own`,
        'write "isolation": "per-subject", or remove isolation (mode user implies it)',
      );
    }
    const downstream = gateway.config.auth;
    if ((downstream === undefined || downstream === false) && !gateway.invalid.has('auth')) {
      error(
        f,
        at,
        'uses mode "user", but gateway.auth is off, so callers have no identity of their own to sign in as',
        'configure gateway.auth (JWT verification), or use "auth": "gateway" for one identity shared by every caller',
      );
    }
  }
}

/** #52, mode user-key: a header name the key can travel in, and a format that places the key. */
function checkUserKey(f: Findings, at: PathSegment[], auth: ServerAuthConfig): void {
  if (auth.header !== undefined && !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(auth.header)) {
    error(f, [...at, 'header'], 'is not a valid header name', FIELD_TEXT.server['auth.header']!.fix);
  }
  if (auth.format !== undefined && (!auth.format.includes('{key}') || /[\r\n\0]/.test(auth.format))) {
    error(
      f,
      [...at, 'format'],
      'must contain {key} once, and no line break',
      FIELD_TEXT.server['auth.format']!.fix,
    );
  }
}
