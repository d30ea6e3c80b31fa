/**
 * Wording for each field: what was expected, and how to fix it. Nothing here ever echoes a value.
 */
import {
  MAX_CLOCK_TOLERANCE_SECONDS,
  MAX_JWKS_TIMEOUT_MS,
  MAX_TIMER_MS,
  MAX_TIMER_SECONDS,
} from './defaults.js';
import { OAUTH_TEXT, SERVER_AUTH_TEXT } from './field-text-oauth.js';
import {
  BUDGET_TEXT,
  catalogText,
  type FieldText,
  POLICY_SERVER_TEXT,
  PROFILE_TEXT,
  positive,
} from './field-text-policy.js';

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
  maxSessionsPerPrincipal: positive('sessions', 100),
  maxSessionsPerTenant: positive('sessions', 1000),
  sessionIdleSeconds: positive('seconds', 3600),
  maxBatchMessages: positive('messages', 100),
  maxBatchAnswerBytes: positive('bytes', 4194304),
  maxHeldCalls: positive('calls', 10000),
  maxHeldCallsPerPrincipal: positive('calls', 100),
  maxHeldCallsPerTenant: positive('calls', 1000),
  maxTasksAwaitingInput: positive('tasks', 1000),
  maxTasksAwaitingInputPerPrincipal: positive('tasks', 20),
  maxTasksAwaitingInputPerTenant: positive('tasks', 100),
  maxListenStreams: positive('streams', 10000),
  maxListenStreamsPerPrincipal: positive('streams', 16),
  maxListenStreamsPerTenant: positive('streams', 1000),
  callTimeoutMs: positive('milliseconds', 60000),
  maxCallTimeoutMs: positive('milliseconds', 600000),
  connectTimeoutMs: positive('milliseconds', 15000),
  coldStartMs: positive('milliseconds', 5000),
  listTimeoutMs: positive('milliseconds', 15000),
  maxListPages: positive('pages', 100),
  pageSize: { expected: 'an integer from 1 to 10000', fix: 'write a whole number without quotes, e.g. 500' },
  shutdownGraceMs: positive('milliseconds', 10000),
  streamPollMs: {
    expected: 'a whole number of milliseconds, 0 or more',
    fix: 'write a whole number without quotes, e.g. 30000, or 0 to keep streams open',
  },
  metricsPath: {
    expected: 'a path starting with "/", or false',
    fix: 'write "metricsPath": "/metrics", or false to serve no metrics',
  },
  statusPath: {
    expected: 'a path starting with "/", or false',
    fix: 'write a path such as "/" or "/status", or false to turn the status page off',
  },
  watchConfig: {
    expected: 'true or false',
    fix: 'write true (reload when the config file changes) or false (reload on SIGHUP only), without quotes',
  },
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
  // Local servers (#53).
  serverDataDir: {
    expected: 'a non-empty path',
    fix: 'write the directory that holds sandboxed servers\' private data, e.g. "./.manifold/servers"',
  },
  maxRunningServers: {
    expected: 'an integer, 0 or more',
    fix: 'write how many servers may run at once, e.g. 8, or 0 for no bound (the default)',
  },
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
  cursorSecret: {
    expected: 'a string of at least 32 characters',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
    fix: 'generate one with `openssl rand -base64 48`, put it in an environment variable and write "cursorSecret": "${MANIFOLD_CURSOR_SECRET}"; every instance of one deployment uses the same value',
  },
  advertiseUrl: {
    expected: 'an http: or https: URL string',
    fix: 'write the origin the other instances reach this one at, e.g. "http://10.0.0.5:8787", or remove it',
  },
  // #52: the admin API.
  admin: {
    expected: 'an object with "fileServers"',
    fix: 'write admin as {"fileServers": "locked"}',
  },
  'admin.fileServers': {
    expected: '"locked" or "editable"',
    fix: 'write "locked" (the default: the file\'s servers are read-only through the admin API) or "editable"',
  },
  drift: {
    expected: 'an object with "recheckSeconds"',
    fix: 'write drift as {"recheckSeconds": 300}',
  },
  'drift.recheckSeconds': {
    expected: `an integer from 0 to ${MAX_TIMER_SECONDS} (seconds)`,
    fix: 'write a whole number of seconds without quotes, e.g. 300, or 0 to turn the periodic recheck off',
  },
  ...catalogText('catalog'),
  code: {
    expected:
      'an object with "timeoutMs", "cpuMs", "memoryBytes", "maxCalls", "maxLogBytes", "approval" and/or "approvalTimeoutSeconds"',
    fix: 'write code as {"timeoutMs": 30000, "cpuMs": 5000, "memoryBytes": 67108864, "maxCalls": 50, "maxLogBytes": 16384}',
  },
  'code.timeoutMs': {
    expected: `an integer from 1 to ${MAX_TIMER_MS} (milliseconds)`,
    fix: 'write the wall-clock limit of one run in milliseconds, e.g. 30000 (the default)',
  },
  'code.cpuMs': {
    expected: `an integer from 1 to ${MAX_TIMER_MS} (milliseconds)`,
    fix: 'write the CPU limit of one run in milliseconds, e.g. 5000 (the default)',
  },
  'code.memoryBytes': {
    expected: 'an integer from 1048576 to 1073741824 (bytes)',
    fix: 'write the heap limit of one run in bytes, e.g. 67108864 (64 MiB, the default)',
  },
  'code.maxCalls': {
    expected: 'an integer from 1 to 10000',
    fix: 'write how many tool calls one run may make, e.g. 50 (the default)',
  },
  'code.maxLogBytes': {
    expected: 'an integer from 0 to 16777216 (bytes)',
    fix: 'write how much console output one run keeps, e.g. 16384 (the default)',
  },
  'code.approval': {
    expected: '"allow" or "ask"',
    fix: 'write "ask" to have the user approve each program before it runs, or "allow" (the default)',
  },
  'code.approvalTimeoutSeconds': {
    expected: `an integer from 1 to ${MAX_TIMER_SECONDS} (seconds)`,
    fix: 'write how long the question waits for an answer, e.g. 120 (the default)',
  },
};

const STORE_FIX =
  'write "store": {"path": "./.manifold/state.db"}, "store": {"postgres": "postgres://manifold@db.internal/manifold"}, or "store": false';

/** The fix for a Postgres URL that does not parse; the message never repeats the value. */
export const POSTGRES_URL_FIX =
  // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
  'write a postgres:// URL such as "postgres://manifold@db.internal:5432/manifold", usually from a ${VAR} so that its password stays out of the file';

const STORE_TEXT: Record<string, FieldText> = {
  path: { expected: 'a non-empty file path string', fix: STORE_FIX },
  postgres: { expected: 'a non-empty postgres:// URL string', fix: POSTGRES_URL_FIX },
};

const TRACING_FIX = 'write "tracing": {"otlpEndpoint": "http://127.0.0.1:4318"}, or "tracing": false';

const TRACING_TEXT: Record<string, FieldText> = {
  otlpEndpoint: {
    expected: 'an http(s) URL string',
    fix: 'write the OTLP/HTTP base URL of your collector, e.g. "http://127.0.0.1:4318"',
  },
  serviceName: { expected: 'a non-empty string', fix: 'write a service name, e.g. "manifold"' },
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
  maxTokenLifetimeSeconds: {
    expected: 'a whole number of seconds, 1 or more',
    fix: 'write the longest token lifetime you issue, e.g. 86400 for a day',
  },
  tokenTypes: {
    expected: 'a non-empty array of JOSE typ values',
    fix: 'write tokenTypes as an array such as ["JWT", "at+jwt"]',
  },
  'tokenTypes[]': { expected: 'a typ string', fix: 'write a typ value such as "at+jwt"' },
  tenantClaim: {
    expected: 'a claim name string',
    fix: 'set tenantClaim to the claim that names the tenant, e.g. "sub" or "tid"',
  },
  profileClaim: {
    expected: 'a non-empty claim name',
    fix: 'set profileClaim to the claim that names a token\'s profile, e.g. "profile", or remove it',
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
  prompts: {
    expected: 'an object with "allow" and/or "deny" arrays',
    fix: 'write prompts as {"allow": ["review_*"], "deny": ["internal_*"]}',
  },
  'prompts.allow': {
    expected: 'an array of glob strings',
    fix: 'write prompts.allow as an array of prompts or globs, e.g. ["review_*"]',
  },
  'prompts.allow[]': {
    expected: 'a non-empty glob string',
    fix: 'write a prompt or a glob such as "review_*"',
  },
  'prompts.deny': {
    expected: 'an array of glob strings',
    fix: 'write prompts.deny as an array of prompts or globs, e.g. ["internal_*"]',
  },
  'prompts.deny[]': {
    expected: 'a non-empty glob string',
    fix: 'write a prompt or a glob such as "internal_*"',
  },
  resources: {
    expected: 'an object with "allow" and/or "deny" arrays',
    fix: 'write resources as {"allow": ["file:///docs/*"], "deny": ["file:///secrets/*"]}',
  },
  'resources.allow': {
    expected: 'an array of glob strings',
    fix: 'write resources.allow as an array of resource URI or templates or globs, e.g. ["file:///docs/*"]',
  },
  'resources.allow[]': {
    expected: 'a non-empty glob string',
    fix: 'write a resource URI or template or a glob such as "file:///docs/*"',
  },
  'resources.deny': {
    expected: 'an array of glob strings',
    fix: 'write resources.deny as an array of resource URI or templates or globs, e.g. ["file:///secrets/*"]',
  },
  'resources.deny[]': {
    expected: 'a non-empty glob string',
    fix: 'write a resource URI or template or a glob such as "file:///secrets/*"',
  },
  timeoutMs: positive('milliseconds', 60000),
  disabled: { expected: 'true or false', fix: 'write true or false without quotes' },
  maxResultBytes: positive('bytes', 65536),
  budgetTokens: BUDGET_TEXT,
  clientFeatures: {
    expected: 'an object with "elicitation", "sampling" and/or "roots" set to true or false',
    fix: 'write clientFeatures as {"elicitation": true, "sampling": false, "roots": false}',
  },
  'clientFeatures.elicitation': { expected: 'true or false', fix: 'write true or false without quotes' },
  'clientFeatures.sampling': { expected: 'true or false', fix: 'write true or false without quotes' },
  'clientFeatures.roots': { expected: 'true or false', fix: 'write true or false without quotes' },
  isolation: {
    expected: '"shared", "per-tenant" or "per-subject"',
    fix: 'write "shared" (one connection for everyone, the default), "per-tenant" (one per tenant) or "per-subject" (one per tenant and subject)',
  },
  ...POLICY_SERVER_TEXT,
  ...SERVER_AUTH_TEXT,
  // #54: overrides and trust on first listing.
  overrides: {
    expected: "an object keyed by the upstream's tool names",
    fix: 'write overrides as {"<upstream tool>": {"name": "...", "description": "...", "args": {"<param>": {"fixed": value}}}}',
  },
  promptOverrides: {
    expected: "an object keyed by the upstream's prompt names",
    fix: 'write promptOverrides as {"<upstream prompt>": {"name": "...", "description": "..."}}',
  },
  trust: {
    expected: '"first-use" or "review"',
    fix: 'write "review" to hold the first listing until manifold retrust accepts it, or "first-use" (the default)',
  },
  maxInstances: positive('instances', 16),
  instanceIdleSeconds: positive('seconds', 300),
  // Local servers (#53); the sandbox object's own keys are worded in sandbox.ts.
  sandbox: {
    expected: 'false, or an object with "network", "allowHosts", "filesystem" and/or "limits"',
    fix: 'write sandbox as false, or as {"network": false} to run the server with no network and a private data directory',
  },
  start: {
    expected: '"eager" or "lazy"',
    fix: 'write "eager" to start the server with the gateway (the default), or "lazy" to start it on the first request that needs it',
  },
  idleStopSeconds: {
    expected: 'an integer from 0 to 2592000 (seconds)',
    fix: 'write how long the server may sit idle before it stops, e.g. 600, or 0 to keep it running',
  },
  protocol: {
    expected: '"auto", "2026-07-28" or "2025-11-25"',
    fix: 'write "auto" (the default: probe with server/discover, then fall back to initialize), "2026-07-28" to require the stateless revision, or "2025-11-25" to skip the probe and use the initialize handshake',
  },
};

export type FieldTable = Record<string, FieldText>;
export const FIELD_TEXT: {
  gateway: FieldTable;
  server: FieldTable;
  auth: FieldTable;
  store: FieldTable;
  tracing: FieldTable;
  oauth: FieldTable;
  profile: FieldTable;
} = {
  gateway: GATEWAY_TEXT,
  server: SERVER_TEXT,
  auth: AUTH_TEXT,
  store: STORE_TEXT,
  tracing: TRACING_TEXT,
  oauth: OAUTH_TEXT,
  profile: PROFILE_TEXT,
};

/** The fix for a `gateway.store` that is neither an object nor false. */
export const STORE_SHAPE_TEXT: FieldText = {
  expected: 'an object with "path" or "postgres", or false',
  fix: STORE_FIX,
};

/** The fix for a `gateway.tracing` that is neither an object nor false. */
export const TRACING_SHAPE_TEXT: FieldText = {
  expected: 'an object such as {"otlpEndpoint": "http://127.0.0.1:4318"}, or false',
  fix: TRACING_FIX,
};
