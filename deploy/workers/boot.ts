import { formatIssues, parseConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import { isObject } from '../../src/lib/json.js';
import type { Logger } from '../../src/lib/log.js';
import { workersLogger } from './platform.js';

/** The bindings every place of the deployment reads (wrangler.jsonc). */
export interface Env {
  /** The old path (#15 escape hatch): every request to one object running the whole gateway. */
  MANIFOLD: DurableObjectNamespace;
  /** One object per upstream server (`idFromName(server)`): its baseline, verification, listing. */
  UPSTREAMS: DurableObjectNamespace;
  /** One object per tenant (`idFromName('tenant:' + key)`), and the deployment key's object. */
  TENANTS: DurableObjectNamespace;
  /** The same JSON config as Node's manifold.json (a secret or a variable). */
  MANIFOLD_CONFIG?: string;
  /** A JWK Set for gateway.auth, standing in for jwksFile (there is no file system). */
  MANIFOLD_JWKS?: string;
  /** `object`: every request goes to the one `MANIFOLD` object (the layout before #15). */
  MANIFOLD_ROUTE?: string;
  /** How long isolates serve a snapshot when its server gave no `ttlMs` (default 5000, at least 1000). */
  MANIFOLD_SNAPSHOT_TTL_MS?: string;
  [key: string]: unknown;
}

export interface Booted {
  config: Config;
  secrets: readonly string[];
  log: Logger;
  /** The bindings, for Platform.readSecret (#19: a static server's `${VAR}` read again). */
  env?: Env;
}

export function configError(status: number, message: string): Response {
  return Response.json({ error: message }, { status });
}

/**
 * Why a place cannot serve, kept while the deployment is wrong: each request gets a response
 * of its own, since a `Response` (or its clone) can be read only once.
 */
export class ConfigFailure {
  constructor(
    readonly status: number,
    readonly message: string,
  ) {}

  response(): Response {
    return configError(this.status, this.message);
  }
}

/**
 * MANIFOLD_CONFIG read and checked the same way by the Worker and by every object: the config,
 * or the 500 that says what is wrong with it (never a token or a `${VAR}` value).
 */
export function readConfig(env: Env): Booted | ConfigFailure {
  const vars: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) if (typeof v === 'string') vars[k] = v;
  const parsed = parseConfig(env.MANIFOLD_CONFIG ?? '', vars, 'MANIFOLD_CONFIG');
  if (!parsed.ok) {
    const text = formatIssues(parsed.errors, 'MANIFOLD_CONFIG');
    console.error(text);
    return new ConfigFailure(500, `invalid MANIFOLD_CONFIG:\n${text}`);
  }
  const config: Config = parsed.config;
  const log = workersLogger(config.gateway.logLevel, parsed.secrets);
  for (const w of parsed.warnings) log.warn('config.warning', { path: w.path, message: w.message });
  const auth = config.gateway.auth;
  if (auth === undefined) {
    // A Worker is on the public internet: the loopback-only default cannot apply here.
    return new ConfigFailure(
      500,
      'gateway.auth is required on Workers (or "auth": false to serve without authentication)',
    );
  }
  if (config.gateway.store && 'postgres' in config.gateway.store) {
    return new ConfigFailure(
      500,
      'gateway.store.postgres is for Node instances; on Workers the state lives in Durable Objects: remove "store" from MANIFOLD_CONFIG',
    );
  }
  if (auth && auth.jwksFile !== undefined) {
    if (!env.MANIFOLD_JWKS) {
      return new ConfigFailure(500, 'gateway.auth.jwksFile needs the MANIFOLD_JWKS variable on Workers');
    }
    const jwks = jwkSet(env.MANIFOLD_JWKS);
    if (!jwks) {
      return new ConfigFailure(
        500,
        'MANIFOLD_JWKS is not a JWK Set: set it to the JSON of one, {"keys": [...]} (RFC 7517 §5)',
      );
    }
    auth.jwks = jwks;
  }
  return { config, secrets: parsed.secrets, log, env };
}

/** `{"keys": [...]}` with objects for keys, or undefined (the refusal never repeats the text). */
function jwkSet(text: string): { keys: Record<string, unknown>[] } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(parsed) || !Array.isArray(parsed.keys) || !parsed.keys.every(isObject)) return undefined;
  return parsed as { keys: Record<string, unknown>[] };
}

/** The path prefix of the routes objects serve to the Worker alone; the Worker answers 404 for it. */
export const INTERNAL = '/__manifold/';
/** The header by which the Worker tells an upstream object which server it is. */
export const SERVER_HEADER = 'x-manifold-server';
/** Set by the Worker on what it sends a tenant object: whose object it is (never from a client). */
export const TENANT_HEADER = 'x-manifold-tenant';
/** Any origin will do for a Durable Object stub's fetch: only the path is read. */
export const INTERNAL_ORIGIN = 'https://manifold.internal';
