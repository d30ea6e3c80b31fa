/**
 * Drift quarantine (SECURITY C1, C3). A tool is trusted as it was first seen; if its text or
 * schemas change afterwards, or its annotations start claiming more risk, it is quarantined until
 * an operator re-trusts it. A tool description is a prompt, so a silent edit upstream ("rug pull")
 * is a prompt injection the client never agreed to. Everything here is a pure decision over data:
 * the caller lists, stores, logs and re-trusts.
 *
 * This module holds the verdicts and the quarantine stand-ins; canonical JSON and fingerprints live
 * in ../canonical-json.ts, annotation hints in hints.ts, the `manifold retrust` diff in diff.ts.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { fingerprintTool } from '../canonical-json.js';
import { annotatedClass, type RiskClass } from '../risk.js';
import { shownChanges } from './diff.js';
import { type AnnotationHints, annotationEscalation, hintsOf } from './hints.js';

/** One trusted tool. `tool` is the full definition at trust time, kept for `retrust` diffs. */
export interface BaselineTool {
  fingerprint: string;
  hints: AnnotationHints;
  tool: Tool;
}

/** Trusted tools keyed by upstream tool name. The server it belongs to is the caller's key (C2). */
export type Baseline = Record<string, BaselineTool>;

/** A tool in the current listing, fingerprinted by the caller (fingerprinting is async). */
export interface ListedTool {
  tool: Tool;
  fingerprint: string;
}

export type DriftVerdict =
  | { kind: 'trusted'; name: string }
  | { kind: 'quarantined'; name: string; oldFingerprint: string; newFingerprint: string; reasons: string[] }
  | { kind: 'withheld'; name: string }
  | { kind: 'removed'; name: string };

/** How restrictive policy is with each class annotations can give (lower: fewer checks). */
const LOOSENESS: Record<RiskClass, number> = {
  read: 0,
  write: 1,
  network: 2,
  execute: 2,
  undeclared: 2,
  destructive: 3,
};

/** The reason given when the fingerprint differs. */
const CONTENT_CHANGED = 'description/schema changed';
/** The reason given when an upstream lists one name more than once. */
const LISTED_TWICE = 'listed more than once';

function countNames(tools: readonly Tool[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const tool of tools) counts.set(tool.name, (counts.get(tool.name) ?? 0) + 1);
  return counts;
}

/**
 * Compares a listing with its baseline (C3). Per listed tool: `trusted` when the fingerprint
 * matches and no hint escalated; `quarantined` otherwise, with both fingerprints and the reasons;
 * `withheld` when the baseline does not know the name. Then a `removed` verdict for every baseline
 * name not listed. Order: the listing's, then removed names sorted by UTF-16 code units.
 *
 * A name listed more than once is ambiguous (which definition would a call reach?), so it is
 * never trusted: quarantined when the baseline knows it, withheld when not. Names are looked up
 * as own keys only, so a tool called `constructor` or `__proto__` is not found on the prototype.
 *
 * @example
 * decideDrift(baseline, [{ tool: search, fingerprint: await fingerprintTool(search) }]);
 * // [{ kind: 'trusted', name: 'search' }, { kind: 'removed', name: 'delete_all' }]
 */
export function decideDrift(
  baseline: Baseline,
  listing: readonly ListedTool[],
  options: { trustAnnotations?: boolean } = {},
): DriftVerdict[] {
  const verdicts: DriftVerdict[] = [];
  const counts = countNames(listing.map((entry) => entry.tool));
  for (const { tool, fingerprint } of listing) {
    const name = tool.name;
    const known = Object.hasOwn(baseline, name) ? baseline[name] : undefined;
    if (known === undefined) {
      verdicts.push({ kind: 'withheld', name });
      continue;
    }
    const reasons: string[] = [];
    if (fingerprint !== known.fingerprint) reasons.push(CONTENT_CHANGED);
    // The trusted definition is kept whole, so what else a client is shown (title, icons, _meta,
    // execution) is compared with it directly: no new fingerprint, and baselines stored before
    // this check are read as they are (#13.6).
    for (const field of shownChanges(known.tool, tool)) reasons.push(`${field} changed`);
    reasons.push(...annotationEscalation(known.hints, hintsOf(tool)));
    // Where annotations classify tools (#14), a new claim of safety loosens policy (no approval
    // asked, a risk:read grant now reaching it): that is drift too, not only a withdrawn claim.
    if (options.trustAnnotations) {
      const before = annotatedClass(known.tool.annotations);
      const after = annotatedClass(tool.annotations);
      if (LOOSENESS[after] < LOOSENESS[before]) {
        reasons.push(`trusted annotations now classify it ${after} (was ${before})`);
      }
    }
    if ((counts.get(name) ?? 0) > 1) reasons.push(LISTED_TWICE);
    verdicts.push(
      reasons.length === 0
        ? { kind: 'trusted', name }
        : {
            kind: 'quarantined',
            name,
            oldFingerprint: known.fingerprint,
            newFingerprint: fingerprint,
            reasons,
          },
    );
  }
  const listed = new Set(counts.keys());
  for (const name of Object.keys(baseline).sort()) {
    if (!listed.has(name)) verdicts.push({ kind: 'removed', name });
  }
  return verdicts;
}

/**
 * Trust on first use: a baseline holding every listed tool, its fingerprint, its tracked hints and
 * a copy of its definition (so later changes to the caller's objects cannot rewrite what was
 * trusted). A name listed more than once is left out, so it comes back as `withheld`. The record
 * has no prototype, so a tool named `__proto__` is stored as an ordinary entry.
 *
 * @example
 * const baseline = await baselineFrom(tools);
 * decideDrift(baseline, listed).every((v) => v.kind === 'trusted'); // true for the same tools
 */
export async function baselineFrom(tools: readonly Tool[]): Promise<Baseline> {
  const counts = countNames(tools);
  const unique = tools.filter((tool) => counts.get(tool.name) === 1);
  const fingerprints = await Promise.all(unique.map((tool) => fingerprintTool(tool)));
  const baseline: Baseline = Object.create(null);
  unique.forEach((tool, i) => {
    baseline[tool.name] = {
      fingerprint: fingerprints[i]!,
      hints: hintsOf(tool),
      tool: structuredClone(tool),
    };
  });
  return baseline;
}

/**
 * The description a quarantined tool is exposed with. It names the configured server, never
 * anything the upstream said.
 */
export function quarantineDescription(server: string): string {
  return `Quarantined: this tool changed after it was trusted. An operator must re-trust server ${server}.`;
}

/**
 * The stand-in listed for a quarantined tool. It is built from the exposed name and the server
 * alone, so the drifted description and schemas never reach a client.
 *
 * @example
 * quarantinedTool('files__search', 'files');
 * // { name: 'files__search', description: 'Quarantined: … re-trust server files.', inputSchema: { type: 'object' } }
 */
export function quarantinedTool(exposedName: string, server: string): Tool {
  return { name: exposedName, description: quarantineDescription(server), inputSchema: { type: 'object' } };
}

/** What one upstream listing may contribute to the catalog once drift has been checked. */
export interface VerifiedListing {
  /** Tools whose description, schemas and annotations match the trusted baseline. */
  trusted: Tool[];
  /** Listed tools that changed after trust: shown as quarantine stubs, never callable. */
  quarantined: Tool[];
  /** Upstream names that were trusted and are no longer listed. */
  removed: string[];
  /** Listed names that were never trusted: not served until an operator re-trusts the server. */
  withheld: string[];
  /** The configured identity no longer matches the stored one: nothing is served. */
  identityChanged: boolean;
}

/** The drift decisions counted in `DriftGate.events`. */
export type DriftEvent = 'quarantined' | 'withheld' | 'removed' | 'identity_changed' | 'baseline_unreadable';
