/**
 * Reads the top-level `profiles` map (#17): named subsets of the catalog, each served at
 * `/mcp/<name>`, with its own catalog mode and disclosure budget. Every problem is reported with
 * its path, and a server that is not configured is named with the closest one.
 */

import { isObject, type JsonObject } from '../lib/json.js';
import { FIELD_TEXT } from './field-text.js';
import { error, type Findings, hasIssueUnder, interpolateField, isTainted, readNested } from './findings.js';
import type { GatewayRead } from './gateway.js';
import { describeKind, validateShape } from './issues.js';
import { keysOf } from './json-parse.js';
import type { PathSegment } from './paths.js';
import { POLICY_KEYS, readGuardrails, readPolicy } from './policy.js';
import { CATALOG_KEYS, PROFILE_KEYS, profileEntrySchema } from './schema.js';
import type { CatalogSettings, ProfileConfig } from './types.js';
import { closestKey, unknownKeyWarning } from './unknown-keys.js';

/** A profile's name is one path segment: `/mcp/<name>`. */
const PROFILE_NAME = /^[A-Za-z0-9_-]{1,32}$/;

export function readProfiles(
  f: Findings,
  raw: unknown,
  gateway: GatewayRead,
  /** Every server name under mcpServers (or servers), valid or not. */
  declared: readonly string[],
): ProfileConfig[] {
  if (raw === undefined) return [];
  const base: PathSegment[] = ['profiles'];
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object that maps profile names to profiles, got ${describeKind(raw)}`,
      'write profiles as {"coding": {"servers": ["github"], "catalog": {"mode": "search"}}}',
    );
    return [];
  }
  const out: ProfileConfig[] = [];
  for (const name of keysOf(raw)) {
    const path = [...base, name];
    if (!PROFILE_NAME.test(name)) {
      error(
        f,
        path,
        'is not a valid profile name: use 1 to 32 letters, digits, "-" or "_" (it becomes the path /mcp/<name>)',
        'rename the profile, e.g. to "coding"',
      );
      continue;
    }
    const entry = raw[name];
    if (!isObject(entry)) {
      error(
        f,
        path,
        `expected an object describing the profile, got ${describeKind(entry)}`,
        'write the profile as {"servers": ["github"], "tools": ["github__*_issue*"]}',
      );
      continue;
    }
    const picked: JsonObject = {};
    for (const key of keysOf(entry)) {
      // Policy (#51) has its own reader (below).
      if ((POLICY_KEYS as readonly string[]).includes(key)) continue;
      if (!PROFILE_KEYS.includes(key)) {
        f.warnings.push(unknownKeyWarning([...path, key], [...PROFILE_KEYS, ...POLICY_KEYS]));
        continue;
      }
      picked[key] =
        key === 'catalog'
          ? readNested(f, entry[key], [...path, key], CATALOG_KEYS)
          : interpolateField(f, entry[key], [...path, key]);
    }
    const issues = validateShape(profileEntrySchema, picked, {
      table: FIELD_TEXT.profile,
      base: path,
      tainted: f.interpolator.tainted,
    });
    f.errors.push(...issues);
    const valid = (key: string) => picked[key] !== undefined && !hasIssueUnder(issues, [...path, key]);
    const profile: ProfileConfig = {
      name,
      catalog: {
        ...gateway.config.catalog,
        ...(valid('catalog') ? (picked.catalog as Partial<CatalogSettings>) : {}),
      },
    };
    if (valid('servers')) {
      const listed = picked.servers as string[];
      listed.forEach((server, i) => {
        if (declared.includes(server)) return;
        const at = [...path, 'servers', i];
        const near = isTainted(f, at) ? undefined : closestKey(server, declared);
        error(
          f,
          at,
          `names ${isTainted(f, at) ? 'a server' : `server ${JSON.stringify(server)}`}, which is not configured`,
          near
            ? `did you mean ${JSON.stringify(near)}?`
            : `use one of ${declared.map((d) => JSON.stringify(d)).join(', ')}`,
        );
      });
      profile.servers = [...new Set(listed)];
    }
    if (valid('tools')) profile.tools = picked.tools as string[];
    if (valid('budgetTokens')) profile.budgetTokens = picked.budgetTokens as number | 'off';
    // Policy (#51): rules and guardrails for requests served in this profile.
    const policy = readPolicy(f, entry.policy, [...path, 'policy']);
    if (policy?.rules.length) profile.policy = policy;
    const guardrails = readGuardrails(f, entry.guardrails, [...path, 'guardrails']);
    if (guardrails?.length) profile.guardrails = guardrails;
    out.push(profile);
  }
  return out;
}
