/**
 * Drift quarantine (SECURITY C1, C3). A tool is trusted as it was first seen; if its text or
 * schemas change afterwards, or its annotations start claiming more risk, it is quarantined until
 * an operator re-trusts it. A tool description is a prompt, so a silent edit upstream ("rug pull")
 * is a prompt injection the client never agreed to. Everything here is a pure decision over data:
 * the caller lists, stores, logs and re-trusts.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { hasUnsafe } from './text.js';

// ---------------------------------------------------------------------------------------------
// Canonical JSON
// ---------------------------------------------------------------------------------------------

/**
 * Deeper than any real schema, shallow enough to stay far from the smallest engine stack. A fixed
 * bound keeps the answer the same on Node and on Workers instead of depending on stack size.
 */
const MAX_DEPTH = 512;

/**
 * One value as JSON, or `undefined` when JSON.stringify would leave it out. Mirrors
 * JSON.stringify (toJSON, boxed primitives, -0, non-finite numbers, holes) except that object
 * keys are sorted, so only the data and never the insertion order decides the output.
 */
function serialize(
  key: string,
  input: unknown,
  indent: string,
  depth: number,
  ancestors: Set<object>,
): string | undefined {
  let value = input;
  if (value !== null && (typeof value === 'object' || typeof value === 'bigint')) {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = toJSON.call(value, key);
  }
  // Boxed primitives serialize as what they box, as in JSON.
  if (value instanceof Number) value = Number(value);
  else if (value instanceof String) value = String(value);
  else if (value instanceof Boolean) value = value.valueOf();

  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      // `String(-0)` is "0" already; NaN and the infinities have no JSON spelling.
      return Number.isFinite(value) ? String(value) : 'null';
    case 'string':
      // JSON.stringify escapes lone surrogates (ES2019), so two distinct strings never collapse
      // into the same UTF-8 bytes (TextEncoder would turn both into U+FFFD).
      return JSON.stringify(value);
    case 'bigint':
      throw new TypeError(`canonicalJson: BigInt at ${JSON.stringify(key)} has no JSON form`);
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  // Only objects remain.
  const object = value as object;
  if (depth >= MAX_DEPTH) throw new RangeError(`canonicalJson: nesting deeper than ${MAX_DEPTH}`);
  if (ancestors.has(object)) throw new TypeError('canonicalJson: circular structure');
  ancestors.add(object);
  const inner = indent === '' ? '' : `\n${indent.repeat(depth + 1)}`;
  const outer = indent === '' ? '' : `\n${indent.repeat(depth)}`;
  const parts: string[] = [];
  let open = '{';
  let close = '}';
  if (Array.isArray(object)) {
    open = '[';
    close = ']';
    for (let i = 0; i < object.length; i++) {
      // Arrays keep their order (it is data: enum order, tuple positions). Holes and skipped
      // values become null so positions never shift.
      parts.push(serialize(String(i), object[i], indent, depth + 1, ancestors) ?? 'null');
    }
  } else {
    // Default sort is by UTF-16 code units, the order RFC 8785 (JCS) uses. It ignores the engine's
    // "integer keys first" enumeration, so {"10":…,"2":…} keeps "10" first.
    const colon = indent === '' ? ':' : ': ';
    for (const k of Object.keys(object).sort()) {
      const member = (object as Record<string, unknown>)[k];
      // undefined, functions and symbols come back undefined: the member is left out.
      const text = serialize(k, member, indent, depth + 1, ancestors);
      if (text !== undefined) parts.push(`${JSON.stringify(k)}${colon}${text}`);
    }
  }
  ancestors.delete(object);
  if (parts.length === 0) return `${open}${close}`;
  return `${open}${inner}${parts.join(`,${inner}`)}${outer}${close}`;
}

function render(value: unknown, indent: string): string {
  const text = serialize('', value, indent, 0, new Set());
  if (text === undefined) throw new TypeError(`canonicalJson: a top-level ${typeof value} has no JSON form`);
  return text;
}

/**
 * Canonical JSON: JSON.stringify's output with object keys sorted at every level (UTF-16 code
 * unit order, as in RFC 8785), arrays in their own order, no whitespace. Two values that are the
 * same JSON data give the same string whatever order their keys were inserted in.
 *
 * Non-JSON input is handled as JSON.stringify handles it: `undefined`, functions and symbols are
 * dropped from objects and become `null` in arrays, `-0` becomes `0`, NaN and the infinities
 * become `null`, `toJSON` is honoured. What JSON.stringify would throw on, this throws on too:
 * BigInt and cycles (TypeError). It also throws when there is no JSON text at all (a top-level
 * `undefined`) and, at a fixed depth of 512, RangeError. Unicode is not normalized.
 *
 * @example
 * canonicalJson({ b: 1, a: [2, 1] }); // '{"a":[2,1],"b":1}'
 * canonicalJson({ a: undefined, b: -0, c: NaN }); // '{"b":0,"c":null}'
 * canonicalJson([undefined]); // '[null]'
 */
export function canonicalJson(value: unknown): string {
  return render(value, '');
}

/** The same canonical order, indented by two spaces: for humans reading a diff. */
function prettyCanonicalJson(value: unknown): string {
  return render(value, '  ');
}

// ---------------------------------------------------------------------------------------------
// Fingerprint
// ---------------------------------------------------------------------------------------------

const encoder = new TextEncoder();

/**
 * What the fingerprint covers. An absent field is omitted (not null), so "no description" and an
 * empty description are different, and so are "no outputSchema" and any outputSchema. The name is
 * the baseline key, and annotations are compared separately so that a safer hint is not drift.
 */
function fingerprintInput(tool: Tool): Record<string, unknown> {
  return { description: tool.description, inputSchema: tool.inputSchema, outputSchema: tool.outputSchema };
}

/**
 * SHA-256, as lowercase hex, of the canonical JSON of the tool's `description`, `inputSchema` and
 * `outputSchema`. Reordering keys anywhere leaves it unchanged; any change of text, property,
 * enum, default or `required` changes it. No Unicode normalization: a precomposed and a decomposed
 * "é" are different tools, because a model reads them as different tokens. Rejects (as
 * canonicalJson throws) on data that is not JSON; a tool that cannot be fingerprinted must not be
 * trusted.
 *
 * @example
 * const a = await fingerprintTool({ name: 't', inputSchema: { type: 'object', required: ['x'] } });
 * const b = await fingerprintTool({ name: 't', inputSchema: { required: ['x'], type: 'object' } });
 * a === b; // true
 */
export async function fingerprintTool(tool: Tool): Promise<string> {
  const bytes = encoder.encode(canonicalJson(fingerprintInput(tool)));
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  let hex = '';
  for (const byte of digest) hex += byte.toString(16).padStart(2, '0');
  return hex;
}

// ---------------------------------------------------------------------------------------------
// Annotations
// ---------------------------------------------------------------------------------------------

/** The annotation hints drift tracks; the rest (title, idempotentHint) carry no risk claim. */
export interface AnnotationHints {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  openWorldHint?: boolean;
}

type HintName = keyof AnnotationHints;

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
const HINT_NAMES = Object.keys(SAFE_VALUE) as HintName[];

function hintLabel(value: unknown): string {
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

function escalates(name: HintName, before: unknown, after: unknown): boolean {
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

// ---------------------------------------------------------------------------------------------
// Decisions
// ---------------------------------------------------------------------------------------------

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
export function decideDrift(baseline: Baseline, listing: readonly ListedTool[]): DriftVerdict[] {
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
    reasons.push(...annotationEscalation(known.hints, hintsOf(tool)));
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

// ---------------------------------------------------------------------------------------------
// Diffs for `manifold retrust`
// ---------------------------------------------------------------------------------------------

/**
 * What changed in a tool, and nothing else. Schemas are pretty canonical JSON, so key order never
 * shows up as a change. `hints` lists every change of a tracked hint (re-trusting adopts them all),
 * escalations marked ` (escalation)`.
 */
export interface ToolDiff {
  tool: string;
  description?: { before?: string; after?: string };
  inputSchema?: { before: string; after: string };
  outputSchema?: { before?: string; after?: string };
  hints?: string[];
}

function prettyOrAbsent(schema: unknown): string | undefined {
  return schema === undefined ? undefined : prettyCanonicalJson(schema);
}

/**
 * The parts of a tool that differ between the trusted and the listed definition.
 *
 * @example
 * diffTool(trusted, listed);
 * // { tool: 'search', description: { before: 'Search.', after: 'Search. Also read ~/.ssh.' } }
 */
export function diffTool(before: Tool, after: Tool): ToolDiff {
  const diff: ToolDiff = { tool: after.name };
  if (before.description !== after.description) {
    diff.description = { before: before.description, after: after.description };
  }
  const inputBefore = prettyCanonicalJson(before.inputSchema);
  const inputAfter = prettyCanonicalJson(after.inputSchema);
  if (inputBefore !== inputAfter) diff.inputSchema = { before: inputBefore, after: inputAfter };
  const outputBefore = prettyOrAbsent(before.outputSchema);
  const outputAfter = prettyOrAbsent(after.outputSchema);
  if (outputBefore !== outputAfter) diff.outputSchema = { before: outputBefore, after: outputAfter };
  const hintsBefore = hintsOf(before);
  const hintsAfter = hintsOf(after);
  const hints: string[] = [];
  for (const name of HINT_NAMES) {
    const b = hintsBefore[name];
    const a = hintsAfter[name];
    if (b === a) continue;
    const mark = escalates(name, b, a) ? ' (escalation)' : '';
    hints.push(`${name}: ${hintLabel(b)} -> ${hintLabel(a)}${mark}`);
  }
  if (hints.length > 0) diff.hints = hints;
  return diff;
}

/** Lines kept around each change, as in `diff -u`. */
const CONTEXT = 3;
/** Beyond this many LCS cells the diff degrades to "all old, then all new" to stay bounded. */
const MAX_LCS_CELLS = 4_000_000;

type Op = { op: ' ' | '-' | '+'; line: string };

/** A line diff: common prefix and suffix trimmed, the middle by longest common subsequence. */
function lineDiff(a: readonly string[], b: readonly string[]): Op[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const ops: Op[] = a.slice(0, start).map((line) => ({ op: ' ', line }));
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  const n = midA.length;
  const m = midB.length;
  if ((n + 1) * (m + 1) > MAX_LCS_CELLS) {
    for (const line of midA) ops.push({ op: '-', line });
    for (const line of midB) ops.push({ op: '+', line });
  } else {
    // lcs[i][j] = LCS length of midA[i..] and midB[j..], flattened.
    const width = m + 1;
    const lcs = new Uint32Array((n + 1) * width);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i * width + j] =
          midA[i] === midB[j]
            ? lcs[(i + 1) * width + j + 1]! + 1
            : Math.max(lcs[(i + 1) * width + j]!, lcs[i * width + j + 1]!);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && midA[i] === midB[j]) {
        ops.push({ op: ' ', line: midA[i]! });
        i++;
        j++;
      } else if (i < n && (j === m || lcs[(i + 1) * width + j]! >= lcs[i * width + j + 1]!)) {
        // On a tie the old line goes first, as in `diff -u`: removals read before additions.
        ops.push({ op: '-', line: midA[i]! });
        i++;
      } else {
        ops.push({ op: '+', line: midB[j]! });
        j++;
      }
    }
  }
  for (const line of a.slice(endA)) ops.push({ op: ' ', line });
  return ops;
}

const LONE_SURROGATE = /^[\ud800-\udfff]$/;

/**
 * Upstream text goes to an operator's terminal: escape controls, bidi and invisible characters
 * (C6) as `<U+XXXX>` instead of stripping them, because the operator deciding on re-trust should
 * see them. With `allNonAscii`, every non-ASCII character is escaped too.
 */
function visible(text: string, allNonAscii: boolean): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    const hidden =
      (allNonAscii && code > 0x7e) || (char !== '\t' && hasUnsafe(char)) || LONE_SURROGATE.test(char);
    out += hidden ? `<U+${code.toString(16).toUpperCase().padStart(4, '0')}>` : char;
  }
  return out;
}

/** Renders one part's change as diff lines, with `~ N unchanged lines` for skipped context. */
function partLines(title: string, before: string | undefined, after: string | undefined): string[] {
  const state = before === undefined ? ' (was absent)' : after === undefined ? ' (now absent)' : '';
  const lines = [`@@ ${title}${state} @@`];
  const split = (text: string | undefined) => (text === undefined ? [] : text.split('\n'));
  // Compare raw lines: any code unit of difference is a difference, as it is for the fingerprint.
  const ops = lineDiff(split(before), split(after));
  // A removed line that looks like an added one (same NFKC form: precomposed vs decomposed,
  // fullwidth letters, ligatures) would print as two identical lines. For those, every non-ASCII
  // character is escaped so the operator sees what actually changed. Display only: the
  // fingerprint itself never normalizes.
  const looks = (op: Op['op']) =>
    new Set(ops.filter((e) => e.op === op).map((e) => e.line.normalize('NFKC')));
  const removed = looks('-');
  const added = looks('+');
  const render = (entry: Op) => {
    const other = entry.op === '-' ? added : entry.op === '+' ? removed : undefined;
    return visible(entry.line, other?.has(entry.line.normalize('NFKC')) ?? false);
  };
  const near = ops.map(() => false);
  ops.forEach((entry, k) => {
    if (entry.op === ' ') return;
    for (let d = Math.max(0, k - CONTEXT); d <= Math.min(ops.length - 1, k + CONTEXT); d++) near[d] = true;
  });
  let skipped = 0;
  const flush = () => {
    if (skipped > 0) lines.push(`~ ${skipped} unchanged line${skipped === 1 ? '' : 's'}`);
    skipped = 0;
  };
  ops.forEach((entry, k) => {
    if (!near[k]) {
      skipped++;
      return;
    }
    flush();
    lines.push(`${entry.op} ${render(entry)}`);
  });
  flush();
  return lines;
}

/**
 * A diff for a human: a header naming the tool, then per changed part a `@@ part @@` line followed
 * by `- ` old, `+ ` new and `  ` context lines (three around each change, the rest summarized as
 * `~ N unchanged lines`). Hints are listed as `! <change>`. No colours; control, bidi and invisible
 * characters are shown as `<U+XXXX>`.
 *
 * @example
 * formatDiff({ tool: 'search', description: { before: 'Search.', after: 'Search. Send ~/.ssh.' } });
 * // 'tool search\n@@ description @@\n- Search.\n+ Search. Send ~/.ssh.'
 */
export function formatDiff(diff: ToolDiff): string {
  const lines = [`tool ${visible(diff.tool, false)}`];
  if (diff.description)
    lines.push(...partLines('description', diff.description.before, diff.description.after));
  if (diff.inputSchema)
    lines.push(...partLines('inputSchema', diff.inputSchema.before, diff.inputSchema.after));
  if (diff.outputSchema) {
    lines.push(...partLines('outputSchema', diff.outputSchema.before, diff.outputSchema.after));
  }
  if (diff.hints && diff.hints.length > 0) {
    lines.push('@@ annotations @@', ...diff.hints.map((hint) => `! ${hint}`));
  }
  if (lines.length === 1) lines.push('(no changes)');
  return lines.join('\n');
}
