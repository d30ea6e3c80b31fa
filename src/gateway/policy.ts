/**
 * The config's policy rules (#51) as the gateway holds them: compiled once per config, and the
 * share key widened to what the view rules read of the caller, so two callers whose grants match
 * but whose claims a rule tells apart are never served each other's view.
 */
import type { Principal } from '../auth/principal.js';
import type { Config } from '../config/types.js';
import { PolicyRules } from '../guards/policy/rules.js';

/** Every rule of a config, compiled (the config reader already reported bad ones). */
export function policyOf(config: Config): PolicyRules {
  const servers = new Map(
    config.servers.filter((s) => s.policy?.rules.length).map((s) => [s.name, s.policy!.rules]),
  );
  const profiles = new Map(
    config.profiles.filter((p) => p.policy?.rules.length).map((p) => [p.name, p.policy!.rules]),
  );
  if (!config.gateway.policy?.rules.length && servers.size === 0 && profiles.size === 0)
    return PolicyRules.none;
  return PolicyRules.compile({ gateway: config.gateway.policy?.rules, servers, profiles });
}

/**
 * The principal with its share key (and view key, which cursors bind to) covering what the view
 * rules read: its subject, its scopes, the claims they name (all of them when a rule uses the
 * claims map whole). Unchanged when no view rule reads the caller beyond its tenant.
 */
export function policyPrincipal(principal: Principal, rules: PolicyRules): Principal {
  const { subject, scopes, claims } = rules.viewReads;
  if (!subject && !scopes && claims !== 'all' && claims.size === 0) return principal;
  const own = principal.claims ?? {};
  const read =
    claims === 'all'
      ? own
      : Object.fromEntries([...claims].sort().map((c) => [c, Object.hasOwn(own, c) ? own[c] : null]));
  const extra = JSON.stringify([
    subject ? principal.subject : null,
    scopes ? [...(principal.scopes ?? [])].sort() : null,
    claims === 'all' || claims.size > 0 ? read : null,
  ]);
  const share = principal.shareKey ?? principal.viewKey;
  return { ...principal, shareKey: `${share}\u0002${extra}`, viewKey: `${principal.viewKey}\u0002${extra}` };
}
