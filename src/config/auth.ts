/** Reads `gateway.auth`: `false`, or issuer, audience, exactly one key source and the optional rest. */

import { isObject, type JsonObject } from '../lib/json.js';
import { checkAlgorithms, checkHttpsUrl, checkPublicKey, checkResource, checkSecret } from './auth-checks.js';
import { AUTH_DEFAULTS, KEY_SOURCES } from './defaults.js';
import { FIELD_TEXT } from './field-text.js';
import { error, type Findings, hasIssueUnder, interpolateField, readNested } from './findings.js';
import { describeKind, validateShape } from './issues.js';
import { keysOf } from './json-parse.js';
import { formatPath, type PathSegment } from './paths.js';
import { AUTH_KEYS, authEntrySchema, TENANT_KEYS } from './schema.js';
import type { AuthConfig, TenantConfig } from './types.js';
import { unknownKeyWarning } from './unknown-keys.js';

const quoteList = (names: readonly string[], conjunction: 'and' | 'or') => {
  const q = names.map((n) => JSON.stringify(n));
  return q.length < 2 ? q.join('') : `${q.slice(0, -1).join(', ')} ${conjunction} ${q[q.length - 1]}`;
};

/** Reads `tenants`: each entry's known keys are interpolated, unknown keys warned about. */
function readTenants(f: Findings, raw: unknown, base: PathSegment[]): unknown {
  if (!isObject(raw)) return raw;
  return Object.fromEntries(
    keysOf(raw).map((id) => [id, readNested(f, raw[id], [...base, id], TENANT_KEYS)]),
  );
}

/** `gateway.auth`: `false`, or an object with issuer, audience and exactly one key source. */
export function readAuth(f: Findings, raw: unknown, base: PathSegment[]): AuthConfig | false | undefined {
  if (raw === false) return false;
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object with issuer, audience and a key source, or false, got ${describeKind(raw)}`,
      'write auth as {"issuer": "https://auth.example.com/", "audience": "https://mcp.example.com/mcp", "jwksUrl": "https://auth.example.com/.well-known/jwks.json"}, or false to serve without authentication',
    );
    return undefined;
  }
  const before = f.errors.length;
  const picked: JsonObject = {};
  for (const key of keysOf(raw)) {
    if (!AUTH_KEYS.includes(key)) {
      f.warnings.push(unknownKeyWarning([...base, key], AUTH_KEYS));
      continue;
    }
    picked[key] =
      key === 'tenants'
        ? readTenants(f, raw[key], [...base, key])
        : interpolateField(f, raw[key], [...base, key]);
  }
  const issues = validateShape(authEntrySchema, picked, {
    table: FIELD_TEXT.auth,
    base,
    tainted: f.interpolator.tainted,
  });
  f.errors.push(...issues);
  const has = (key: string) => picked[key] !== undefined;
  const valid = (key: string) => has(key) && !hasIssueUnder(issues, [...base, key]);

  for (const key of ['issuer', 'audience'] as const) {
    if (has(key)) continue;
    const text = FIELD_TEXT.auth[key]!;
    error(
      f,
      [...base, key],
      `is missing: tokens are checked against their "${key === 'issuer' ? 'iss' : 'aud'}" claim`,
      text.fix,
    );
  }

  const sources = KEY_SOURCES.filter(has);
  if (sources.length === 0) {
    error(
      f,
      base,
      `has no key source: set exactly one of ${quoteList(KEY_SOURCES, 'or')}`,
      'add jwksUrl for an identity provider, jwksFile for keys made by `manifold keys`, publicKey for a PEM key, or secret for a shared HS256 secret',
    );
  } else if (sources.length > 1) {
    error(
      f,
      base,
      `has several key sources (${quoteList(sources, 'and')}); set exactly one`,
      `keep one of ${quoteList(sources, 'or')} and remove the others`,
    );
  }
  const source = sources.length === 1 ? sources[0] : undefined;
  if (valid('jwksUrl')) checkHttpsUrl(f, picked.jwksUrl as string, [...base, 'jwksUrl'], true);
  if (valid('publicKey')) checkPublicKey(f, picked.publicKey as string, [...base, 'publicKey']);
  let algorithms: string[] | undefined;
  if (valid('algorithms')) {
    algorithms = checkAlgorithms(f, picked.algorithms as string[], source, [...base, 'algorithms']);
  }
  if (valid('secret')) checkSecret(f, picked.secret as string, [...base, 'secret'], algorithms);
  if (valid('authorizationServers')) {
    (picked.authorizationServers as string[]).forEach((url, i) => {
      checkHttpsUrl(f, url, [...base, 'authorizationServers', i], false);
    });
  }
  if (valid('resource')) checkResource(f, picked.resource as string, [...base, 'resource']);

  const tenants: Record<string, TenantConfig> = Object.create(null);
  if (valid('tenants')) {
    const given = picked.tenants as Record<string, { grants?: string[]; callsPerMinute?: number }>;
    for (const id of Object.keys(given)) {
      const entry = given[id]!;
      const tenant: TenantConfig = {};
      if (entry.grants !== undefined) {
        tenant.grants = [...entry.grants];
        entry.grants.forEach((g, i) => {
          if (!g.startsWith('tools:')) return;
          f.warnings.push({
            path: formatPath([...base, 'tenants', id, 'grants', i]),
            message:
              'starts with "tools:", but tenant grants are patterns over exposed tool names, so it matches nothing',
            fix: 'drop the "tools:" part, e.g. "github__*"; "tools:" belongs only in token scopes',
          });
        });
      }
      if (entry.callsPerMinute !== undefined) tenant.callsPerMinute = entry.callsPerMinute;
      Object.defineProperty(tenants, id, {
        value: tenant,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }

  if (f.errors.length > before || source === undefined) return undefined;
  const value = (key: string) => picked[key] as never;
  const auth: AuthConfig = {
    issuer: value('issuer'),
    audience: value('audience'),
    clockToleranceSeconds: has('clockToleranceSeconds')
      ? value('clockToleranceSeconds')
      : AUTH_DEFAULTS.clockToleranceSeconds,
    maxTokenLifetimeSeconds: has('maxTokenLifetimeSeconds')
      ? value('maxTokenLifetimeSeconds')
      : AUTH_DEFAULTS.maxTokenLifetimeSeconds,
    tokenTypes: has('tokenTypes') ? value('tokenTypes') : [...AUTH_DEFAULTS.tokenTypes],
    tenantClaim: has('tenantClaim') ? value('tenantClaim') : AUTH_DEFAULTS.tenantClaim,
    tenants,
    authorizationServers: has('authorizationServers')
      ? [...new Set(picked.authorizationServers as string[])]
      : [],
    jwksCooldownSeconds: has('jwksCooldownSeconds')
      ? value('jwksCooldownSeconds')
      : AUTH_DEFAULTS.jwksCooldownSeconds,
    jwksTimeoutMs: has('jwksTimeoutMs') ? value('jwksTimeoutMs') : AUTH_DEFAULTS.jwksTimeoutMs,
  };
  auth[source] = value(source);
  if (algorithms !== undefined) auth.algorithms = algorithms;
  if (has('grantsClaim')) auth.grantsClaim = value('grantsClaim');
  if (has('profileClaim')) auth.profileClaim = value('profileClaim');
  if (has('resource')) auth.resource = value('resource');
  return auth;
}
