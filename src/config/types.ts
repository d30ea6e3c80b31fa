import type { GuardrailConfig, PolicyConfig } from '../guards/policy/types.js';
import type { ApprovalSettings, DeclaredRisk } from '../guards/risk.js';
import type { LogLevel } from '../lib/log.js';
import type { SandboxConfig, StartMode } from './sandbox.js';

export type TransportKind = 'stdio' | 'streamable-http' | 'sse';

/** One upstream, after validation, interpolation and defaults. */
export interface ServerConfig {
  /** The key under `mcpServers`: 1-32 of [A-Za-z0-9_-], no `__`, not `manifold`. */
  name: string;
  type: TransportKind;
  /** stdio only. */
  command?: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  /** streamable-http and sse only. */
  url?: string;
  /**
   * True when the transport was inferred from `url` (no `type`): a server that refuses the
   * streamable-HTTP initialize with 400, 404 or 405 is reached over HTTP+SSE instead, as the
   * spec's backward-compatibility section describes (pasted Cursor configs name an `/sse` URL).
   */
  sseFallback?: boolean;
  headers: Record<string, string>;
  /** The name prefix; defaults to `name`. `false` mounts tools unprefixed. */
  prefix: string | false;
  /** Globs over the upstream's own tool names. Deny wins. `allow` absent means all. */
  tools: { allow?: string[]; deny: string[] };
  /** The same over its prompt names. */
  prompts: { allow?: string[]; deny: string[] };
  /** The same over its resource URIs and resource templates. */
  resources: { allow?: string[]; deny: string[] };
  /** Idle deadline for one tools/call; defaults to gateway.callTimeoutMs. */
  timeoutMs: number;
  disabled: boolean;
  /** Cap on one serialized tool result; defaults to gateway.maxResultBytes. */
  maxResultBytes: number;
  /**
   * Disclosure budget for this server's inlined descriptions and schemas, in tokens (4 chars each).
   * Defaults to gateway.disclosure.budgetTokens; 'off' when listed in gateway.disclosure.alwaysLoad.
   */
  budgetTokens: number | 'off';
  /**
   * The era to speak: `auto` probes with server/discover and falls back to initialize (default);
   * `2026-07-28` requires a modern server; `2025-11-25` uses the handshake without probing. SSE
   * servers are always legacy.
   */
  protocol: 'auto' | '2026-07-28' | '2025-11-25';
  /**
   * Requests from the server to the calling client that the gateway relays: elicitation on by
   * default (a person sees it and answers), sampling and roots off (they spend the user's model
   * tokens and reveal the user's paths).
   */
  clientFeatures: { elicitation: boolean; sampling: boolean; roots: boolean };
  /**
   * Who shares a connection to this server. `shared` (the default): everyone, so a stateful
   * server (a memory, a browser) lets one tenant read what another wrote. `per-tenant` and
   * `per-subject`: a separate stdio child or HTTP session for each tenant (or tenant and subject),
   * started on first use, at most `maxInstances` of them, closed after `instanceIdleSeconds`.
   */
  isolation: 'shared' | 'per-tenant' | 'per-subject';
  /** Isolated instances of this server at once (default 16); past it, the least recently used idle one closes. */
  maxInstances: number;
  /** An isolated instance unused for this long is closed (default 300). */
  instanceIdleSeconds: number;
  /**
   * Risk classes by glob over the upstream's tool names, in the order written (the first match
   * wins). Default: none, so every tool is `undeclared` unless its annotations are trusted.
   */
  risk: { pattern: string; class: DeclaredRisk }[];
  /** Whether `readOnlyHint` / `destructiveHint` may classify this server's tools (default false). */
  trustAnnotations: boolean;
  /** Which calls need a person's yes (default preset `off`: none), and how long they have. */
  approval: ApprovalSettings;
  /**
   * How many times a call may be resent after its upstream session dropped, in the cases where
   * that is safe (a `read` tool, or a session the server said it did not know). Default 1.
   */
  retry: number;
  // --- local servers, contained and on demand (#53) ---
  /**
   * stdio only: the sandbox the child runs in (deploy/node/runtime/sandbox.ts), or `false` (none).
   * Default: `gateway.sandbox` (itself `false` by default), so existing configs run as before. The
   * loader fills these three keys; a config built by hand may leave them out (none, eager, never).
   */
  sandbox?: SandboxConfig | false;
  /** `eager` (default): started with the gateway. `lazy`: listed from its stored catalog, started on first need. */
  start?: StartMode;
  /** Stops after this long with nothing in flight and no subscription; 0: never. Default 600 lazy, 0 eager. */
  idleStopSeconds?: number;
  // --- end #53 ---
  /**
   * Whose identity reaches this HTTP server (#19). Absent: `static` (the configured headers).
   * Filled with its defaults by the loader for `gateway` and `user`.
   */
  auth?: ServerAuthConfig;
  /**
   * The raw `headers` values before `${VAR}` interpolation, so that a `static` server's secret can
   * be read again after a 401. Never logged, never shown.
   */
  headerTemplates?: Record<string, string>;
  // Policy (#51): this server's rules (after the gateway's and the profile's) and guardrails.
  /** Rules for this server's tools, prompts and resources. Absent: none. */
  policy?: PolicyConfig;
  /** Guardrails for this server's calls, after the gateway's and the profile's. Absent: none. */
  guardrails?: GuardrailConfig[];
  /** Tools reshaped by the operator, by upstream name (#54); applied after drift, before names. */
  overrides?: Record<string, ToolOverride>;
  /** Prompts renamed or redescribed, by upstream name (#54). */
  promptOverrides?: Record<string, PromptOverride>;
  /** Whether the first listing is trusted on first use or held for review (#54). Default first-use. */
  trust?: TrustMode;
}

/** A server's `auth` (#19). */
export interface ServerAuthConfig {
  mode: 'static' | 'gateway' | 'user' | 'user-key';
  /** Mode `user-key` (#52): the header the caller's key is sent in (default Authorization). */
  header?: string;
  /** Mode `user-key`: the header's value, `{key}` standing for the key (default "Bearer {key}"). */
  format?: string;
  /** Default `authorization_code`; `client_credentials` needs clientId and clientSecret and mode `gateway`. */
  grant: 'authorization_code' | 'client_credentials';
  /** Pre-registered client credentials, bound to `issuer` when given. */
  clientId?: string;
  clientSecret?: string;
  /** Default: chosen from the authorization server's metadata. */
  tokenEndpointAuthMethod?: TokenAuthMethod;
  /** Pins the authorization server (pre-registered credentials are never sent to another). */
  issuer?: string;
  /** Scopes always requested besides the challenge's (default []). */
  scopes: string[];
  /** Re-authorizations allowed for one scope challenge (default 2, so at most 3 authorizations). */
  maxStepUps: number;
}

/** `gateway.oauth` (#19): the gateway as an OAuth client of its upstreams. */
export interface GatewayOAuthConfig {
  /** At least 32 characters; the key for credentials at rest. Required when a server uses mode gateway or user. */
  secret?: string;
  /** The gateway's Client ID Metadata Document URL (https); absent: no CIMD. */
  clientMetadataUrl?: string;
  /** Default "Manifold". */
  clientName: string;
  /** Default: advertiseUrl (or the bound address) + /oauth/callback. */
  redirectUri?: string;
  /** How long an authorization URL stays valid (default 600). */
  flowTtlSeconds: number;
  /** Refresh this long before expiry (default 60). */
  refreshSkewSeconds: number;
}

export interface DisclosureConfig {
  /** Per-server budget in tokens (4 characters per token), or 'off'. Default 20000. */
  budgetTokens: number | 'off';
  /** Servers that always inline every schema. Default []. */
  alwaysLoad: string[];
}

export interface TenantConfig {
  /** Caps what this tenant's tokens may carry: effective grants = token grants ∩ these. Absent: no cap. */
  grants?: string[];
  /** Overrides gateway.callsPerMinute for this tenant. */
  callsPerMinute?: number;
}

/** `gateway.auth`: JWT verification for every request (MCP authorization, RFC 9728). */
export interface AuthConfig {
  issuer: string;
  audience: string;
  /** Exactly one key source. */
  jwksUrl?: string;
  /** A local JWKS file; read by the Node host and handed to the core as `jwks`. */
  jwksFile?: string;
  /** A PEM public key (SPKI). */
  publicKey?: string;
  /** HS256 shared secret, for development; usually `${VAR}`. */
  secret?: string;
  /** Inline JWKS (what jwksFile or the Workers MANIFOLD_JWKS variable resolve to). */
  jwks?: { keys: Record<string, unknown>[] };
  /** Allowlist; default follows the key source. `none` is never allowed. */
  algorithms?: string[];
  /** At most 60. Default 30. */
  clockToleranceSeconds: number;
  /**
   * A token living longer than this (`exp - iat`, or `exp - now` without `iat`) is refused.
   * Default 86400 (a day).
   */
  maxTokenLifetimeSeconds: number;
  /** JOSE `typ` values accepted (case-insensitive); a token without `typ` passes. Default JWT, at+jwt. */
  tokenTypes: string[];
  /** Claim naming the tenant. Default `sub`. */
  tenantClaim: string;
  /** Claim holding an array of grant patterns. Absent: grants come from `scope` entries `tools:<pattern>`. */
  grantsClaim?: string;
  /**
   * A claim naming the profile a token is for: it is served that profile at `/mcp`, and refused at
   * any other profile's path. Absent: tokens are not bound to a profile.
   */
  profileClaim?: string;
  tenants: Record<string, TenantConfig>;
  /** Authorization servers advertised in protected-resource metadata. Default []. */
  authorizationServers: string[];
  /** The resource (endpoint URL) advertised; default: the request's origin + /mcp. */
  resource?: string;
  /** Remote JWKS: minimum seconds between refetches (default 30) and fetch timeout ms (default 5000). */
  jwksCooldownSeconds: number;
  jwksTimeoutMs: number;
}

export interface GatewayConfig {
  /** #54: where servers are looked up by name (default the official registry). */
  registry: RegistryConfig;
  /** #54: who a stdio client is without `auth`; absent: anonymous. */
  localPrincipal?: LocalPrincipalConfig;
  host: string;
  port: number;
  logLevel: LogLevel;
  /** Extra browser origins allowed to call /mcp. Loopback origins are always allowed. */
  allowedOrigins: string[];
  /** Host header values accepted besides loopback names. Empty and bound to loopback: loopback only. */
  hostnames: string[];
  maxBodyBytes: number;
  maxSessions: number;
  /** Sessions one principal (tenant + subject) may hold; its oldest goes past this (#13.7). */
  maxSessionsPerPrincipal: number;
  /** Sessions one tenant may hold across its subjects; its oldest goes past this. */
  maxSessionsPerTenant: number;
  sessionIdleSeconds: number;
  /**
   * A 2025-03-26 JSON-RPC batch: at most this many messages are taken (default 100); each request
   * past it is answered with an error and not run.
   */
  maxBatchMessages: number;
  /**
   * The whole answer to a batch stays within this many bytes (default 4 MiB): once a request's
   * answer would not fit, it and the requests after it are answered with errors.
   */
  maxBatchAnswerBytes: number;
  /**
   * Modern calls held open while their client gathers input (MRTR): in total, per principal and
   * per tenant (defaults 10000, 100, 1000). Past a bound, the newcomer's own principal's (or
   * tenant's) oldest goes first (SECURITY G4).
   */
  maxHeldCalls: number;
  maxHeldCallsPerPrincipal: number;
  maxHeldCallsPerTenant: number;
  /** 2025 servers' tasks waiting for a 2026 client's input: the same bounds (defaults 1000, 20, 100). */
  maxTasksAwaitingInput: number;
  maxTasksAwaitingInputPerPrincipal: number;
  maxTasksAwaitingInputPerTenant: number;
  /** Open `subscriptions/listen` streams: the same bounds (defaults 10000, 16, 1000). */
  maxListenStreams: number;
  maxListenStreamsPerPrincipal: number;
  maxListenStreamsPerTenant: number;
  callTimeoutMs: number;
  maxCallTimeoutMs: number;
  connectTimeoutMs: number;
  /**
   * On a cold start (no stored listing), how long the first tools/list (or call) waits for the
   * upstreams' first connection attempts; past it, it answers with those that are ready, and the
   * rest are announced with list_changed as they come. Default 5000 (above the 3 s a silent
   * legacy stdio server takes to be told from a modern one).
   */
  coldStartMs: number;
  listTimeoutMs: number;
  maxListPages: number;
  pageSize: number;
  shutdownGraceMs: number;
  /**
   * A 2025-11-25 client's call still running after this long has its POST stream closed after a
   * priming event, and the client resumes it with GET and Last-Event-ID (SEP-1699 polling).
   * 0 (the default): streams stay open; they resume after a dropped connection either way.
   */
  streamPollMs: number;
  /**
   * Where Prometheus scrapes the gateway's metrics (GET, text format); `false` serves none. With
   * auth on, a scrape needs a token with the manifold:admin scope. Default "/metrics".
   */
  metricsPath: string | false;
  /**
   * Where the status page is served (#16), its JSON view and assets beside it; `false`: no page
   * (and no recent-call window is kept). Default "/".
   */
  statusPath: string | false;
  /**
   * Node: reload the config when its file changes (SIGHUP reloads it either way). Default true.
   * Workers have no file to watch: a new deployment is the reload.
   */
  watchConfig: boolean;
  /**
   * Egress allowlist: hostnames, optionally with a port, punycode, lowercase. Empty: any public
   * host over https. Private/loopback/link-local/metadata addresses need an explicit entry.
   */
  allowedHosts: string[];
  /** Cap on one serialized tool result (default 65536). */
  maxResultBytes: number;
  /** Cap on one upstream HTTP response body while it streams (default 8 MiB). */
  maxUpstreamBodyBytes: number;
  /** A tool whose input or output schema serializes larger than this is withheld (default 20480). */
  maxSchemaBytes: number;
  /** Descriptions longer than this are clipped with a marker (default 4096). */
  maxDescriptionBytes: number;
  /** A listing with more tools than this fails for that server (default 1000). */
  maxToolsPerServer: number;
  disclosure: DisclosureConfig;
  /**
   * JWT auth. Absent: no auth, and the gateway refuses to bind to a non-loopback host. `false`:
   * explicitly no auth on any host (logged loudly).
   */
  auth?: AuthConfig | false;
  /** Default per-tenant rate limit for tools/call; absent means unlimited. */
  callsPerMinute?: number;
  /**
   * Key of the MAC on pagination cursors. Instances that share it accept each other's cursors (a
   * modern client may page on one and continue on another). Absent: random per process.
   */
  cursorSecret?: string;
  /** The gateway as an OAuth client of protected upstreams (#19). Absent: no server uses OAuth. */
  oauth?: GatewayOAuthConfig;
  /**
   * Where the other instances of a deployment on one Postgres reach this one (an http(s) origin),
   * to forward a held MRTR retry to it. Absent: derived from the bound address, unless that is a
   * wildcard (then this instance takes no forwarded retries).
   */
  advertiseUrl?: string;
  /**
   * The admin API (#52). `fileServers`: whether servers from the config file may be changed or
   * overridden through it (`editable`), or only read (`locked`, the default).
   */
  admin?: { fileServers?: 'locked' | 'editable' };
  /**
   * Durable state (drift baselines, catalog cache, claims, the trust epoch). `false`: in memory
   * only, so baselines last as long as the process. Default `{ path: "./.manifold/state.db" }` on
   * Node. `{ postgres: url }`: one Postgres database shared by several Node instances; the URL
   * (usually a `${VAR}`) is never logged or shown.
   */
  store: { path: string } | { postgres: string } | false;
  /**
   * OpenTelemetry tracing (docs/tracing.md). `false` (the default): off, unless the standard
   * `OTEL_*` variables switch it on. An object switches it on; its fields override those variables.
   */
  tracing: TracingConfig | false;
  drift: {
    /** Re-list every ready upstream this often and check for drift; 0 disables. Default 300. */
    recheckSeconds: number;
  };
  /** How tools/list presents the catalog (#17); a profile may override it. */
  catalog: CatalogSettings;
  // Policy (#51): rules in CEL and guardrails; docs/policy.md.
  /** Rules checked first, for every server. Absent: none. */
  policy?: PolicyConfig;
  /** Guardrails run first, for every server. Absent: none. */
  guardrails?: GuardrailConfig[];
  // --- local servers, contained and on demand (#53) ---
  /** The sandbox of every stdio server whose entry does not say (default `false`: none). */
  sandbox: SandboxConfig | false;
  /** Where sandboxed servers get their private data directories (default "./.manifold/servers"). */
  serverDataDir: string;
  /** Servers running at once; past it the least recently used idle one stops. 0 (default): no bound. */
  maxRunningServers: number;
  // --- end #53 ---
  /** The limits of one code-mode run (#50: `manifold__run_code`). */
  code: CodeLimits;
}

/** The limits of one code-mode run; each ends the run with an isError result naming it. */
export interface CodeLimits {
  /** Wall clock, calls included (default 30000). */
  timeoutMs: number;
  /** CPU time of the program itself, enforced by an interrupt (default 5000). */
  cpuMs: number;
  /** The sandbox's heap (default 64 MiB). */
  memoryBytes: number;
  /** Tool calls per run (default 50). */
  maxCalls: number;
  /** Bytes of console output kept (default 16384); the rest is dropped with a marker. */
  maxLogBytes: number;
  /** `ask`: the caller's user approves each program, shown its code, before it runs (default `allow`). */
  approval: 'allow' | 'ask';
  /** How long that question waits for an answer (default 120). */
  approvalTimeoutSeconds: number;
}

export interface CatalogSettings {
  /**
   * `full` (default): tools/list lists every visible tool. `search`: only the gateway's
   * meta-tools (search, call, describe) and the pinned tools; the rest are found by search.
   */
  mode: 'full' | 'search' | 'code';
  /** A full view with more tools than this is served in search mode instead (default 128). */
  maxTools: number;
  /** Globs over exposed names listed in search mode too (default []). */
  pin: string[];
  /** The most tools one search answers with (default 10, at most 50). */
  searchLimit: number;
}

/** A named subset of the catalog, served at `/mcp/<name>` (#17). */
export interface ProfileConfig {
  name: string;
  /** Servers whose tools, prompts and resources it shows; absent: every server. */
  servers?: string[];
  /** Globs over exposed tool names it shows; absent: every tool of its servers. */
  tools?: string[];
  catalog: CatalogSettings;
  /** Overrides every server's disclosure budget in this profile (alwaysLoad still wins). */
  budgetTokens?: number | 'off';
  // Policy (#51): rules and guardrails for requests served in this profile.
  policy?: PolicyConfig;
  guardrails?: GuardrailConfig[];
}

export interface Config {
  gateway: GatewayConfig;
  /** In config-file order; the merged catalog follows this order. */
  servers: ServerConfig[];
  /** Named profiles (default none). */
  profiles: ProfileConfig[];
}

/** One problem found in a config file. `path` is a JSON path such as `mcpServers.github.url`. */
export interface ConfigIssue {
  path: string;
  message: string;
  /** What to change, in one sentence. */
  fix?: string;
}

export type ConfigResult =
  | { ok: true; config: Config; warnings: ConfigIssue[]; secrets: string[] }
  | { ok: false; errors: ConfigIssue[]; warnings: ConfigIssue[] };

/** `gateway.tracing`: where spans go and under which service name. */
export interface TracingConfig {
  /** The OTLP/HTTP base URL; spans are POSTed to `<otlpEndpoint>/v1/traces`. Absent: the OTEL_* variables, else http://localhost:4318. */
  otlpEndpoint?: string;
  /** The `service.name` of the spans. Absent: OTEL_SERVICE_NAME, else "manifold". */
  serviceName?: string;
}

/** How the gateway authenticates at an authorization server's token endpoint (RFC 8414). */
export type TokenAuthMethod = 'none' | 'client_secret_basic' | 'client_secret_post';

// --- Overrides and trust on first listing (#54) -------------------------------------------------

/**
 * What happens to one argument of an overridden tool. `fixed` and `hidden` leave the schema the
 * client sees and are set on every call (a hidden one without a value is never sent); `default`
 * stays visible and is filled in when absent; `rename` is shown under its new name and mapped back.
 */
export type ArgOverride =
  | { kind: 'fixed'; value: unknown }
  | { kind: 'hidden'; value?: unknown }
  | { kind: 'default'; value: unknown; description?: string }
  | { kind: 'rename'; to: string; description?: string }
  | { kind: 'describe'; description: string };

/** A server's `overrides["<upstream tool>"]`: how the gateway shows that tool. */
export interface ToolOverride {
  /** The tool's new name before the server's prefix (so `<prefix>__<name>` is exposed). */
  name?: string;
  title?: string;
  description?: string;
  /** Shallow-merged over the upstream's annotations. */
  annotations?: Record<string, unknown>;
  args: Record<string, ArgOverride>;
}

/** A server's `promptOverrides["<upstream prompt>"]`: its name, title and description. */
export interface PromptOverride {
  name?: string;
  title?: string;
  description?: string;
}

/**
 * A server's `trust`: `first-use` (the default) trusts its first listing as the baseline;
 * `review` holds that first listing until an operator accepts it (`manifold retrust`), as a
 * server added from a registry starts (SECURITY J3).
 */
export type TrustMode = 'first-use' | 'review';

/** `gateway.registry` (#54): the MCP Registry `manifold add` and `manifold search-registry` read. */
export interface RegistryConfig {
  /** Default https://registry.modelcontextprotocol.io (the official registry). */
  url: string;
}

/**
 * `gateway.localPrincipal` (#54): who a `manifold stdio` client is when the gateway has no `auth`.
 * Absent: the anonymous principal (every tool the config exposes), as over HTTP without auth.
 */
export interface LocalPrincipalConfig {
  /** Default "local". */
  subject: string;
  /** Default "default". */
  tenant: string;
  /** Globs over exposed tool names. Default ["*"]. */
  grants: string[];
  /** Default false. */
  admin: boolean;
}
