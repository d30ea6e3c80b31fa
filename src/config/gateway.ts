/**
 * Reads `gateway`: the plain settings through one shape, `disclosure` and `drift` key by key,
 * the host lists, the cross-field limits, and `auth`, `store` and `tracing` through their own readers.
 */

import { isObject, type JsonObject } from '../lib/json.js';
import { readAuth } from './auth.js';
import { bindIssue, isLoopbackHost } from './bind.js';
import { DEFAULT_STORE_PATH, GATEWAY_DEFAULTS } from './defaults.js';
import { FIELD_TEXT, POSTGRES_URL_FIX, STORE_SHAPE_TEXT } from './field-text.js';
import {
  error,
  type Findings,
  hasIssueUnder,
  interpolateField,
  readNested,
  readSection,
} from './findings.js';
import { readLocalPrincipal, readRegistry } from './front-door.js';
import { checkAllowedHost, checkHostname, checkOrigin } from './hosts.js';
import { describeKind, validateShape } from './issues.js';
import { keysOf } from './json-parse.js';
import { readGatewayOAuth } from './oauth.js';
import type { PathSegment } from './paths.js';
import { POLICY_KEYS, readGuardrails, readPolicy } from './policy.js';
import { readSandbox } from './sandbox.js';
import {
  CATALOG_KEYS,
  CODE_KEYS,
  DISCLOSURE_KEYS,
  DRIFT_KEYS,
  GATEWAY_KEYS,
  gatewayEntrySchema,
  STORE_KEYS,
  storeEntrySchema,
} from './schema.js';
import { readTracing } from './tracing.js';
import type { GatewayConfig } from './types.js';
import { unknownKeyWarning } from './unknown-keys.js';

export interface GatewayRead {
  config: GatewayConfig;
  /**
   * Keys whose configured value was rejected (the default stands in for them); keys inside
   * `disclosure` and `drift` are written `disclosure.budgetTokens`.
   */
  invalid: Set<string>;
  /** `disclosure.alwaysLoad` as written (interpolated, not deduplicated), so indices match the file. */
  alwaysLoad: string[];
}

/** The objects inside `gateway` read key by key over their defaults, with their keys. */
const NESTED = { disclosure: DISCLOSURE_KEYS, drift: DRIFT_KEYS, catalog: CATALOG_KEYS, code: CODE_KEYS };
type Nested = keyof typeof NESTED;

/** `gateway` keys whose sections have their own readers (`registry` and `localPrincipal`: #54). */
const OWN_READERS = ['auth', 'store', 'tracing', 'oauth', 'sandbox', 'registry', 'localPrincipal'];

/**
 * `gateway.store`: `false` (state in memory only), `{"path": ...}` (a missing path keeps the
 * default), or `{"postgres": url}`. Never both: which database holds the baselines must be plain.
 */
function readStore(f: Findings, raw: unknown, base: PathSegment[]): GatewayConfig['store'] | undefined {
  if (raw === false) return false;
  const picked = readSection(f, raw, base, {
    keys: STORE_KEYS,
    schema: storeEntrySchema,
    table: FIELD_TEXT.store,
    shape: STORE_SHAPE_TEXT,
  });
  if (!picked) return undefined;
  if (picked.postgres !== undefined) {
    if (picked.path !== undefined) {
      error(
        f,
        base,
        'has both "path" and "postgres"',
        'keep one: "path" for a SQLite file on this machine, "postgres" for a database several instances share',
      );
      return undefined;
    }
    const problem = postgresUrlProblem(picked.postgres as string);
    if (problem) {
      error(f, [...base, 'postgres'], problem, POSTGRES_URL_FIX);
      return undefined;
    }
    return { postgres: picked.postgres as string };
  }
  const path = (picked.path as string | undefined) ?? DEFAULT_STORE_PATH;
  if (path.includes('\0')) {
    error(
      f,
      [...base, 'path'],
      'contains a NUL character',
      'remove the NUL character; file paths cannot hold it',
    );
    return undefined;
  }
  return { path };
}

/**
 * What is wrong with a Postgres URL, worded without its value (it holds a password, from a
 * ${VAR}). Its host is not an upstream: the egress guard does not apply, the operator chose it.
 */
function postgresUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'is not a URL';
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    return `must be a postgres: or postgresql: URL, got ${parsed.protocol}`;
  }
  return undefined;
}

/** Why a metrics path cannot be served: not a plain absolute path, or one the gateway already serves. */
function metricsPathProblem(path: string): string | undefined {
  if (!/^\/[A-Za-z0-9._~\-/]*$/.test(path) || path.includes('//')) {
    return 'must be an absolute path of letters, digits and ._~-/ (no query, no "//"), e.g. "/metrics"';
  }
  const taken = ['/mcp', '/healthz', '/.well-known'];
  const clash = taken.find((t) => path === t || path.startsWith(`${t}/`));
  return clash ? `must not be ${clash} or under it: the gateway serves that path itself` : undefined;
}

/** The origin other instances forward to, or why `url` cannot be one. */
function advertiseOrigin(url: string): string | { problem: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { problem: 'is not a valid URL' };
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return { problem: `must be an http: or https: URL, got ${parsed.protocol}` };
  }
  if (parsed.username || parsed.password) return { problem: 'must not carry credentials' };
  if (parsed.pathname !== '/' || parsed.search || parsed.hash) {
    return { problem: 'must be an origin only, without a path, query or fragment' };
  }
  return parsed.origin;
}

export function readGateway(f: Findings, raw: unknown): GatewayRead {
  const base = ['gateway'];
  const config: GatewayConfig = {
    ...GATEWAY_DEFAULTS,
    allowedOrigins: [],
    hostnames: [],
    allowedHosts: [],
    disclosure: { ...GATEWAY_DEFAULTS.disclosure, alwaysLoad: [] },
    store: { path: DEFAULT_STORE_PATH },
    drift: { ...GATEWAY_DEFAULTS.drift },
    catalog: { ...GATEWAY_DEFAULTS.catalog, pin: [] },
    registry: { ...GATEWAY_DEFAULTS.registry },
    code: { ...GATEWAY_DEFAULTS.code },
  };
  const invalid = new Set<string>();
  const nestedKeys = Object.entries(NESTED).flatMap(([name, keys]) => keys.map((k) => `${name}.${k}`));
  let alwaysLoad: string[] = [];
  if (raw === undefined) return { config, invalid, alwaysLoad };
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object, got ${describeKind(raw)}`,
      'write gateway as an object such as {"port": 8787}, or remove it',
    );
    for (const k of [...GATEWAY_KEYS, ...nestedKeys]) invalid.add(k);
    return { config, invalid, alwaysLoad };
  }
  const picked: JsonObject = {};
  for (const key of keysOf(raw)) {
    // Policy (#51) has its own reader (below).
    if ((POLICY_KEYS as readonly string[]).includes(key)) continue;
    if (!(GATEWAY_KEYS as string[]).includes(key)) {
      f.warnings.push(unknownKeyWarning([...base, key], [...GATEWAY_KEYS, ...POLICY_KEYS]));
      continue;
    }
    // Sections with their own readers are read below; the other keys go through one shape.
    if (OWN_READERS.includes(key)) continue;
    picked[key] = Object.hasOwn(NESTED, key)
      ? readNested(f, raw[key], [...base, key], NESTED[key as Nested])
      : interpolateField(f, raw[key], [...base, key]);
  }
  const issues = validateShape(gatewayEntrySchema, picked, {
    table: FIELD_TEXT.gateway,
    base,
    tainted: f.interpolator.tainted,
  });
  f.errors.push(...issues);
  const target = config as unknown as JsonObject;
  for (const key of GATEWAY_KEYS) {
    if (picked[key] === undefined || Object.hasOwn(NESTED, key)) continue;
    if (hasIssueUnder(issues, [...base, key])) invalid.add(key);
    else target[key] = picked[key];
  }
  /** Copies the valid keys of a nested object over their defaults; false if it was not an object. */
  const applyNested = (name: Nested): boolean => {
    const known = NESTED[name];
    const given = picked[name];
    if (given === undefined) return true;
    if (!isObject(given)) {
      invalid.add(name);
      for (const k of known) invalid.add(`${name}.${k}`);
      return false;
    }
    const nested = config[name] as unknown as JsonObject;
    for (const key of known) {
      if (given[key] === undefined) continue;
      if (hasIssueUnder(issues, [...base, name, key])) invalid.add(`${name}.${key}`);
      else nested[key] = given[key];
    }
    return true;
  };
  if (picked.disclosure !== undefined && applyNested('disclosure')) {
    alwaysLoad = config.disclosure.alwaysLoad;
    config.disclosure.alwaysLoad = [...new Set(alwaysLoad)];
  }
  applyNested('drift');
  applyNested('catalog');
  applyNested('code');

  // Each list entry checked (and normalised) on its own; the valid ones kept once each.
  const lists = [
    ['allowedOrigins', checkOrigin],
    ['hostnames', checkHostname],
    ['allowedHosts', checkAllowedHost],
  ] as const;
  for (const [key, check] of lists) {
    if (invalid.has(key)) continue;
    const kept: string[] = [];
    config[key].forEach((entry, i) => {
      const ok = check(f, entry, [...base, key, i]);
      if (ok !== undefined && !kept.includes(ok)) kept.push(ok);
    });
    config[key] = kept;
  }
  if (!invalid.has('metricsPath') && config.metricsPath !== false) {
    const problem = metricsPathProblem(config.metricsPath);
    if (problem) {
      error(
        f,
        [...base, 'metricsPath'],
        problem,
        'write "metricsPath": "/metrics", or false to serve no metrics',
      );
      invalid.add('metricsPath');
      config.metricsPath = GATEWAY_DEFAULTS.metricsPath;
    }
  }
  if (!invalid.has('statusPath') && typeof config.statusPath === 'string') {
    const checked = statusPathProblem(config.statusPath);
    if ('path' in checked) config.statusPath = checked.path;
    else {
      error(
        f,
        [...base, 'statusPath'],
        checked.problem,
        'write a path such as "/" or "/status" (not /mcp, /healthz, /metrics or /.well-known), or false to turn the status page off',
      );
      invalid.add('statusPath');
      config.statusPath = GATEWAY_DEFAULTS.statusPath;
    }
  }
  // The status page owns its path and the files beside it; metrics there would shadow one of them.
  const { statusPath, metricsPath } = config;
  if (typeof statusPath === 'string' && typeof metricsPath === 'string' && !invalid.has('metricsPath')) {
    const dir = statusPath === '/' ? '/' : `${statusPath}/`;
    const pageFiles = [statusPath, ...['status.json', 'status.js', 'status.css'].map((f) => dir + f)];
    if (pageFiles.includes(metricsPath)) {
      error(
        f,
        [...base, 'metricsPath'],
        `is ${metricsPath}, which the status page (gateway.statusPath ${statusPath}) serves`,
        'write "metricsPath": "/metrics", or move gateway.statusPath',
      );
      invalid.add('metricsPath');
    }
  }
  // `low` may not exceed `high`; the error names whichever of the two the file set (`high` if both).
  const ordered = (
    low: 'maxResultBytes' | 'callTimeoutMs',
    high: 'maxUpstreamBodyBytes' | 'maxCallTimeoutMs',
  ) => {
    const [l, h] = [config[low], config[high]];
    if (invalid.has(low) || invalid.has(high) || l <= h) return;
    if (picked[high] !== undefined) {
      error(
        f,
        [...base, high],
        `must be at least gateway.${low} (${l}), got ${h}`,
        `raise ${high} to ${l} or more, or lower ${low}`,
      );
      invalid.add(high);
    } else {
      error(
        f,
        [...base, low],
        `must be at most gateway.${high} (${h}), got ${l}`,
        `lower ${low} to ${h} or less, or raise ${high}`,
      );
      invalid.add(low);
    }
  };
  ordered('maxResultBytes', 'maxUpstreamBodyBytes');
  ordered('callTimeoutMs', 'maxCallTimeoutMs');
  if (!invalid.has('advertiseUrl') && config.advertiseUrl !== undefined) {
    const origin = advertiseOrigin(config.advertiseUrl);
    if (typeof origin === 'string') config.advertiseUrl = origin;
    else {
      error(f, [...base, 'advertiseUrl'], origin.problem, FIELD_TEXT.gateway.advertiseUrl!.fix);
      invalid.add('advertiseUrl');
      delete config.advertiseUrl;
    }
  }
  /** A section with its own reader, when written: its value, or its key marked invalid. */
  const section = <K extends keyof GatewayConfig>(
    key: K,
    read: (f: Findings, raw: unknown, base: PathSegment[]) => GatewayConfig[K] | undefined,
  ): void => {
    if (!Object.hasOwn(raw, key)) return;
    const value = read(f, raw[key], [...base, key]);
    if (value === undefined) invalid.add(key);
    else config[key] = value;
  };
  section('auth', readAuth);
  if (!Object.hasOwn(raw, 'auth') && !invalid.has('host') && !isLoopbackHost(config.host)) {
    // Safe by default: no auth configured means loopback only; `"auth": false` is the way out.
    f.errors.push(bindIssue());
  }
  section('store', readStore);
  section('tracing', readTracing);
  // Local servers (#53): the default sandbox of stdio servers.
  section('sandbox', readSandbox);
  section('oauth', (f, raw, base) => readGatewayOAuth(f, raw, base, config.advertiseUrl));
  // Policy (#51): rules and guardrails, read and compiled by config/policy.ts.
  const policy = readPolicy(f, raw.policy, [...base, 'policy']);
  if (policy?.rules.length) config.policy = policy;
  const guardrails = readGuardrails(f, raw.guardrails, [...base, 'guardrails']);
  if (guardrails?.length) config.guardrails = guardrails;
  // #54: the registry `manifold add` reads, and a stdio client's principal without auth.
  section('registry', readRegistry);
  section('localPrincipal', readLocalPrincipal);
  return { config, invalid, alwaysLoad };
}

/** Paths the gateway serves itself; the status page may be neither one of them nor under one. */
const RESERVED_PATHS = ['/mcp', '/healthz', '/metrics', '/.well-known'] as const;

/** Letters, digits and `-._~` between slashes: nothing a URL would have to encode. */
const SEGMENTS = /^\/(?:[A-Za-z0-9._~-]+\/?)*$/;

/**
 * The status page's path as it is served (a trailing slash dropped, except for "/"), or what is
 * wrong with it.
 *
 * Where `gateway.statusPath` may point (#16). The page, its JSON view and its assets sit at and
 * under this path, so it must leave the gateway's own endpoints alone: an operator who writes
 * "/mcp" would otherwise hide the MCP endpoint behind a status page, or the reverse.
 *
 * @example
 * statusPathProblem('/status/'); // { path: '/status' }
 * statusPathProblem('/mcp/ops'); // { problem: 'is under /mcp, which the gateway serves itself' }
 */
export function statusPathProblem(raw: string): { path: string } | { problem: string } {
  if (!raw.startsWith('/')) return { problem: 'must start with "/"' };
  if (!SEGMENTS.test(raw) || raw.split('/').some((s) => s === '.' || s === '..')) {
    return { problem: 'must be "/" or path segments of letters, digits, "-", ".", "_" and "~"' };
  }
  const path = raw.length > 1 && raw.endsWith('/') ? raw.slice(0, -1) : raw;
  const lower = path.toLowerCase();
  for (const reserved of RESERVED_PATHS) {
    if (lower === reserved) return { problem: `is ${reserved}, which the gateway serves itself` };
    if (lower.startsWith(`${reserved}/`)) {
      return { problem: `is under ${reserved}, which the gateway serves itself` };
    }
  }
  return { path };
}
