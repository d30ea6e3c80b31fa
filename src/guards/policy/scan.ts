/**
 * Runs detectors over the text of a JSON value (#51): a call's arguments, or an upstream's result
 * (tool content and structured content, prompt messages, resource contents). Binary payloads
 * (`blob`, the `data` of image and audio content) and `_meta` are not text a model reads, and are
 * skipped. With a marker, the value comes back copied where a finding was replaced, and shared
 * everywhere else.
 */

/** Where a detector found something in one string: its type, never its value (SECURITY I3). */
export interface Finding {
  type: string;
  start: number;
  end: number;
}

export type Detector = (text: string) => Finding[];

/** How many of each type were found. */
export type Found = Map<string, number>;

export interface Scanned {
  found: Found;
  /** The value with each finding replaced by its marker (the same value when nothing was). */
  value: unknown;
}

/** Deepest a scan goes; the arguments are bounded at the edge, results by the size cap. */
const MAX_DEPTH = 64;

/**
 * Scans every string of `value`. `mark` (when given) names the text that replaces a finding.
 *
 * @example
 * scanValue({ to: 'a@b.example' }, piiDetector(['email']), (t) => `[redacted ${t}]`).value;
 * // { to: '[redacted email]' }
 */
export function scanValue(
  value: unknown,
  detect: Detector,
  mark?: (type: string) => string,
  /**
   * Characters of each string scanned, at most: a result's size cap keeps no more than this of
   * any string, so what lies beyond it never reaches the client (and an upstream's huge answer
   * costs no more to scan than one that fits).
   */
  limit = Number.POSITIVE_INFINITY,
): Scanned {
  const found: Found = new Map();
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') {
      const text = v.length > limit ? v.slice(0, limit) : v;
      const hits = detect(text);
      if (hits.length === 0) return v;
      for (const h of hits) found.set(h.type, (found.get(h.type) ?? 0) + 1);
      return mark ? replaceAll(text, hits, mark) + v.slice(text.length) : v;
    }
    if (typeof v !== 'object' || v === null || depth > MAX_DEPTH) return v;
    if (Array.isArray(v)) {
      let copy: unknown[] | undefined;
      for (let i = 0; i < v.length; i++) {
        const next = walk(v[i], depth + 1);
        if (next !== v[i]) {
          copy ??= v.slice();
          copy[i] = next;
        }
      }
      return copy ?? v;
    }
    const o = v as Record<string, unknown>;
    const binary = o.type === 'image' || o.type === 'audio';
    let copy: Record<string, unknown> | undefined;
    for (const key of Object.keys(o)) {
      if (key === '_meta' || key === 'blob' || (binary && key === 'data')) continue;
      const next = walk(o[key], depth + 1);
      if (next !== o[key]) {
        copy ??= { ...o };
        copy[key] = next;
      }
    }
    return copy ?? v;
  };
  const out = walk(value, 0);
  return { found, value: out };
}

/** The text with each finding replaced by its marker; overlapping findings merged. */
function replaceAll(text: string, hits: Finding[], mark: (type: string) => string): string {
  const sorted = [...hits].sort((a, b) => a.start - b.start || b.end - a.end);
  let out = '';
  let at = 0;
  for (const h of sorted) {
    if (h.start < at) continue;
    out += text.slice(at, h.start) + mark(h.type);
    at = h.end;
  }
  return out + text.slice(at);
}
