/**
 * The shapes of a config file (zod 4, its mini API) and the key lists derived from them. Defaults,
 * wording and the translation of zod's findings live in their own modules.
 */
// zod's mini API: the same checks and findings as the classic one, a twentieth of its code to
// load before the gateway can listen (start-up time). Imported as `zod/v4-mini`, the specifier
// the SDK uses too: in the one-file Workers bundle, where the SDK's modules are initialised
// lazily, esbuild skipped the initialisation of the mini schemas behind `zod/mini`'s re-exports,
// and the Worker failed to start ("Class2 is not a constructor").
import * as z from 'zod/v4-mini';
import { APPROVAL_PRESETS, APPROVAL_VIA, RISK_CLASSES } from '../guards/risk.js';
import {
  AUTH_GRANTS,
  AUTH_MODES,
  FLOW_TTL_SECONDS,
  LOG_LEVELS,
  MAX_CLOCK_TOLERANCE_SECONDS,
  MAX_JWKS_TIMEOUT_MS,
  MAX_PAGE_SIZE,
  MAX_STEP_UPS,
  MAX_TIMER_MS,
  MAX_TIMER_SECONDS,
  MIN_OAUTH_SECRET_LENGTH,
  REFRESH_SKEW_SECONDS,
  TOKEN_AUTH_METHODS,
  TRANSPORT_TYPES,
} from './defaults.js';
import type { GatewayConfig } from './types.js';

// ---------------------------------------------------------------------------------------------
// Shapes. Every key is optional; defaults, cross-field rules and transport rules live in the readers
// (gateway.ts, auth.ts, server-entry.ts, servers.ts).

const int = (min: number, max?: number) =>
  max === undefined ? z.int().check(z.minimum(min)) : z.int().check(z.minimum(min), z.maximum(max));
const count = () => int(1);
const millis = () => int(1, MAX_TIMER_MS);
const text = () => z.string().check(z.minLength(1));
const texts = () => z.array(text());
/** A disclosure budget in tokens, or "off" to inline everything. */
const budget = () => z.union([count(), z.literal('off')]);

export const disclosureSchema = z.object({
  budgetTokens: budget(),
  alwaysLoad: texts(),
});

export const driftSchema = z.object({
  // 0 turns the periodic recheck off.
  recheckSeconds: int(0, MAX_TIMER_SECONDS),
});

/** The most tools one `manifold__search_tools` answer may hold. */
export const MAX_SEARCH_LIMIT = 50;

const catalogShape = {
  mode: z.enum(['full', 'search', 'code']),
  maxTools: count(),
  pin: texts(),
  searchLimit: int(1, MAX_SEARCH_LIMIT),
};
export const catalogSchema = z.object(catalogShape);

/** `gateway.code` (#50): the limits of one code-mode run. */
export const codeSchema = z.object({
  timeoutMs: int(1, MAX_TIMER_MS),
  cpuMs: int(1, MAX_TIMER_MS),
  memoryBytes: int(1_048_576, 1_073_741_824),
  maxCalls: int(1, 10_000),
  maxLogBytes: int(0, 16_777_216),
  approval: z.enum(['allow', 'ask']),
  approvalTimeoutSeconds: int(1, MAX_TIMER_SECONDS),
});

/** One entry of the top-level `profiles` map (profiles.ts reads it). */
export const profileSchema = z.object({
  servers: texts(),
  tools: texts(),
  catalog: z.partial(z.strictObject(catalogShape)),
  budgetTokens: budget(),
});

// `gateway.store` is `false` or this object; gateway.ts reads it on its own, like `auth`.
export const storeSchema = z.object({
  path: text(),
  postgres: text(),
});

// `gateway.tracing` is `false` or this object; tracing.ts reads it on its own, like `store`.
export const tracingSchema = z.object({
  otlpEndpoint: text(),
  serviceName: text(),
});

// `gateway.oauth` (#19): the gateway as an OAuth client of its upstreams; oauth.ts reads it on its
// own, like `store`. Values of `secret` never appear in messages (field-text-oauth.ts).
export const oauthSchema = z.object({
  secret: z.string().check(z.minLength(MIN_OAUTH_SECRET_LENGTH)),
  // Checked as URLs in oauth.ts (https for the metadata document; http(s) for the callback).
  clientMetadataUrl: text(),
  clientName: text(),
  redirectUri: text(),
  flowTtlSeconds: int(FLOW_TTL_SECONDS.min, FLOW_TTL_SECONDS.max),
  refreshSkewSeconds: int(REFRESH_SKEW_SECONDS.min, REFRESH_SKEW_SECONDS.max),
});

/** A server's `auth` object (#19); the string shorthand is its `mode`. */
export const serverAuthSchema = z.object({
  mode: z.enum(AUTH_MODES),
  grant: z.enum(AUTH_GRANTS),
  clientId: text(),
  clientSecret: text(),
  tokenEndpointAuthMethod: z.enum(TOKEN_AUTH_METHODS),
  issuer: text(),
  scopes: texts(),
  maxStepUps: int(0, MAX_STEP_UPS),
  // #52, mode user-key: where the caller's key goes, and how (checked in oauth.ts).
  header: text(),
  format: text(),
});

export const gatewaySchema = z.object({
  host: text(),
  port: int(1, 65535),
  logLevel: z.enum(LOG_LEVELS),
  allowedOrigins: texts(),
  hostnames: texts(),
  maxBodyBytes: count(),
  maxSessions: count(),
  maxSessionsPerPrincipal: count(),
  maxSessionsPerTenant: count(),
  sessionIdleSeconds: count(),
  maxBatchMessages: count(),
  maxBatchAnswerBytes: count(),
  maxHeldCalls: count(),
  maxHeldCallsPerPrincipal: count(),
  maxHeldCallsPerTenant: count(),
  maxTasksAwaitingInput: count(),
  maxTasksAwaitingInputPerPrincipal: count(),
  maxTasksAwaitingInputPerTenant: count(),
  maxListenStreams: count(),
  maxListenStreamsPerPrincipal: count(),
  maxListenStreamsPerTenant: count(),
  callTimeoutMs: millis(),
  maxCallTimeoutMs: millis(),
  connectTimeoutMs: millis(),
  coldStartMs: millis(),
  listTimeoutMs: millis(),
  maxListPages: count(),
  pageSize: int(1, MAX_PAGE_SIZE),
  shutdownGraceMs: millis(),
  streamPollMs: int(0, MAX_TIMER_MS),
  // A path, or false for none; which paths are taken is checked in gateway.ts.
  metricsPath: z.union([text(), z.literal(false)]),
  // A path, or false for no status page; where it may point is checked in gateway.ts (statusPathProblem).
  statusPath: z.union([z.string(), z.literal(false)]),
  watchConfig: z.boolean(),
  // Empty entries are rejected in hosts.ts, so that one bad entry does not hide the others.
  allowedHosts: z.array(z.string()),
  maxResultBytes: count(),
  maxUpstreamBodyBytes: count(),
  maxSchemaBytes: count(),
  maxDescriptionBytes: count(),
  maxToolsPerServer: count(),
  disclosure: z.partial(disclosureSchema),
  callsPerMinute: count(),
  drift: z.partial(driftSchema),
  catalog: z.partial(catalogSchema),
  code: z.partial(codeSchema),
  // Values never appear in messages (field-text.ts words them without the value).
  cursorSecret: z.string().check(z.minLength(32)),
  // Checked as a URL in gateway.ts (an http(s) origin, without credentials or a path).
  advertiseUrl: text(),
  // #52: the admin API; whether the file's servers may be changed through it.
  admin: z.partial(z.strictObject({ fileServers: z.enum(['locked', 'editable']) })),
  // Local servers (#53); `sandbox` has its own reader (sandbox.ts), like `store`.
  serverDataDir: text(),
  maxRunningServers: int(0),
});

/** The longest a person may be given to answer an approval (one hour). */
export const MAX_APPROVAL_SECONDS = 3600;
/** The longest a queued approval may wait for an operator (30 days). */
export const MAX_QUEUE_TTL_SECONDS = 30 * 86_400;
/** Resends of one call, at most. */
export const MAX_RETRY = 5;

const glob = () => texts();

/** A server's `protocol`: find its era by probing, or pin one (the legacy pin runs initialize). */
export const PROTOCOL_SETTINGS = ['auto', '2026-07-28', '2025-11-25'] as const;

export const toolsSchema = z.object({ allow: glob(), deny: glob() });

/** `approval` written as an object; also checked alone, so each bad field is named (server-entry.ts). */
export const approvalObjectSchema = z.partial(
  z.strictObject({
    preset: z.enum(APPROVAL_PRESETS),
    ask: glob(),
    deny: glob(),
    allow: glob(),
    timeoutSeconds: int(1, MAX_APPROVAL_SECONDS),
    // #52: the approvals queue; `notify` is checked as a URL in server-checks.ts.
    via: z.enum(APPROVAL_VIA),
    queueTtlSeconds: int(60, MAX_QUEUE_TTL_SECONDS),
    notify: text(),
  }),
);

export const serverEntrySchema = z.object({
  type: z.enum(TRANSPORT_TYPES),
  command: text(),
  args: z.array(z.string()),
  env: z.record(z.string(), z.string()),
  cwd: text(),
  url: text(),
  headers: z.record(z.string(), z.string()),
  prefix: z.union([z.string(), z.literal(false)]),
  tools: z.partial(toolsSchema),
  prompts: z.partial(toolsSchema),
  resources: z.partial(toolsSchema),
  timeoutMs: millis(),
  disabled: z.boolean(),
  maxResultBytes: count(),
  budgetTokens: budget(),
  protocol: z.enum(PROTOCOL_SETTINGS),
  isolation: z.enum(['shared', 'per-tenant', 'per-subject']),
  maxInstances: count(),
  instanceIdleSeconds: count(),
  clientFeatures: z.partial(
    z.strictObject({ elicitation: z.boolean(), sampling: z.boolean(), roots: z.boolean() }),
  ),
  risk: z.record(text(), z.enum(RISK_CLASSES)),
  trustAnnotations: z.boolean(),
  approval: z.union([z.enum(APPROVAL_PRESETS), glob(), approvalObjectSchema]),
  retry: int(0, MAX_RETRY),
  // The object's keys are read and checked in oauth.ts, so that each finding names its key.
  auth: z.union([z.enum(AUTH_MODES), z.record(z.string(), z.unknown())]),
  // #54: read key by key in overrides.ts, so that each finding names its path.
  overrides: z.record(z.string(), z.unknown()),
  promptOverrides: z.record(z.string(), z.unknown()),
  trust: z.enum(['first-use', 'review']),
  // Local servers (#53): the object's keys are read and checked in sandbox.ts.
  sandbox: z.union([z.boolean(), z.record(z.string(), z.unknown())]),
  start: z.enum(['eager', 'lazy']),
  idleStopSeconds: int(0, 30 * 86_400),
});

export const gatewayEntrySchema = z.partial(gatewaySchema);
export const serverSchema = z.partial(serverEntrySchema);

// --- gateway.auth ------------------------------------------------------------------------------

export const tenantSchema = z.object({
  grants: glob(),
  callsPerMinute: count(),
});

// `tenants` entries are read one by one in auth.ts (unknown keys warn), then checked with tenantSchema.
export const authSchema = z.object({
  issuer: text(),
  audience: text(),
  jwksUrl: text(),
  jwksFile: text(),
  publicKey: text(),
  // Length and content rules for the key sources live in auth-checks.ts, so messages never show values.
  secret: z.string(),
  algorithms: z.array(z.string()).check(z.minLength(1)),
  clockToleranceSeconds: int(0, MAX_CLOCK_TOLERANCE_SECONDS),
  maxTokenLifetimeSeconds: count(),
  tokenTypes: texts().check(z.minLength(1)),
  tenantClaim: text(),
  grantsClaim: text(),
  profileClaim: text(),
  tenants: z.record(z.string(), z.partial(tenantSchema)),
  authorizationServers: texts(),
  resource: text(),
  jwksCooldownSeconds: count(),
  jwksTimeoutMs: int(1, MAX_JWKS_TIMEOUT_MS),
});

export const profileEntrySchema = z.partial(profileSchema);
export const authEntrySchema = z.partial(authSchema);
export const storeEntrySchema = z.partial(storeSchema);
export const tracingEntrySchema = z.partial(tracingSchema);
export const oauthEntrySchema = z.partial(oauthSchema);
export const serverAuthEntrySchema = z.partial(serverAuthSchema);

export const TOP_LEVEL_KEYS = ['mcpServers', 'servers', 'gateway', 'profiles', '$schema'] as const;
export const CATALOG_KEYS = Object.keys(catalogSchema.shape);
export const PROFILE_KEYS = Object.keys(profileSchema.shape);
export const GATEWAY_KEYS = [
  ...Object.keys(gatewaySchema.shape),
  'auth',
  'store',
  'tracing',
  'oauth',
  // #54, read in front-door.ts.
  'registry',
  'localPrincipal',
  'sandbox',
] as (keyof GatewayConfig)[];
export const AUTH_KEYS = Object.keys(authSchema.shape);
export const TENANT_KEYS = Object.keys(tenantSchema.shape);
export const SERVER_KEYS = Object.keys(serverEntrySchema.shape);
export const TOOLS_KEYS = Object.keys(toolsSchema.shape);
export const DISCLOSURE_KEYS = Object.keys(disclosureSchema.shape);
export const DRIFT_KEYS = Object.keys(driftSchema.shape);
export const CODE_KEYS = Object.keys(codeSchema.shape);
export const STORE_KEYS = Object.keys(storeSchema.shape);
export const TRACING_KEYS = Object.keys(tracingSchema.shape);
export const OAUTH_KEYS = Object.keys(oauthSchema.shape);
export const SERVER_AUTH_KEYS = Object.keys(serverAuthSchema.shape);
export const STDIO_ONLY_KEYS = ['command', 'args', 'env', 'cwd', 'sandbox'] as const;
export const HTTP_ONLY_KEYS = ['url', 'headers', 'auth'] as const;
