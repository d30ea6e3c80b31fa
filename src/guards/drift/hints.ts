/**
 * Annotation hints for drift quarantine (SECURITY C3): which hints are tracked, which value of each
 * claims safety, and when a change withdraws that claim. Shared by the drift decision (verdict.ts)
 * and the retrust diff (diff.ts).
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';

// ---------------------------------------------------------------------------------------------
// Annotations
// ---------------------------------------------------------------------------------------------

/** The annotation hints drift tracks; the rest (title, idempotentHint) carry no risk claim. */
export interface AnnotationHints {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  openWorldHint?: boolean;
}

export type HintName = keyof AnnotationHints;

/**
 * For each tracked hint, the value that claims the tool is safe. The MCP defaults are
 * readOnlyHint false, destructiveHint true, openWorldHint true: the risky value in every case, so
 * "absent" always counts as risky and only the explicit safe value can be lost.
 */
const SAFE_VALUE: Readonly<Record<HintName, boolean>> = {
  readOnlyHint: true,
  destructiveHint: false,
  openWorldHint: false,
};
export const HINT_NAMES = Object.keys(SAFE_VALUE) as HintName[];

export function hintLabel(value: unknown): string {
  return value === true ? 'true' : value === false ? 'false' : 'absent';
}

/**
 * The three tracked hints of a tool, each only when present. A non-boolean value (an upstream that
 * skipped validation) is left out, that is read as absent, which is the risky reading.
 *
 * @example
 * hintsOf({ name: 't', inputSchema: { type: 'object' }, annotations: { title: 'T', readOnlyHint: true } });
 * // { readOnlyHint: true }
 */
export function hintsOf(tool: Tool): AnnotationHints {
  const hints: AnnotationHints = {};
  const annotations: unknown = tool.annotations;
  if (annotations === null || typeof annotations !== 'object') return hints;
  for (const name of HINT_NAMES) {
    const value = Object.hasOwn(annotations, name)
      ? (annotations as Record<string, unknown>)[name]
      : undefined;
    if (typeof value === 'boolean') hints[name] = value;
  }
  return hints;
}

export function escalates(name: HintName, before: unknown, after: unknown): boolean {
  // Drift only when the safe claim was made and is now withdrawn. A hint appearing, or a tool
  // becoming safer, cannot hurt a client that trusted the earlier, riskier claim.
  return before === SAFE_VALUE[name] && after !== SAFE_VALUE[name];
}

/**
 * The tracked hints whose change escalates risk, as `'<hint>: <before> -> <after>'` with
 * `true`, `false` or `absent`. Escalation means losing the safe value: `readOnlyHint` true to
 * false or absent, `destructiveHint` or `openWorldHint` false to true or absent. Empty means no
 * drift.
 *
 * @example
 * annotationEscalation({ readOnlyHint: true }, {}); // ['readOnlyHint: true -> absent']
 * annotationEscalation({}, { destructiveHint: true }); // []: absent already meant destructive
 * annotationEscalation({ destructiveHint: true }, { destructiveHint: false }); // []: safer
 */
export function annotationEscalation(before: AnnotationHints, after: AnnotationHints): string[] {
  const reasons: string[] = [];
  for (const name of HINT_NAMES) {
    if (escalates(name, before[name], after[name])) {
      reasons.push(`${name}: ${hintLabel(before[name])} -> ${hintLabel(after[name])}`);
    }
  }
  return reasons;
}
