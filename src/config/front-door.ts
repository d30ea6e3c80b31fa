/**
 * Reads the two gateway keys of #54: `gateway.registry` (where `manifold add` and
 * `manifold search-registry` look servers up) and `gateway.localPrincipal` (who a `manifold
 * stdio` client is when the gateway has no `auth`). Each its own block, like `store` and `tracing`.
 */
import * as z from 'zod/v4-mini';
import { DEFAULT_REGISTRY_URL } from './defaults.js';
import type { FieldText } from './field-text-policy.js';
import { error, type Findings, readSection } from './findings.js';
import type { PathSegment } from './paths.js';
import type { LocalPrincipalConfig, RegistryConfig } from './types.js';

const registrySchema = z.object({ url: z.string().check(z.minLength(1)) });
const localPrincipalSchema = z.object({
  subject: z.string().check(z.minLength(1)),
  tenant: z.string().check(z.minLength(1)),
  grants: z.array(z.string().check(z.minLength(1))),
  admin: z.boolean(),
});
export const REGISTRY_KEYS = Object.keys(registrySchema.shape);
export const LOCAL_PRINCIPAL_KEYS = Object.keys(localPrincipalSchema.shape);

const REGISTRY_TEXT: Record<string, FieldText> = {
  url: {
    expected: 'an https URL (http only for a host in gateway.allowedHosts)',
    fix: `write "url": "${DEFAULT_REGISTRY_URL}"`,
  },
};

const LOCAL_TEXT: Record<string, FieldText> = {
  subject: { expected: 'a non-empty string', fix: 'write "subject": "me"' },
  tenant: { expected: 'a non-empty string', fix: 'write "tenant": "default"' },
  grants: {
    expected: 'an array of globs over exposed tool names',
    fix: 'write "grants": ["github__*", "docs__search"]',
  },
  'grants[]': { expected: 'a non-empty glob', fix: 'write an exposed tool name or a glob' },
  admin: {
    expected: 'true or false',
    fix: 'write true to let it see health detail, or false',
  },
};

export function readRegistry(f: Findings, raw: unknown, base: PathSegment[]): RegistryConfig | undefined {
  const picked = readSection(f, raw, base, {
    keys: REGISTRY_KEYS,
    schema: z.partial(registrySchema),
    table: REGISTRY_TEXT,
    shape: { expected: 'an object with "url"', fix: `write registry as {"url": "${DEFAULT_REGISTRY_URL}"}` },
  });
  if (!picked) return undefined;
  const url = (picked.url as string | undefined) ?? DEFAULT_REGISTRY_URL;
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (
    !parsed ||
    (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') ||
    parsed.username ||
    parsed.password
  ) {
    error(f, [...base, 'url'], 'is not an http(s) URL without credentials', REGISTRY_TEXT.url!.fix);
    return undefined;
  }
  return { url: url.replace(/\/+$/, '') };
}

export function readLocalPrincipal(
  f: Findings,
  raw: unknown,
  base: PathSegment[],
): LocalPrincipalConfig | undefined {
  const picked = readSection(f, raw, base, {
    keys: LOCAL_PRINCIPAL_KEYS,
    schema: z.partial(localPrincipalSchema),
    table: LOCAL_TEXT,
    shape: {
      expected: 'an object with "subject", "tenant", "grants" and/or "admin"',
      fix: 'write localPrincipal as {"subject": "me", "grants": ["github__*"]}',
    },
  });
  if (!picked) return undefined;
  return {
    subject: (picked.subject as string | undefined) ?? 'local',
    tenant: (picked.tenant as string | undefined) ?? 'default',
    grants: (picked.grants as string[] | undefined) ?? ['*'],
    admin: (picked.admin as boolean | undefined) ?? false,
  };
}
