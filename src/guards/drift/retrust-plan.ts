/**
 * What a re-trust would change (SECURITY C3: only an explicit re-trust rewrites a baseline): the
 * trusted baseline against what a server lists now, as diff lines for a person to read, and the
 * baseline that accepting them writes. Pure: `manifold retrust` and the gateway's admin endpoint
 * (src/server/http/admin/drift.ts) show the same lines and write the same baseline.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { canonicalJson, sha256Hex } from '../canonical-json.js';
import { diffTool, formatDiff, hasChanges } from './diff.js';
import { describeDriftName } from './kinds.js';
import { type Baseline, baselineFrom } from './verdict.js';

/** Where a server was trusted and where the config points now, for the top of a review. */
export function identityLine(
  name: string,
  before: { transport: string; target: string },
  now: { transport: string; target: string },
): string {
  return `identity of ${name} changed:\n- ${before.transport} ${before.target}\n+ ${now.transport} ${now.target}`;
}

export interface RetrustPlan {
  /** One entry per change: a new item, a diff, a removed item (escaped for a terminal or a page). */
  lines: string[];
  changes: number;
  /** The baseline accepting the plan writes: every listed item, or only `tool` changed. */
  next: Baseline;
}

/**
 * @example
 * const plan = await planRetrust(row.baseline ?? {}, upstream.driftRecords());
 * if ('refused' in plan) return plan.refused;
 * store.retrust(identity, plan.next, now);
 */
export async function planRetrust(
  old: Baseline,
  current: readonly Tool[],
  tool?: string,
): Promise<RetrustPlan | { refused: string }> {
  let next = await baselineFrom(current);
  if (tool !== undefined) {
    if (!current.some((t) => t.name === tool) && !(tool in old)) {
      return {
        refused: `neither lists nor trusted ${describeDriftName(tool)} (prompts are named prompt:NAME, resource templates template:URI)`,
      };
    }
    // Only this item changes; every other trusted item keeps its old baseline.
    const merged = { ...old };
    if (tool in next) merged[tool] = next[tool]!;
    else delete merged[tool];
    next = merged;
  }
  const lines: string[] = [];
  for (const t of current) {
    if (tool !== undefined && t.name !== tool) continue;
    const before = old[t.name]?.tool as Tool | undefined;
    if (!before) {
      lines.push(`+ new ${describeDriftName(t.name)}`);
      continue;
    }
    // Shown whenever anything that holds a tool back differs (the diff covers every field the
    // drift decision compares), or when it would not be trusted as it is (listed twice).
    const diff = diffTool(before, t);
    if (hasChanges(diff) || old[t.name]?.fingerprint !== next[t.name]?.fingerprint) {
      lines.push(formatDiff(diff));
    }
  }
  for (const gone of Object.keys(old)) {
    if ((tool === undefined || gone === tool) && !current.some((t) => t.name === gone)) {
      lines.push(`- removed ${describeDriftName(gone)}`);
    }
  }
  return { lines, changes: lines.length, next };
}

/**
 * The digest a review hands out, and the one an accept must present: over what the review showed
 * and what accepting writes (the identity and the exact next baseline). Binding the lines alone
 * would let a change made after the review, in a part the lines do not show, be written unseen;
 * with the baseline in it, any change at all between review and accept refuses the accept.
 *
 * @example
 * const digest = await reviewDigest(shown, { identity, baseline: plan.next });
 * if (digest !== body.digest) return conflict('review it again');
 */
export function reviewDigest(
  shown: unknown,
  written: { identity: unknown; baseline: Baseline },
): Promise<string> {
  return sha256Hex(canonicalJson({ shown, written }));
}

/**
 * What an accept changes, item by item, for the drift history: every item whose trusted
 * fingerprint or hints differ between the old and the next baseline, with the fingerprint now
 * trusted ('' for an item whose removal was accepted).
 *
 * @example
 * for (const a of acceptedItems(row.baseline ?? {}, plan.next)) history.push({ ...a, kind: 'accepted' });
 */
export function acceptedItems(old: Baseline, next: Baseline): { tool: string; fingerprint: string }[] {
  const out: { tool: string; fingerprint: string }[] = [];
  for (const [name, entry] of Object.entries(next)) {
    const before = old[name];
    if (
      before?.fingerprint === entry.fingerprint &&
      canonicalJson(before.hints) === canonicalJson(entry.hints)
    ) {
      continue;
    }
    out.push({ tool: name, fingerprint: entry.fingerprint });
  }
  for (const name of Object.keys(old)) if (!(name in next)) out.push({ tool: name, fingerprint: '' });
  return out;
}
