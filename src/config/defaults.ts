/**
 * Defaults and limits of the config: what the gateway and `gateway.auth` use when a key is not
 * set, the bounds the shapes enforce, and the JWS algorithms and key sources auth accepts.
 */
import type { LogLevel } from '../lib/log.js';
import type { AuthConfig, GatewayConfig, GatewayOAuthConfig, ServerAuthConfig } from './types.js';

/** Where the Node host keeps drift baselines and the catalog cache unless `gateway.store` says otherwise. */
export const DEFAULT_STORE_PATH = './.manifold/state.db';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const satisfies readonly LogLevel[];

/** The official MCP Registry (#54): where `manifold add` looks servers up by default. */
export const DEFAULT_REGISTRY_URL = 'https://registry.modelcontextprotocol.io';

export const GATEWAY_DEFAULTS: Readonly<GatewayConfig> = Object.freeze({
  registry: Object.freeze({ url: DEFAULT_REGISTRY_URL }),
  host: '127.0.0.1',
  port: 8787,
  logLevel: 'info',
  allowedOrigins: Object.freeze([]) as unknown as string[],
  hostnames: Object.freeze([]) as unknown as string[],
  maxBodyBytes: 1_048_576,
  maxSessions: 10_000,
  maxSessionsPerPrincipal: 100,
  maxSessionsPerTenant: 1000,
  sessionIdleSeconds: 3600,
  maxBatchMessages: 100,
  maxBatchAnswerBytes: 4_194_304,
  maxHeldCalls: 10_000,
  maxHeldCallsPerPrincipal: 100,
  maxHeldCallsPerTenant: 1000,
  maxTasksAwaitingInput: 1000,
  maxTasksAwaitingInputPerPrincipal: 20,
  maxTasksAwaitingInputPerTenant: 100,
  maxListenStreams: 10_000,
  maxListenStreamsPerPrincipal: 16,
  maxListenStreamsPerTenant: 1000,
  callTimeoutMs: 60_000,
  maxCallTimeoutMs: 600_000,
  connectTimeoutMs: 15_000,
  coldStartMs: 5000,
  listTimeoutMs: 15_000,
  maxListPages: 100,
  pageSize: 500,
  shutdownGraceMs: 10_000,
  streamPollMs: 0,
  metricsPath: '/metrics',
  statusPath: '/',
  watchConfig: true,
  allowedHosts: Object.freeze([]) as unknown as string[],
  maxResultBytes: 65_536,
  maxUpstreamBodyBytes: 8_388_608,
  maxSchemaBytes: 20_480,
  maxDescriptionBytes: 4096,
  maxToolsPerServer: 1000,
  disclosure: Object.freeze({
    budgetTokens: 20_000,
    alwaysLoad: Object.freeze([]) as unknown as string[],
  }),
  store: Object.freeze({ path: DEFAULT_STORE_PATH }),
  tracing: false,
  drift: Object.freeze({ recheckSeconds: 300 }),
  catalog: Object.freeze({
    mode: 'full' as const,
    maxTools: 128,
    pin: Object.freeze([]) as unknown as string[],
    searchLimit: 10,
  }),
  // Local servers (#53).
  sandbox: false,
  serverDataDir: './.manifold/servers',
  maxRunningServers: 0,
  code: Object.freeze({
    timeoutMs: 30_000,
    cpuMs: 5000,
    memoryBytes: 67_108_864,
    maxCalls: 50,
    maxLogBytes: 16_384,
    approval: 'allow' as const,
    approvalTimeoutSeconds: 120,
  }),
});

/** setTimeout fires at once for anything above this, so millisecond settings stop here. */
export const MAX_TIMER_MS = 2_147_483_647;
/** The same bound for settings in whole seconds. */
export const MAX_TIMER_SECONDS = Math.floor(MAX_TIMER_MS / 1000);
export const MAX_PAGE_SIZE = 10_000;
export const MAX_NAME_LENGTH = 32;
export const RESERVED_NAME = 'manifold';

export const TRANSPORT_TYPES = ['stdio', 'streamable-http', 'http', 'sse'] as const;

// --- gateway.auth ------------------------------------------------------------------------------

/** JWS algorithms a token may be verified with (RFC 7518 §3.1, RFC 8037). `none` is never one. */
export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;
export const SYMMETRIC_ALGORITHMS = ['HS256', 'HS384', 'HS512'] as const;
export const JWS_ALGORITHMS = [...ASYMMETRIC_ALGORITHMS, ...SYMMETRIC_ALGORITHMS] as const;
/**
 * Accepted when listed, never a default: RFC 9864's fully specified `Ed25519`, the same key and
 * signature scheme as `EdDSA` (which stays the default for Ed25519 keys).
 */
export const OPT_IN_ALGORITHMS = ['Ed25519'] as const;

/** The four ways to give the verification key; exactly one must be set. */
export const KEY_SOURCES = ['jwksUrl', 'jwksFile', 'publicKey', 'secret'] as const;
export type KeySource = (typeof KEY_SOURCES)[number];

/** The shortest HMAC secret accepted, in bytes: the hash output size (RFC 7518 §3.2). */
export const MIN_SECRET_BYTES: Readonly<Record<(typeof SYMMETRIC_ALGORITHMS)[number], number>> = {
  HS256: 32,
  HS384: 48,
  HS512: 64,
};
export const MAX_CLOCK_TOLERANCE_SECONDS = 60;
/** A JWKS fetch must give up quickly (SECURITY A11), so its timeout is capped. */
export const MAX_JWKS_TIMEOUT_MS = 60_000;

export const AUTH_DEFAULTS: Readonly<
  Pick<
    AuthConfig,
    | 'clockToleranceSeconds'
    | 'tenantClaim'
    | 'tenants'
    | 'authorizationServers'
    | 'jwksCooldownSeconds'
    | 'jwksTimeoutMs'
    | 'maxTokenLifetimeSeconds'
    | 'tokenTypes'
  >
> = Object.freeze({
  maxTokenLifetimeSeconds: 86_400,
  tokenTypes: Object.freeze(['JWT', 'at+jwt']) as unknown as string[],
  clockToleranceSeconds: 30,
  tenantClaim: 'sub',
  tenants: Object.freeze({}) as Record<string, never>,
  authorizationServers: Object.freeze([]) as unknown as string[],
  jwksCooldownSeconds: 30,
  jwksTimeoutMs: 5000,
});

// --- upstream OAuth (#19): a server's `auth`, and `gateway.oauth` ------------------------------

// #52: `user-key`, each caller's own key (not OAuth), given on a gateway page and kept sealed.
export const AUTH_MODES = ['static', 'gateway', 'user', 'user-key'] as const;
export const AUTH_GRANTS = ['authorization_code', 'client_credentials'] as const;
export const TOKEN_AUTH_METHODS = ['client_secret_basic', 'client_secret_post', 'none'] as const;
/** Re-authorizations for one scope challenge, at most. */
export const MAX_STEP_UPS = 5;
/** The shortest `gateway.oauth.secret`, in characters (the AES key is derived from it with HKDF). */
export const MIN_OAUTH_SECRET_LENGTH = 32;
export const FLOW_TTL_SECONDS = { min: 60, max: 3600 } as const;
export const REFRESH_SKEW_SECONDS = { min: 0, max: 600 } as const;

export const SERVER_AUTH_DEFAULTS: Readonly<Omit<ServerAuthConfig, 'mode'>> = Object.freeze({
  grant: 'authorization_code' as const,
  scopes: Object.freeze([]) as unknown as string[],
  maxStepUps: 2,
});

export const OAUTH_DEFAULTS: Readonly<
  Pick<GatewayOAuthConfig, 'clientName' | 'flowTtlSeconds' | 'refreshSkewSeconds'>
> = Object.freeze({ clientName: 'Manifold', flowTtlSeconds: 600, refreshSkewSeconds: 60 });
