/**
 * The shapes of a config file (zod 4) and the translation of zod's findings into issues that read
 * well: `expected a string, got number` plus a `fix` sentence. Nothing here ever echoes a string
 * value that could be a secret: only enum-like values that did not come from `${VAR}` are shown.
 */
import { z } from 'zod';
import type { LogLevel } from '../log.js';
import type { AuthConfig, ConfigIssue, GatewayConfig } from './types.js';

// ---------------------------------------------------------------------------------------------
// Paths

export type PathSegment = string | number;

const BARE_KEY = /^[A-Za-z0-9_$-]+$/;

/** `mcpServers.everything.args[2]`; keys with dots or odd characters become `["a.b"]`. */
export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (BARE_KEY.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Defaults and limits

/** Where the Node host keeps drift baselines and the catalog cache unless `gateway.store` says otherwise. */
export const DEFAULT_STORE_PATH = './.manifold/state.db';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const satisfies readonly LogLevel[];

export const GATEWAY_DEFAULTS: Readonly<GatewayConfig> = Object.freeze({
  host: '127.0.0.1',
  port: 8787,
  logLevel: 'info',
  allowedOrigins: Object.freeze([]) as unknown as string[],
  hostnames: Object.freeze([]) as unknown as string[],
  maxBodyBytes: 1_048_576,
  maxSessions: 10_000,
  sessionIdleSeconds: 3600,
  callTimeoutMs: 60_000,
  maxCallTimeoutMs: 600_000,
  connectTimeoutMs: 15_000,
  listTimeoutMs: 15_000,
  maxListPages: 100,
  pageSize: 500,
  shutdownGraceMs: 10_000,
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
  drift: Object.freeze({ recheckSeconds: 300 }),
});

/** setTimeout fires at once for anything above this, so millisecond settings stop here. */
export const MAX_TIMER_MS = 2_147_483_647;
/** The same bound for settings in whole seconds. */
export const MAX_TIMER_SECONDS = Math.floor(MAX_TIMER_MS / 1000);
export const MAX_PAGE_SIZE = 10_000;
export const MAX_NAME_LENGTH = 32;
export const RESERVED_NAME = 'manifold';

export const TRANSPORT_TYPES = ['stdio', 'streamable-http', 'http', 'sse'] as const;

// ---------------------------------------------------------------------------------------------
// Shapes. Every key is optional; defaults, cross-field rules and transport rules live in load.ts.

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

// `gateway.store` is `false` or this object; load.ts reads it on its own, like `auth`.
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
  sessionIdleSeconds: count(),
  callTimeoutMs: millis(),
  maxCallTimeoutMs: millis(),
  connectTimeoutMs: millis(),
  listTimeoutMs: millis(),
  maxListPages: count(),
  pageSize: z.int().min(1).max(MAX_PAGE_SIZE),
  shutdownGraceMs: millis(),
  // Empty entries are rejected in load.ts, so that one bad entry does not hide the others.
  allowedHosts: z.array(z.string()),
  maxResultBytes: count(),
  maxUpstreamBodyBytes: count(),
  maxSchemaBytes: count(),
  maxDescriptionBytes: count(),
  maxToolsPerServer: count(),
  disclosure: disclosureSchema.partial(),
  callsPerMinute: count(),
  drift: driftSchema.partial(),
});

const glob = () => z.array(z.string().min(1));

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
  timeoutMs: millis(),
  disabled: z.boolean(),
  maxResultBytes: count(),
  budgetTokens: budget(),
});

export const gatewayEntrySchema = gatewaySchema.partial();
export const serverSchema = serverEntrySchema.partial();

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
  >
> = Object.freeze({
  clockToleranceSeconds: 30,
  tenantClaim: 'sub',
  tenants: Object.freeze({}) as Record<string, never>,
  authorizationServers: Object.freeze([]) as unknown as string[],
  jwksCooldownSeconds: 30,
  jwksTimeoutMs: 5000,
});

export const tenantSchema = z.object({
  grants: glob(),
  callsPerMinute: count(),
});

// `tenants` entries are read one by one in load.ts (unknown keys warn), then checked with tenantSchema.
export const authSchema = z.object({
  issuer: z.string().min(1),
  audience: z.string().min(1),
  jwksUrl: z.string().min(1),
  jwksFile: z.string().min(1),
  publicKey: z.string().min(1),
  // Length and content rules for the key sources live in load.ts, so messages never show values.
  secret: z.string(),
  algorithms: z.array(z.string()).min(1),
  clockToleranceSeconds: z.int().min(0).max(MAX_CLOCK_TOLERANCE_SECONDS),
  tenantClaim: z.string().min(1),
  grantsClaim: z.string().min(1),
  tenants: z.record(z.string(), tenantSchema.partial()),
  authorizationServers: z.array(z.string().min(1)),
  resource: z.string().min(1),
  jwksCooldownSeconds: count(),
  jwksTimeoutMs: z.int().min(1).max(MAX_JWKS_TIMEOUT_MS),
});

export const authEntrySchema = authSchema.partial();
export const storeEntrySchema = storeSchema.partial();

export const TOP_LEVEL_KEYS = ['mcpServers', 'servers', 'gateway', '$schema'] as const;
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

// ---------------------------------------------------------------------------------------------
// Wording for each field: what was expected, and how to fix it.

interface FieldText {
  expected: string;
  fix: string;
}

const positive = (unit: string, example: number): FieldText => ({
  expected: `a positive integer (${unit})`,
  fix: `write a whole number without quotes, e.g. ${example}`,
});

const BUDGET_TEXT: FieldText = {
  expected: 'a positive integer (tokens) or "off"',
  fix: 'write budgetTokens as a whole number without quotes, e.g. 20000, or "off" to inline every schema',
};

const GATEWAY_TEXT: Record<string, FieldText> = {
  host: { expected: 'a non-empty string', fix: 'set host to the address to listen on, e.g. "127.0.0.1"' },
  port: { expected: 'an integer from 1 to 65535', fix: 'write a port number without quotes, e.g. 8787' },
  logLevel: {
    expected: '"debug", "info", "warn" or "error"',
    fix: 'set logLevel to "debug", "info", "warn" or "error"',
  },
  allowedOrigins: {
    expected: 'an array of origins',
    fix: 'write allowedOrigins as an array such as ["https://app.example.com"]',
  },
  'allowedOrigins[]': {
    expected: 'an origin string',
    fix: 'write an origin such as "https://app.example.com"',
  },
  hostnames: {
    expected: 'an array of host names',
    fix: 'write hostnames as an array such as ["mcp.example.com"]',
  },
  'hostnames[]': { expected: 'a host name string', fix: 'write a host name such as "mcp.example.com"' },
  maxBodyBytes: positive('bytes', 1048576),
  maxSessions: positive('sessions', 10000),
  sessionIdleSeconds: positive('seconds', 3600),
  callTimeoutMs: positive('milliseconds', 60000),
  maxCallTimeoutMs: positive('milliseconds', 600000),
  connectTimeoutMs: positive('milliseconds', 15000),
  listTimeoutMs: positive('milliseconds', 15000),
  maxListPages: positive('pages', 100),
  pageSize: { expected: 'an integer from 1 to 10000', fix: 'write a whole number without quotes, e.g. 500' },
  shutdownGraceMs: positive('milliseconds', 10000),
  allowedHosts: {
    expected: 'an array of host names',
    fix: 'write allowedHosts as an array such as ["api.example.com", "127.0.0.1:3001"]',
  },
  'allowedHosts[]': {
    expected: 'a host name string',
    fix: 'write the bare host name, e.g. "api.example.com" or "127.0.0.1:3001"',
  },
  maxResultBytes: positive('bytes', 65536),
  maxUpstreamBodyBytes: positive('bytes', 8388608),
  maxSchemaBytes: positive('bytes', 20480),
  maxDescriptionBytes: positive('bytes', 4096),
  maxToolsPerServer: positive('tools', 1000),
  disclosure: {
    expected: 'an object with "budgetTokens" and/or "alwaysLoad"',
    fix: 'write disclosure as {"budgetTokens": 20000, "alwaysLoad": ["github"]}',
  },
  'disclosure.budgetTokens': BUDGET_TEXT,
  'disclosure.alwaysLoad': {
    expected: 'an array of server names',
    fix: 'write alwaysLoad as an array of server names, e.g. ["github"]',
  },
  'disclosure.alwaysLoad[]': {
    expected: 'a server name string',
    fix: 'write the name of a server configured under mcpServers, e.g. "github"',
  },
  callsPerMinute: positive('calls per minute per tenant', 120),
  drift: {
    expected: 'an object with "recheckSeconds"',
    fix: 'write drift as {"recheckSeconds": 300}',
  },
  'drift.recheckSeconds': {
    expected: `an integer from 0 to ${MAX_TIMER_SECONDS} (seconds)`,
    fix: 'write a whole number of seconds without quotes, e.g. 300, or 0 to turn the periodic recheck off',
  },
};

const STORE_FIX = 'write "store": {"path": "./.manifold/state.db"}, or "store": false';

const STORE_TEXT: Record<string, FieldText> = {
  path: { expected: 'a non-empty file path string', fix: STORE_FIX },
};

const AUTH_TEXT: Record<string, FieldText> = {
  issuer: {
    expected: 'a non-empty string',
    fix: 'set issuer to the exact "iss" of your tokens, e.g. "https://auth.example.com/"',
  },
  audience: {
    expected: 'a non-empty string',
    fix: 'set audience to the "aud" your tokens are issued for, e.g. "https://mcp.example.com/mcp"',
  },
  jwksUrl: {
    expected: 'a non-empty URL string',
    fix: 'set jwksUrl to the https URL of the issuer\'s JWKS, e.g. "https://auth.example.com/.well-known/jwks.json"',
  },
  jwksFile: {
    expected: 'a non-empty path string',
    fix: 'set jwksFile to the path of a JWKS file, e.g. "keys/jwks.json" (see `manifold keys`)',
  },
  publicKey: {
    expected: 'a PEM string',
    fix: 'set publicKey to a PEM public key that starts with -----BEGIN PUBLIC KEY-----',
  },
  secret: {
    expected: 'a string',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
    fix: 'generate one with `openssl rand -base64 48`, put it in an environment variable and write "secret": "${JWT_SECRET}"',
  },
  algorithms: {
    expected: 'a non-empty array of JWS algorithm names',
    fix: 'write algorithms as an array such as ["ES256"], or remove it to use the default for the key source',
  },
  'algorithms[]': { expected: 'an algorithm name string', fix: 'write an algorithm name such as "ES256"' },
  clockToleranceSeconds: {
    expected: `an integer from 0 to ${MAX_CLOCK_TOLERANCE_SECONDS} (seconds)`,
    fix: `write a whole number of seconds from 0 to ${MAX_CLOCK_TOLERANCE_SECONDS} without quotes, e.g. 30`,
  },
  tenantClaim: {
    expected: 'a claim name string',
    fix: 'set tenantClaim to the claim that names the tenant, e.g. "sub" or "tid"',
  },
  grantsClaim: {
    expected: 'a claim name string',
    fix: 'set grantsClaim to a claim holding an array of tool patterns, e.g. "permissions", or remove it to use "scope"',
  },
  tenants: {
    expected: 'an object that maps tenant ids to tenant settings',
    fix: 'write tenants as {"acme": {"grants": ["github__*"], "callsPerMinute": 60}}',
  },
  'tenants.*': {
    expected: 'an object with "grants" and/or "callsPerMinute"',
    fix: 'write the tenant as {"grants": ["github__*"], "callsPerMinute": 60}',
  },
  'tenants.*.grants': {
    expected: 'an array of glob strings',
    fix: 'write grants as an array of exposed tool names or globs, e.g. ["github__*"]',
  },
  'tenants.*.grants[]': {
    expected: 'a non-empty glob string',
    fix: 'write an exposed tool name or a glob such as "github__*"',
  },
  'tenants.*.callsPerMinute': positive('calls per minute', 60),
  authorizationServers: {
    expected: 'an array of https URLs',
    fix: 'write authorizationServers as an array such as ["https://auth.example.com/"]',
  },
  'authorizationServers[]': {
    expected: 'an https URL string',
    fix: 'write the issuer URL of an authorization server, e.g. "https://auth.example.com/"',
  },
  resource: {
    expected: 'an absolute URL string',
    fix: 'set resource to the public URL of the MCP endpoint, e.g. "https://mcp.example.com/mcp"',
  },
  jwksCooldownSeconds: positive('seconds', 30),
  jwksTimeoutMs: {
    expected: `an integer from 1 to ${MAX_JWKS_TIMEOUT_MS} (milliseconds)`,
    fix: 'write a whole number of milliseconds without quotes, e.g. 5000',
  },
};

const SERVER_TEXT: Record<string, FieldText> = {
  type: {
    expected: '"stdio", "streamable-http" (or "http") or "sse"',
    fix: 'set type to "stdio" for a local command or "streamable-http" for a URL, or remove it to infer the transport',
  },
  command: {
    expected: 'a non-empty string',
    fix: 'set command to the program to start, e.g. "npx"; put its arguments in args',
  },
  args: {
    expected: 'an array of strings',
    fix: 'write args as an array of strings, e.g. ["-y", "@modelcontextprotocol/server-everything"]',
  },
  'args[]': { expected: 'a string', fix: 'quote the argument so that it is a string' },
  env: { expected: 'an object of string values', fix: 'write env as an object such as {"NAME": "value"}' },
  'env.*': { expected: 'a string', fix: 'quote the value; environment variable values must be strings' },
  cwd: { expected: 'a non-empty string', fix: 'set cwd to the directory to start the command in' },
  url: {
    expected: 'a non-empty string',
    fix: 'set url to the server endpoint, e.g. "https://example.com/mcp"',
  },
  headers: {
    expected: 'an object of string values',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
    fix: 'write headers as an object such as {"Authorization": "Bearer ${TOKEN}"}',
  },
  'headers.*': { expected: 'a string', fix: 'quote the value; header values must be strings' },
  prefix: {
    expected: 'a name string or false',
    fix: 'set prefix to a name such as "gh", or to false to mount the tools without a prefix',
  },
  tools: {
    expected: 'an object with "allow" and/or "deny" arrays',
    fix: 'write tools as {"allow": ["search_*"], "deny": ["delete_*"]}',
  },
  'tools.allow': {
    expected: 'an array of glob strings',
    fix: 'write tools.allow as an array of tool names or globs, e.g. ["search_*"]',
  },
  'tools.allow[]': {
    expected: 'a non-empty glob string',
    fix: 'write a tool name or a glob such as "search_*"',
  },
  'tools.deny': {
    expected: 'an array of glob strings',
    fix: 'write tools.deny as an array of tool names or globs, e.g. ["delete_*"]',
  },
  'tools.deny[]': {
    expected: 'a non-empty glob string',
    fix: 'write a tool name or a glob such as "delete_*"',
  },
  timeoutMs: positive('milliseconds', 60000),
  disabled: { expected: 'true or false', fix: 'write true or false without quotes' },
  maxResultBytes: positive('bytes', 65536),
  budgetTokens: BUDGET_TEXT,
};

export type FieldTable = Record<string, FieldText>;
export const FIELD_TEXT: { gateway: FieldTable; server: FieldTable; auth: FieldTable; store: FieldTable } = {
  gateway: GATEWAY_TEXT,
  server: SERVER_TEXT,
  auth: AUTH_TEXT,
  store: STORE_TEXT,
};

/** The fix for a `gateway.store` that is neither an object nor false. */
export const STORE_SHAPE_TEXT: FieldText = {
  expected: 'an object with "path", or false',
  fix: STORE_FIX,
};

function fieldKey(table: FieldTable, rel: readonly PathSegment[]): string {
  let key = String(rel[0] ?? '');
  for (const segment of rel.slice(1)) {
    if (typeof segment === 'number') key += '[]';
    else if (table[`${key}.${segment}`]) key += `.${segment}`;
    else key += '.*';
  }
  return key;
}

/** What a value is, for `got ...`; never the content of a string. */
export function describeKind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'boolean') return String(value);
  return typeof value;
}

// ---------------------------------------------------------------------------------------------
// zod issues -> ConfigIssue

type ZodIssue = z.core.$ZodIssue & { input?: unknown };

export interface TranslateContext {
  table: FieldTable;
  /** Path of the object that was validated, e.g. ['mcpServers', 'github']. */
  base: readonly PathSegment[];
  /** Formatted paths whose string values came (at least partly) from `${VAR}`. */
  tainted: ReadonlySet<string>;
}

/** Runs a schema and turns its findings into issues, at most one per path. */
export function validateShape(schema: z.ZodType, value: unknown, ctx: TranslateContext): ConfigIssue[] {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return [];
  // zod may report two findings for one value (e.g. the safe-integer bound and our own bound);
  // keep the last, which is the most specific.
  const byPath = new Map<string, ConfigIssue>();
  for (const issue of result.error.issues as ZodIssue[]) {
    const path = [...ctx.base, ...(issue.path as PathSegment[])];
    const translated = translateIssue(issue, path, ctx);
    byPath.set(translated.path, translated);
  }
  return [...byPath.values()];
}

function translateIssue(issue: ZodIssue, path: PathSegment[], ctx: TranslateContext): ConfigIssue {
  const rel = path.slice(ctx.base.length);
  const text = ctx.table[fieldKey(ctx.table, rel)];
  const formatted = formatPath(path);
  const expected = text?.expected ?? 'a valid value';
  const fix = text?.fix;
  const input = issue.input;
  let message: string;
  switch (issue.code) {
    case 'invalid_type':
      if (issue.expected === 'int' && typeof input === 'number') {
        message = `expected an integer, got ${input}`;
      } else {
        message = `expected ${expected}, got ${describeKind(input)}`;
      }
      break;
    case 'too_small':
      if (issue.origin === 'string' || issue.origin === 'array') message = 'must not be empty';
      else message = `must be at least ${String(issue.minimum)}, got ${String(input)}`;
      break;
    case 'too_big':
      message = `must be at most ${String(issue.maximum)}, got ${String(input)}`;
      break;
    case 'invalid_value':
      message = `expected ${expected}, got ${showValue(input, ctx.tainted.has(formatted))}`;
      break;
    case 'invalid_union':
      // Numbers never come from ${VAR}, so showing one leaks nothing.
      message =
        typeof input === 'number'
          ? `expected ${expected}, got ${input}`
          : `expected ${expected}, got ${showValue(input, ctx.tainted.has(formatted))}`;
      break;
    default:
      message = `expected ${expected}, got ${describeKind(input)}`;
  }
  return fix ? { path: formatted, message, fix } : { path: formatted, message };
}

/** Shows a short enum-like value, unless it came from an environment variable. */
export function showValue(value: unknown, tainted: boolean): string {
  if (typeof value !== 'string') return describeKind(value);
  if (tainted) return 'a value taken from an environment variable';
  if (value.length > 40 || [...value].some((c) => c < ' ' || c === '\x7f')) return 'another string';
  return JSON.stringify(value);
}

// ---------------------------------------------------------------------------------------------
// Names and prefixes

const NAME_CHARS = /^[A-Za-z0-9_-]+$/;

/** Every rule a server name (or a string prefix) breaks; empty when it is valid. */
export function nameProblems(name: string, what: 'server name' | 'prefix'): string[] {
  const problems: string[] = [];
  if (name.length === 0) return [`${what} must not be empty`];
  if (name.length > MAX_NAME_LENGTH) {
    problems.push(`${what} is ${name.length} characters long; the limit is ${MAX_NAME_LENGTH}`);
  }
  if (!NAME_CHARS.test(name)) problems.push(`${what} may only contain letters, digits, "_" and "-"`);
  if (name.includes('__')) {
    problems.push(`${what} must not contain "__" (it separates the prefix from the tool name)`);
  }
  if (name.toLowerCase() === RESERVED_NAME) {
    problems.push(`"${RESERVED_NAME}" is reserved for the gateway's own tools`);
  }
  return problems;
}

/** A valid name close to `name`, for fix sentences. */
export function suggestName(name: string): string {
  let s = name
    .replace(/[^A-Za-z0-9_-]/g, '-')
    .replace(/_{2,}/g, '_')
    .replace(/-{2,}/g, '-')
    .replace(/^[-_]+|[-_]+$/g, '')
    .slice(0, MAX_NAME_LENGTH)
    .replace(/[-_]+$/, '');
  if (s === '') s = 'server';
  if (s.toLowerCase() === RESERVED_NAME) s = `${s}-upstream`;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Unknown keys

/** Extra fields other clients write into the same file, with a tailored explanation. */
const FOREIGN_KEYS: Record<string, string> = {
  autoApprove: 'it is a client setting that Manifold does not use; remove it to silence this warning',
  alwaysAllow: 'it is a client setting that Manifold does not use; remove it to silence this warning',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
  envFile: "Manifold does not read env files; set the variables in the gateway's environment and use ${VAR}",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
  inputs: 'VS Code input prompts are not supported; pass secrets through environment variables and ${VAR}',
};

/** Edit distance where swapping two neighbouring characters counts as one edit. */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      }
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/** A known key that `key` is probably a typo of. */
export function closestKey(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const d = distance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance && d <= 2 && d < candidate.length / 2) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

export function unknownKeyWarning(path: readonly PathSegment[], known: readonly string[]): ConfigIssue {
  const key = String(path[path.length - 1]);
  const near = closestKey(key, known);
  const fix = near
    ? `did you mean "${near}"? Otherwise remove it to silence this warning`
    : (FOREIGN_KEYS[key] ?? 'remove it to silence this warning');
  return { path: formatPath(path), message: `unknown key ${JSON.stringify(key)} is ignored`, fix };
}
