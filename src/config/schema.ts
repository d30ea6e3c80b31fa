/**
 * The shapes of a config file (zod 4) and the key lists derived from them. Defaults, wording and
 * the translation of zod's findings live in their own modules; this one re-exports them, so that
 * `config/schema.js` keeps offering everything it always has.
 */
import { z } from 'zod';
import { APPROVAL_PRESETS, RISK_CLASSES } from '../guards/risk.js';
import {
  LOG_LEVELS,
  MAX_CLOCK_TOLERANCE_SECONDS,
  MAX_JWKS_TIMEOUT_MS,
  MAX_PAGE_SIZE,
  MAX_TIMER_MS,
  MAX_TIMER_SECONDS,
  TRANSPORT_TYPES,
} from './defaults.js';
import type { GatewayConfig } from './types.js';

export {
  ASYMMETRIC_ALGORITHMS,
  AUTH_DEFAULTS,
  DEFAULT_STORE_PATH,
  GATEWAY_DEFAULTS,
  JWS_ALGORITHMS,
  KEY_SOURCES,
  type KeySource,
  LOG_LEVELS,
  MAX_CLOCK_TOLERANCE_SECONDS,
  MAX_JWKS_TIMEOUT_MS,
  MAX_NAME_LENGTH,
  MAX_PAGE_SIZE,
  MAX_TIMER_MS,
  MAX_TIMER_SECONDS,
  MIN_SECRET_BYTES,
  RESERVED_NAME,
  SYMMETRIC_ALGORITHMS,
  TRANSPORT_TYPES,
} from './defaults.js';
export { FIELD_TEXT, type FieldTable, STORE_SHAPE_TEXT } from './field-text.js';
export { describeKind, showValue, type TranslateContext, validateShape } from './issues.js';
export { nameProblems, suggestName } from './names.js';
export { formatPath, type PathSegment } from './paths.js';
export { closestKey, unknownKeyWarning } from './unknown-keys.js';

// ---------------------------------------------------------------------------------------------
// Shapes. Every key is optional; defaults, cross-field rules and transport rules live in the readers
// (gateway.ts, auth.ts, server-entry.ts, servers.ts).

const count = () => z.int().min(1);
const millis = () => z.int().min(1).max(MAX_TIMER_MS);
/** A disclosure budget in tokens, or "off" to inline everything. */
const budget = () => z.union([count(), z.literal('off')]);

export const disclosureSchema = z.object({
  budgetTokens: budget(),
  alwaysLoad: z.array(z.string().min(1)),
});

export const driftSchema = z.object({
  // 0 turns the periodic recheck off.
  recheckSeconds: z.int().min(0).max(MAX_TIMER_SECONDS),
});

/** The most tools one `manifold__search_tools` answer may hold. */
export const MAX_SEARCH_LIMIT = 50;

export const catalogSchema = z.object({
  mode: z.enum(['full', 'search']),
  maxTools: count(),
  pin: z.array(z.string().min(1)),
  searchLimit: z.int().min(1).max(MAX_SEARCH_LIMIT),
});

/** One entry of the top-level `profiles` map (profiles.ts reads it). */
export const profileSchema = z.object({
  servers: z.array(z.string().min(1)),
  tools: z.array(z.string().min(1)),
  catalog: catalogSchema.partial().strict(),
  budgetTokens: budget(),
});

// `gateway.store` is `false` or this object; gateway.ts reads it on its own, like `auth`.
export const storeSchema = z.object({
  path: z.string().min(1),
});

export const gatewaySchema = z.object({
  host: z.string().min(1),
  port: z.int().min(1).max(65535),
  logLevel: z.enum(LOG_LEVELS),
  allowedOrigins: z.array(z.string().min(1)),
  hostnames: z.array(z.string().min(1)),
  maxBodyBytes: count(),
  maxSessions: count(),
  maxSessionsPerPrincipal: count(),
  maxSessionsPerTenant: count(),
  sessionIdleSeconds: count(),
  callTimeoutMs: millis(),
  maxCallTimeoutMs: millis(),
  connectTimeoutMs: millis(),
  listTimeoutMs: millis(),
  maxListPages: count(),
  pageSize: z.int().min(1).max(MAX_PAGE_SIZE),
  shutdownGraceMs: millis(),
  streamPollMs: z.int().min(0).max(MAX_TIMER_MS),
  // Empty entries are rejected in hosts.ts, so that one bad entry does not hide the others.
  allowedHosts: z.array(z.string()),
  maxResultBytes: count(),
  maxUpstreamBodyBytes: count(),
  maxSchemaBytes: count(),
  maxDescriptionBytes: count(),
  maxToolsPerServer: count(),
  disclosure: disclosureSchema.partial(),
  callsPerMinute: count(),
  drift: driftSchema.partial(),
  catalog: catalogSchema.partial(),
  // Values never appear in messages (field-text.ts words them without the value).
  cursorSecret: z.string().min(32),
});

/** The longest a person may be given to answer an approval (one hour). */
export const MAX_APPROVAL_SECONDS = 3600;
/** Resends of one call, at most. */
export const MAX_RETRY = 5;

const glob = () => z.array(z.string().min(1));

/** A server's `protocol`: find its era by probing, or pin one (the legacy pin runs initialize). */
export const PROTOCOL_SETTINGS = ['auto', '2026-07-28', '2025-11-25'] as const;

export const toolsSchema = z.object({ allow: glob(), deny: glob() });

export const serverEntrySchema = z.object({
  type: z.enum(TRANSPORT_TYPES),
  command: z.string().min(1),
  args: z.array(z.string()),
  env: z.record(z.string(), z.string()),
  cwd: z.string().min(1),
  url: z.string().min(1),
  headers: z.record(z.string(), z.string()),
  prefix: z.union([z.string(), z.literal(false)]),
  tools: toolsSchema.partial(),
  prompts: toolsSchema.partial(),
  resources: toolsSchema.partial(),
  timeoutMs: millis(),
  disabled: z.boolean(),
  maxResultBytes: count(),
  budgetTokens: budget(),
  protocol: z.enum(PROTOCOL_SETTINGS),
  isolation: z.enum(['shared', 'per-tenant', 'per-subject']),
  maxInstances: count(),
  instanceIdleSeconds: count(),
  clientFeatures: z
    .object({ elicitation: z.boolean(), sampling: z.boolean(), roots: z.boolean() })
    .partial()
    .strict(),
  risk: z.record(z.string().min(1), z.enum(RISK_CLASSES)),
  trustAnnotations: z.boolean(),
  approval: z.union([
    z.enum(APPROVAL_PRESETS),
    glob(),
    z
      .object({
        preset: z.enum(APPROVAL_PRESETS),
        ask: glob(),
        deny: glob(),
        allow: glob(),
        timeoutSeconds: z.int().min(1).max(MAX_APPROVAL_SECONDS),
      })
      .partial()
      .strict(),
  ]),
  retry: z.int().min(0).max(MAX_RETRY),
});

export const gatewayEntrySchema = gatewaySchema.partial();
export const serverSchema = serverEntrySchema.partial();

// --- gateway.auth ------------------------------------------------------------------------------

export const tenantSchema = z.object({
  grants: glob(),
  callsPerMinute: count(),
});

// `tenants` entries are read one by one in auth.ts (unknown keys warn), then checked with tenantSchema.
export const authSchema = z.object({
  issuer: z.string().min(1),
  audience: z.string().min(1),
  jwksUrl: z.string().min(1),
  jwksFile: z.string().min(1),
  publicKey: z.string().min(1),
  // Length and content rules for the key sources live in auth-checks.ts, so messages never show values.
  secret: z.string(),
  algorithms: z.array(z.string()).min(1),
  clockToleranceSeconds: z.int().min(0).max(MAX_CLOCK_TOLERANCE_SECONDS),
  maxTokenLifetimeSeconds: count(),
  tokenTypes: z.array(z.string().min(1)).min(1),
  tenantClaim: z.string().min(1),
  grantsClaim: z.string().min(1),
  profileClaim: z.string().min(1),
  tenants: z.record(z.string(), tenantSchema.partial()),
  authorizationServers: z.array(z.string().min(1)),
  resource: z.string().min(1),
  jwksCooldownSeconds: count(),
  jwksTimeoutMs: z.int().min(1).max(MAX_JWKS_TIMEOUT_MS),
});

export const authEntrySchema = authSchema.partial();
export const storeEntrySchema = storeSchema.partial();

export const TOP_LEVEL_KEYS = ['mcpServers', 'servers', 'gateway', 'profiles', '$schema'] as const;
export const CATALOG_KEYS = Object.keys(catalogSchema.shape);
export const PROFILE_KEYS = Object.keys(profileSchema.shape);
export const GATEWAY_KEYS = [...Object.keys(gatewaySchema.shape), 'auth', 'store'] as (keyof GatewayConfig)[];
export const AUTH_KEYS = Object.keys(authSchema.shape);
export const TENANT_KEYS = Object.keys(tenantSchema.shape);
export const SERVER_KEYS = Object.keys(serverEntrySchema.shape);
export const TOOLS_KEYS = Object.keys(toolsSchema.shape);
export const DISCLOSURE_KEYS = Object.keys(disclosureSchema.shape);
export const DRIFT_KEYS = Object.keys(driftSchema.shape);
export const STORE_KEYS = Object.keys(storeSchema.shape);
export const STDIO_ONLY_KEYS = ['command', 'args', 'env', 'cwd'] as const;
export const HTTP_ONLY_KEYS = ['url', 'headers'] as const;
