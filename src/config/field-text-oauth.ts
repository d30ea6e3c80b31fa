/**
 * Wording for the upstream OAuth keys (#19): a server's `auth` and `gateway.oauth`. Nothing here
 * ever echoes a value (a client secret or the oauth secret may be one).
 */
import { FLOW_TTL_SECONDS, MAX_STEP_UPS, MIN_OAUTH_SECRET_LENGTH, REFRESH_SKEW_SECONDS } from './defaults.js';
import type { FieldText } from './field-text-policy.js';

const AUTH_FIX =
  'write "auth": "gateway" (the gateway signs in once), "auth": "user" (each caller signs in) or "auth": {"mode": "gateway", "scopes": ["repo"]}; remove auth for the configured headers';

/** Keys of a server entry's `auth`, in the server table. */
export const SERVER_AUTH_TEXT: Record<string, FieldText> = {
  auth: { expected: '"static", "gateway", "user", "user-key", or an object with "mode"', fix: AUTH_FIX },
  'auth.mode': {
    expected: '"static", "gateway", "user" or "user-key"',
    fix: 'write "static" (the configured headers, the default), "gateway" (one identity for the deployment), "user" (each caller\'s own OAuth sign-in) or "user-key" (each caller\'s own key)',
  },
  // #52: mode user-key.
  'auth.header': {
    expected: 'a header name',
    fix: 'write the header the server reads its key from, e.g. "Authorization" (the default) or "X-API-Key"',
  },
  'auth.format': {
    expected: 'a string containing {key}',
    fix: 'write how the key is sent, e.g. "Bearer {key}" (the default) or "{key}"',
  },
  'auth.grant': {
    expected: '"authorization_code" or "client_credentials"',
    fix: 'write "authorization_code" (a person signs in, the default) or "client_credentials" (a machine client with clientId and clientSecret)',
  },
  'auth.clientId': {
    expected: 'a non-empty string',
    fix: 'write the client ID your authorization server issued for the gateway, or remove it to register automatically',
  },
  'auth.clientSecret': {
    expected: 'a non-empty string',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
    fix: 'put the client secret in an environment variable and write "clientSecret": "${GITHUB_CLIENT_SECRET}"',
  },
  'auth.tokenEndpointAuthMethod': {
    expected: '"client_secret_basic", "client_secret_post" or "none"',
    fix: "write the method your client was registered with, or remove it to choose from the authorization server's metadata",
  },
  'auth.issuer': {
    expected: 'an https URL string',
    fix: 'write the issuer of the authorization server the client was registered at, e.g. "https://github.com/login/oauth"',
  },
  'auth.scopes': { expected: 'an array of scope strings', fix: 'write scopes as ["repo", "read:org"]' },
  'auth.scopes[]': { expected: 'a non-empty scope string', fix: 'write a scope such as "repo"' },
  'auth.maxStepUps': {
    expected: `an integer from 0 to ${MAX_STEP_UPS}`,
    fix: 'write a whole number without quotes, e.g. 2 (the default: at most 3 authorizations for one scope challenge)',
  },
};

/** The same, keyed inside the `auth` object (oauth.ts checks it on its own). */
export const SERVER_AUTH_OBJECT_TEXT: Record<string, FieldText> = Object.fromEntries(
  Object.entries(SERVER_AUTH_TEXT).flatMap(([k, v]) => (k.startsWith('auth.') ? [[k.slice(5), v]] : [])),
);

export const OAUTH_SECRET_FIX =
  // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
  'generate one with `openssl rand -base64 48`, put it in an environment variable and write "oauth": {"secret": "${MANIFOLD_OAUTH_SECRET}"}; every instance of one deployment uses the same value';

/** Keys of `gateway.oauth`. */
export const OAUTH_TEXT: Record<string, FieldText> = {
  secret: { expected: `a string of at least ${MIN_OAUTH_SECRET_LENGTH} characters`, fix: OAUTH_SECRET_FIX },
  clientMetadataUrl: {
    expected: 'an https URL string',
    fix: 'write the https URL the gateway serves its client metadata at, e.g. "https://gw.example.com/oauth/client-metadata.json", or remove it',
  },
  clientName: {
    expected: 'a non-empty string',
    fix: 'write the name the sign-in page shows, e.g. "Manifold"',
  },
  redirectUri: {
    expected: 'an http(s) URL string',
    fix: 'write the URL the gateway serves its callback at, e.g. "https://gw.example.com/oauth/callback", or remove it',
  },
  flowTtlSeconds: {
    expected: `an integer from ${FLOW_TTL_SECONDS.min} to ${FLOW_TTL_SECONDS.max} (seconds)`,
    fix: 'write a whole number of seconds without quotes, e.g. 600',
  },
  refreshSkewSeconds: {
    expected: `an integer from ${REFRESH_SKEW_SECONDS.min} to ${REFRESH_SKEW_SECONDS.max} (seconds)`,
    fix: 'write a whole number of seconds without quotes, e.g. 60',
  },
};

export const OAUTH_SHAPE_TEXT: FieldText = {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
  expected: 'an object such as {"secret": "${MANIFOLD_OAUTH_SECRET}"}',
  fix: OAUTH_SECRET_FIX,
};
