/**
 * The status page's JSON view (#16): upstreams with their era, state, last error and counts,
 * what drift holds back and why (the diff against the baseline, escaped), recent calls, and for
 * an admin the config in force with secrets masked. An admin sees every server; anyone else sees
 * only the servers it can see something of, its own tenant's calls, and no config, diffs or
 * diagnostics (the drifted text is withheld from clients, and a tenant is a client).
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Principal } from '../../../auth/principal.js';
import type { Gateway } from '../../../gateway/gateway.js';
import { prettyCanonicalJson } from '../../../guards/canonical-json.js';
import { diffTool, formatDiff, visibleText } from '../../../guards/drift/diff.js';
import type { VerifiedListing } from '../../../guards/drift/verdict.js';
import { clipText } from '../../../guards/text.js';
import { type RecentCalls, UNRESOLVED } from '../../../observe/recent-calls.js';
import { maskedConfig, redactDeep } from './config.js';
import { reachesServer } from './reach.js';

/** Diffs shown per server, and the size of each: a page, not a dump of a hostile listing. */
const MAX_DIFFS = 50;
const MAX_DIFF_BYTES = 16_384;

interface Counts {
  tools: number;
  prompts: number;
  resources: number;
  templates: number;
}

interface HeldTool {
  name: string;
  /** The change against the baseline (quarantined) or the untrusted definition (withheld). */
  diff?: string;
}

const zero = (): Counts => ({ tools: 0, prompts: 0, resources: 0, templates: 0 });

/** Per server, what this principal sees of the catalog and surface (all of it for an admin). */
function countsFor(gateway: Gateway, principal: Principal, admin: boolean): Map<string, Counts> {
  const counts = new Map<string, Counts>();
  const of = (server: string) => {
    let c = counts.get(server);
    if (!c) {
      c = zero();
      counts.set(server, c);
    }
    return c;
  };
  if (admin) {
    for (const e of gateway.catalog.entries) if (!e.meta) of(e.server).tools++;
    const s = gateway.surface;
    for (const e of s.prompts) of(e.server).prompts++;
    for (const e of s.resources) of(e.server).resources++;
    for (const e of s.templates) of(e.server).templates++;
    return counts;
  }
  for (const e of gateway.catalogOf(principal).entries) {
    if (!e.meta && gateway.isVisible(principal, e.name)) of(e.server).tools++;
  }
  for (const e of gateway.views.promptView(principal).entries) of(e.server).prompts++;
  const r = gateway.views.resourceView(principal);
  for (const e of r.resources) of(e.server).resources++;
  for (const e of r.templates) of(e.server).templates++;
  return counts;
}

/** Diffs per verified listing: a listing is replaced, never changed, so its diffs never go stale. */
const diffCache = new WeakMap<VerifiedListing, HeldTool[][]>();

const clip = (text: string) => clipText(text, MAX_DIFF_BYTES).text;

/** What drift holds back from one server, each with its diff, for an admin. */
async function heldTools(
  gateway: Gateway,
  server: string,
): Promise<{ quarantined: HeldTool[]; withheld: HeldTool[] }> {
  const upstream = gateway.pool.get(server);
  const verified = upstream?.verified;
  if (!upstream || !verified) return { quarantined: [], withheld: [] };
  const hit = diffCache.get(verified);
  if (hit) return { quarantined: hit[0]!, withheld: hit[1]! };
  let baseline: Record<string, { tool: Tool }> | undefined;
  try {
    baseline = (await gateway.store.get(server))?.baseline;
  } catch {
    baseline = undefined;
  }
  const quarantined = verified.quarantined.map((tool, i): HeldTool => {
    const before = baseline?.[tool.name]?.tool;
    const name = visibleText(tool.name);
    return i < MAX_DIFFS && before ? { name, diff: clip(formatDiff(diffTool(before, tool))) } : { name };
  });
  const listed = new Map(upstream.driftRecords().map((t) => [t.name, t]));
  const withheld = verified.withheld.map((raw, i): HeldTool => {
    const tool = listed.get(raw);
    const name = visibleText(raw);
    if (!tool || i >= MAX_DIFFS) return { name };
    // Never trusted: the whole definition is the change.
    const shown: Record<string, { after?: string }> = {
      inputSchema: { after: prettyCanonicalJson(tool.inputSchema) },
    };
    if (tool.outputSchema) shown.outputSchema = { after: prettyCanonicalJson(tool.outputSchema) };
    const diff = formatDiff({ tool: raw, description: { after: tool.description }, shown });
    return { name, diff: clip(diff) };
  });
  diffCache.set(verified, [quarantined, withheld]);
  return { quarantined, withheld };
}

/**
 * The JSON view for this principal. Every string in it is redacted of `${VAR}` values; upstream
 * text (names, diffs) has its control, bidi and invisible characters shown as `<U+XXXX>`.
 */
export async function statusView(
  gateway: Gateway,
  recent: RecentCalls,
  principal: Principal,
): Promise<unknown> {
  const admin = principal.admin === true;
  const health = gateway.health();
  const counts = countsFor(gateway, principal, admin);
  // A tenant's servers: those it sees something of now, and those its grants reach (one that is
  // down lists nothing, and its tenant should still see that it is down).
  const mine = (name: string) => {
    if (admin || counts.has(name)) return true;
    const server = gateway.pool.get(name)?.config;
    return server !== undefined && reachesServer(principal, server);
  };
  const rows = await Promise.all(
    health.upstreams
      .filter((u) => mine(u.name))
      .map(async (u) => {
        const { drift, tools: _listed, ...rest } = u;
        let held: Record<string, unknown> | undefined;
        if (drift && admin) {
          held = {
            ...(await heldTools(gateway, u.name)),
            ...(drift.identityChanged ? { identityChanged: true } : {}),
            // What the operator runs to see the diff in a terminal, and to accept it (#16).
            review: `manifold drift ${u.name}`,
            retrust: `manifold retrust ${u.name}`,
          };
        } else if (drift) {
          // A tenant learns which of the tools it can see are quarantined: no text, no withheld names.
          const names = gateway
            .catalogOf(principal)
            .entries.filter(
              (e) => e.server === u.name && e.quarantined && gateway.isVisible(principal, e.name),
            )
            .map((e) => ({ name: e.name }));
          if (names.length > 0) held = { quarantined: names, withheld: [] };
        }
        return { ...rest, counts: counts.get(u.name) ?? zero(), ...(held ? { drift: held } : {}) };
      }),
  );
  // A tenant's own refused calls (an unknown or invisible tool) are its own data too.
  const visible = new Set([...rows.map((r) => r.name), UNRESOLVED]);
  const view = {
    generatedAt: new Date(gateway.platform.now()).toISOString(),
    version: gateway.version,
    status: health.status,
    view: admin ? 'admin' : 'tenant',
    ...(admin ? {} : { tenant: principal.tenant }),
    upstreams: rows,
    calls: admin ? recent.stats() : recent.tenantStats(principal.tenant, (s) => visible.has(s)),
    ...(admin
      ? {
          diagnostics: health.diagnostics.map((d) => ({ ...d, message: visibleText(d.message) })),
          config: maskedConfig(gateway.config, gateway.redact),
        }
      : {}),
  };
  return redactDeep(view, gateway.redact);
}
