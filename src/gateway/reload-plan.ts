/**
 * What a config reload changes (#16), decided from the two configs alone: which servers are
 * added, removed, replaced (a new connection) or retuned (the same connection, a new view of it),
 * and which gateway keys apply at once or keep their running value until a restart. Pure, so the
 * whole decision can be read and tested apart from the machinery that applies it (reload.ts).
 */
import type { Config, GatewayConfig, ServerConfig } from '../config/types.js';

/**
 * Fields that only shape what the gateway makes of a server's connection: its names, filters,
 * caps, risk and approval, its call deadline and resends. A change of these alone keeps the
 * connection (and a stdio server's process); any other field (transport, command, args, env,
 * cwd, url, headers, protocol, client features, isolation, disabled) opens a new connection.
 */
export const VIEW_FIELDS = [
  'policy',
  'guardrails',
  'prefix',
  'tools',
  'prompts',
  'resources',
  'timeoutMs',
  'maxResultBytes',
  'budgetTokens',
  'risk',
  'trustAnnotations',
  'approval',
  'retry',
  'maxInstances',
  'instanceIdleSeconds',
] as const satisfies readonly (keyof ServerConfig)[];

/**
 * Gateway keys a running gateway cannot take on: the listener (host, port), what the HTTP edge
 * and the logger were built with (origins, hosts, body cap, session table, log level, auth apart
 * from the tenants' call limits), the egress fetch (allowedHosts, maxUpstreamBodyBytes), the state it opened
 * (store, cursorSecret: a new one would void every cursor and sealed session), and settings read
 * only at start (coldStartMs, drift.recheckSeconds). Everything else is read where it is used and
 * follows the new config.
 */
export const RESTART_KEYS = [
  'host',
  'port',
  'logLevel',
  'allowedOrigins',
  'hostnames',
  'maxBodyBytes',
  'maxSessions',
  'maxSessionsPerPrincipal',
  'maxSessionsPerTenant',
  'sessionIdleSeconds',
  // The tables of held calls, tasks awaiting input and listen streams are built with the edge.
  'maxHeldCalls',
  'maxHeldCallsPerPrincipal',
  'maxHeldCallsPerTenant',
  'maxTasksAwaitingInput',
  'maxTasksAwaitingInputPerPrincipal',
  'maxTasksAwaitingInputPerTenant',
  'maxListenStreams',
  'maxListenStreamsPerPrincipal',
  'maxListenStreamsPerTenant',
  'coldStartMs',
  'allowedHosts',
  'maxUpstreamBodyBytes',
  'auth',
  'cursorSecret',
  'store',
  // The instance registers its URL once, at start (deploy/node/store/postgres/instances.ts).
  'advertiseUrl',
  'drift',
  // Routes mounted when the HTTP edge was built.
  'metricsPath',
  'statusPath',
  // The tracer is built before the gateway, from the config and OTEL_* variables.
  'tracing',
  // The key for upstream credentials and each server's OAuth manager are built at start (#19).
  'oauth',
] as const satisfies readonly (keyof GatewayConfig)[];

export interface ReloadPlan {
  /** Server names in the new config's order, for each fate. */
  added: string[];
  removed: string[];
  /** The connection changed: a new upstream replaces the old one. */
  replaced: string[];
  /** Only view fields changed: the same upstream and connection, its config swapped. */
  retuned: string[];
  unchanged: string[];
  /** Changed gateway keys that apply now (`auth.tenants.callsPerMinute` and `profiles` among them). */
  live: string[];
  /** Changed gateway keys that keep their running value until the gateway restarts. */
  restart: string[];
}

/** Structural equality of plain config data (key order ignored; configs hold no cycles). */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** The server without its view fields: what its connection is made of. */
function connectionOf(server: ServerConfig): Record<string, unknown> {
  const rest: Record<string, unknown> = { ...server };
  for (const f of VIEW_FIELDS) delete rest[f];
  return rest;
}

/**
 * The auth settings apart from the tenants' call limits (read by the rate limiter on every call,
 * so they apply live). A tenant's grants cap stays here: verified tokens are remembered with their
 * grants, so a narrower cap must not look applied while remembered tokens still carry the old one.
 */
function authCore(auth: GatewayConfig['auth']): unknown {
  if (!auth) return auth;
  const grants = Object.entries(auth.tenants).flatMap(([t, c]) => (c.grants ? [[t, c.grants]] : []));
  return { ...auth, tenants: Object.fromEntries(grants) };
}

export function planReload(old: Config, next: Config): ReloadPlan {
  const before = new Map(old.servers.map((s) => [s.name, s]));
  const names = new Set(next.servers.map((s) => s.name));
  const plan: ReloadPlan = {
    added: [],
    removed: old.servers.filter((s) => !names.has(s.name)).map((s) => s.name),
    replaced: [],
    retuned: [],
    unchanged: [],
    live: [],
    restart: [],
  };
  for (const s of next.servers) {
    const was = before.get(s.name);
    if (!was) plan.added.push(s.name);
    else if (sameValue(was, s)) plan.unchanged.push(s.name);
    else if (sameValue(connectionOf(was), connectionOf(s))) plan.retuned.push(s.name);
    else plan.replaced.push(s.name);
  }
  const a = old.gateway as unknown as Record<string, unknown>;
  const b = next.gateway as unknown as Record<string, unknown>;
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (key === 'auth') continue;
    if (sameValue(a[key], b[key])) continue;
    ((RESTART_KEYS as readonly string[]).includes(key) ? plan.restart : plan.live).push(key);
  }
  if (!sameValue(authCore(old.gateway.auth), authCore(next.gateway.auth))) plan.restart.push('auth');
  else if (old.gateway.auth && next.gateway.auth) {
    if (!sameValue(old.gateway.auth.tenants, next.gateway.auth.tenants)) {
      plan.live.push('auth.tenants.callsPerMinute');
    }
  }
  if (!sameValue(old.profiles, next.profiles)) plan.live.push('profiles');
  // A server's rules and guardrails (#51) apply live: views are cut again with them.
  for (const s of next.servers) {
    const was = before.get(s.name);
    if (was && (!sameValue(was.policy, s.policy) || !sameValue(was.guardrails, s.guardrails)))
      plan.live.push(`mcpServers.${s.name}.policy`);
  }
  // A server's credentials manager is built at start (#19): a new or changed `auth` waits for it.
  const authOf = (a: ServerConfig['auth']) => (!a || a.mode === 'static' ? 'static' : a);
  for (const s of next.servers) {
    if (!sameValue(authOf(before.get(s.name)?.auth), authOf(s.auth)))
      plan.restart.push(`mcpServers.${s.name}.auth`);
  }
  return plan;
}

/**
 * The config a gateway runs after the reload: the new one, with the running value of every key
 * that needs a restart, so that nothing reads a value the gateway does not actually use. Pure:
 * the running auth object, which the authenticator holds, takes its new tenants in reload.ts.
 */
export function runningConfig(old: Config, next: Config, plan: ReloadPlan): Config {
  const gateway = { ...next.gateway } as unknown as Record<string, unknown>;
  const was = old.gateway as unknown as Record<string, unknown>;
  for (const key of plan.restart) {
    if (Object.hasOwn(was, key)) gateway[key] = was[key];
    else delete gateway[key];
  }
  return { ...next, gateway: gateway as unknown as GatewayConfig };
}
