/**
 * From a verified token to a Principal, and from a Principal to "may this caller see this tool".
 *
 * Grants are globs over exposed tool names (guards/glob.ts). They come from the token, and the
 * tenant's `grants` in config cap them: a tool is visible only if it matches the token's grants AND
 * the cap. Everything fails closed: no grants, no tools.
 */
import type { JWTPayload } from 'jose';
import type { AuthConfig } from '../config/types.js';
import { compileGlobs } from '../guards/glob.js';
import { isRiskClass, type RiskClass } from '../guards/risk.js';
import { normalizeUriPattern } from '../guards/uri-normal.js';
import { unauthorized } from './jwt-errors.js';
import type { HeaderBag, Principal } from './principal.js';

/** The scope (RFC 6749 §3.3) that unlocks operator detail such as the full health report. */
export const ADMIN_SCOPE = 'manifold:admin';

/** Scope entries `tools:<pattern>` grant `<pattern>`. */
const TOOLS_SCOPE_PREFIX = 'tools:';
/**
 * Grants over the other kinds name their kind: `prompts:<glob over exposed prompt names>` and
 * `resources:<glob over <label>__<upstream URI or template, in normal form>>`. A bare pattern (or
 * `tools:`) is about tools, as it always was.
 */
export const KIND_PREFIXES = { prompts: 'prompts:', resources: 'resources:' } as const;
export type GrantKind = 'tools' | keyof typeof KIND_PREFIXES;
/**
 * `risk:<class>` grants every tool of that class, on every server (guards/risk.ts). A tool whose
 * class is `undeclared` is never matched by one: nobody vouched for what it does.
 */
export const RISK_GRANT_PREFIX = 'risk:';

/** The patterns of one kind, prefixes removed. */
export function patternsOf(patterns: readonly string[], kind: GrantKind): string[] {
  if (kind === 'tools') {
    return patterns.filter(
      (p) =>
        !p.startsWith(KIND_PREFIXES.prompts) &&
        !p.startsWith(KIND_PREFIXES.resources) &&
        !p.startsWith(RISK_GRANT_PREFIX),
    );
  }
  const prefix = KIND_PREFIXES[kind];
  const kept = patterns
    .filter((p) => p.startsWith(prefix) && p.length > prefix.length)
    .map((p) => p.slice(prefix.length));
  return kind === 'resources' ? kept.map(resourcePattern) : kept;
}

/**
 * A resources grant in the form of the keys it is matched against, `<label>__<URI>` with the URI
 * normalised (guards/uri-normal.ts): the pattern's URI is put in the same form.
 */
function resourcePattern(pattern: string): string {
  const split = pattern.indexOf('__');
  if (split === -1) return pattern;
  return pattern.slice(0, split + 2) + normalizeUriPattern(pattern.slice(split + 2));
}

const isKindScope = (s: string) =>
  s.startsWith(KIND_PREFIXES.prompts) ||
  s.startsWith(KIND_PREFIXES.resources) ||
  (s.startsWith(RISK_GRANT_PREFIX) && s.length > RISK_GRANT_PREFIX.length);

/** The classes named by `risk:<class>` grants; `undeclared` is never grantable. */
function riskClassesOf(patterns: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const p of patterns) {
    if (!p.startsWith(RISK_GRANT_PREFIX)) continue;
    const name = p.slice(RISK_GRANT_PREFIX.length);
    if (isRiskClass(name)) out.add(name);
  }
  return out;
}

/**
 * RFC 6750 §2.1: `Authorization: Bearer <b64token>`, where
 * b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=". The scheme is
 * case-insensitive (RFC 9110 §11.1); one or more spaces separate it from the token.
 */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i;

/**
 * The bearer token of a request, from the Authorization header only (RFC 6750 §2.1).
 *
 * The query string (RFC 6750 §2.3) and form bodies (§2.2) are never read (SECURITY A3): URLs end up
 * in logs, proxies and browser history. `presented` tells "no credentials" (a plain 401 challenge)
 * from "credentials we cannot use" (401 with error="invalid_token", RFC 6750 §3.1).
 *
 * @example
 * extractBearer(new Request('https://gw/mcp', { headers: { authorization: 'bearer abc' } }));
 * // { token: 'abc', presented: true }
 * extractBearer(new Request('https://gw/mcp?access_token=abc')); // { presented: false }
 * extractBearer(new Request('https://gw/mcp', { headers: { authorization: 'Basic Zm9v' } }));
 * // { presented: true } (no token)
 */
export function extractBearer(request: { readonly headers: HeaderBag }): {
  token?: string;
  presented: boolean;
} {
  // Headers.get joins repeated headers with ", ", which the pattern refuses: two Authorization
  // headers are ambiguous and count as malformed.
  const header = request.headers.get('authorization');
  if (header === null) return { presented: false };
  const token = BEARER.exec(header)?.[1];
  return token === undefined ? { presented: true } : { token, presented: true };
}

/**
 * The Principal for verified claims. Throws ManifoldError ERR_UNAUTHORIZED ('invalid token') when
 * the subject or the tenant is missing: a token that does not say who it is grants nothing.
 *
 * - `subject` is `sub` (RFC 7519 §4.1.2), a non-empty string.
 * - `tenant` is the claim named by `auth.tenantClaim` (default `sub`), a non-empty string.
 * - grants: if `auth.grantsClaim` is set, that claim must be an array of patterns (anything else
 *   grants nothing); otherwise the `scope` claim (RFC 8693 §4.2: space-delimited string; some
 *   issuers send an array) contributes each `tools:<pattern>` entry.
 * - `admin` is the scope `manifold:admin`, whichever claim holds the grants.
 * - `cap` is `auth.tenants[tenant].grants`, when configured.
 *
 * @example
 * principalFromClaims({ sub: 'u1', scope: 'openid tools:github__* manifold:admin' }, auth);
 * // { subject: 'u1', tenant: 'u1', grants: ['github__*'], admin: true, key: '["u1","u1"]', … }
 */
export function principalFromClaims(payload: JWTPayload, auth: AuthConfig): Principal {
  const subject = payload.sub;
  if (typeof subject !== 'string' || subject === '') throw unauthorized('missing sub');
  const tenantClaim = auth.tenantClaim || 'sub';
  const tenant = (payload as Record<string, unknown>)[tenantClaim];
  if (typeof tenant !== 'string' || tenant === '') throw unauthorized('missing tenant claim');

  const scopes = scopeEntries(payload.scope);
  let grants: string[];
  if (auth.grantsClaim) {
    const claim = (payload as Record<string, unknown>)[auth.grantsClaim];
    // Identity providers that emit permissions as `tools:<pattern>` (Auth0 RBAC `permissions`)
    // and ones that emit bare patterns (Entra `roles`) both work.
    grants = Array.isArray(claim)
      ? claim
          .filter((g): g is string => typeof g === 'string' && g !== '')
          .map((g) => (g.startsWith(TOOLS_SCOPE_PREFIX) ? g.slice(TOOLS_SCOPE_PREFIX.length) : g))
          .filter((g) => g !== '')
      : [];
  } else {
    grants = [
      ...scopes
        .filter((s) => s.startsWith(TOOLS_SCOPE_PREFIX) && s.length > TOOLS_SCOPE_PREFIX.length)
        .map((s) => s.slice(TOOLS_SCOPE_PREFIX.length)),
      ...scopes.filter(isKindScope),
    ];
  }
  grants = [...new Set(grants)].sort();
  const admin = scopes.includes(ADMIN_SCOPE);

  // Own properties only: a tenant named `constructor` or `__proto__` must not read Object.prototype.
  const tenantConfig = Object.hasOwn(auth.tenants ?? {}, tenant) ? auth.tenants[tenant] : undefined;
  const cap = Array.isArray(tenantConfig?.grants) ? [...new Set(tenantConfig.grants)].sort() : undefined;

  // JSON arrays, not concatenation: no choice of tenant and subject can collide with another pair.
  const key = JSON.stringify([tenant, subject]);
  const viewKey = JSON.stringify([tenant, subject, grants, cap ?? null, admin]);
  // What it sees does not depend on the subject: one view per tenant and grant set (#18).
  const shareKey = JSON.stringify([tenant, grants, cap ?? null, admin]);
  const principal: Principal = { subject, tenant, grants, key, viewKey, shareKey, admin };
  if (cap) principal.cap = cap;
  // For policy rules (#51); a rule that reads them widens the share key (gateway.ts).
  principal.scopes = scopes;
  principal.claims = payload as Record<string, unknown>;
  if (auth.profileClaim) {
    // A token that names no profile where one is expected is served no profile-specific view:
    // it sees what /mcp shows, narrowed by its grants as always.
    const bound = (payload as Record<string, unknown>)[auth.profileClaim];
    if (typeof bound === 'string' && bound !== '') principal.boundProfile = bound;
  }
  return principal;
}

/**
 * "May this principal see the exposed tool `name`?": its grants AND its tenant's cap. `'*'` grants
 * (auth off) and the glob `*` match everything; an empty list matches nothing (fail closed).
 *
 * @example
 * const granted = grantsMatcher({ ...p, grants: ['github__*'], cap: ['github__get_*'] });
 * granted('github__get_issue'); // true
 * granted('github__delete_repo'); // false: outside the cap
 */
export function grantsMatcher(
  principal: Principal,
  kind: GrantKind = 'tools',
): (exposedName: string, risk?: RiskClass) => boolean {
  const grants = principal.grants;
  const list = Array.isArray(grants) ? grants : [];
  const matcher = (patterns: readonly string[]) => {
    const globs = compileGlobs(patternsOf(patterns, kind));
    const classes = kind === 'tools' ? riskClassesOf(patterns) : new Set<string>();
    if (classes.size === 0) return (name: string) => globs(name);
    return (name: string, risk?: RiskClass) =>
      globs(name) || (risk !== undefined && risk !== 'undeclared' && classes.has(risk));
  };
  const granted = grants === '*' ? () => true : matcher(list);
  const capped = principal.cap === undefined ? () => true : matcher(principal.cap);
  return function isGranted(exposedName: string, risk?: RiskClass): boolean {
    return granted(exposedName, risk) && capped(exposedName, risk);
  };
}

function scopeEntries(scope: unknown): string[] {
  if (typeof scope === 'string') return scope.split(' ').filter((s) => s !== '');
  if (Array.isArray(scope)) return scope.filter((s): s is string => typeof s === 'string' && s !== '');
  return [];
}

/**
 * Whether a principal's grants could reach anything on the server with this name prefix: some
 * pattern of any kind (and of the tenant cap, when there is one) whose literal start is
 * compatible with `<prefix>__`. An unprefixed server (`prefix: false`) has no such mark, so only a
 * principal that sees everything may name it. Used to keep server names out of errors shown to
 * callers that cannot use them (#13.4).
 */
export function mayNameServer(principal: Principal, prefix: string | false): boolean {
  if (principal.grants === '*' && !principal.cap) return true;
  if (prefix === false) return false;
  const label = `${prefix}__`;
  const reaches = (patterns: readonly string[]) =>
    patterns.some((raw) => {
      const p = raw.startsWith(KIND_PREFIXES.prompts)
        ? raw.slice(KIND_PREFIXES.prompts.length)
        : raw.startsWith(KIND_PREFIXES.resources)
          ? raw.slice(KIND_PREFIXES.resources.length)
          : raw;
      const literal = p.split(/[*?[]/, 1)[0] ?? '';
      return literal.startsWith(label) || label.startsWith(literal);
    });
  const grants = principal.grants === '*' ? ['*'] : principal.grants;
  return reaches(grants) && (!principal.cap || reaches(principal.cap));
}
