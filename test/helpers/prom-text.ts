/**
 * A strict reader of the Prometheus text exposition format (0.0.4), for tests: every line must be
 * empty, a comment (`# HELP`, `# TYPE` or free text) or a sample `name{label="value",...} value`.
 * Anything else throws, naming the line. It also checks what a scraper relies on: one TYPE per
 * family and before its samples, no duplicate series, histogram buckets cumulative with `+Inf`
 * equal to `_count`.
 */

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface PromFamily {
  type: string;
  help?: string;
}

export interface Scrape {
  families: Map<string, PromFamily>;
  samples: PromSample[];
  /** The samples named `name` whose labels include every pair of `labels`. */
  find(name: string, labels?: Record<string, string>): PromSample[];
  /** The one sample named `name` with exactly these labels, or undefined. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** The sum over `find(name, labels)`. */
  sum(name: string, labels?: Record<string, string>): number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/**
 * A sample value as Prometheus reads it: Go's strconv.ParseFloat, which takes NaN and Inf in any
 * case (prom-client writes NaN as "Nan").
 */
function parseValue(text: string, where: string): number {
  if (/^[+]?inf(inity)?$/i.test(text)) return Number.POSITIVE_INFINITY;
  if (/^-inf(inity)?$/i.test(text)) return Number.NEGATIVE_INFINITY;
  if (/^nan$/i.test(text)) return Number.NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`${where}: bad value "${text}"`);
  return Number(text);
}

/** Reads `{a="x",b="y"}` from `line` at `start` (the `{`); returns the labels and the index after `}`. */
function parseLabels(line: string, start: number, where: string): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  let i = start + 1;
  while (line[i] !== '}') {
    const eq = line.indexOf('=', i);
    if (eq < 0) throw new Error(`${where}: label without "="`);
    const name = line.slice(i, eq);
    if (!LABEL.test(name)) throw new Error(`${where}: bad label name "${name}"`);
    if (name in labels) throw new Error(`${where}: label "${name}" twice`);
    if (line[eq + 1] !== '"') throw new Error(`${where}: label value not quoted`);
    let value = '';
    let j = eq + 2;
    for (; j < line.length && line[j] !== '"'; j++) {
      if (line[j] === '\\') {
        const next = line[++j];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`${where}: bad escape "\\${next}"`);
      } else value += line[j];
    }
    if (j >= line.length) throw new Error(`${where}: unterminated label value`);
    labels[name] = value;
    i = j + 1;
    if (line[i] === ',') i++;
    else if (line[i] !== '}') throw new Error(`${where}: expected "," or "}" after a label`);
  }
  return [labels, i + 1];
}

/** The family a sample belongs to: its own name, or a histogram's or summary's base name. */
function familyOf(name: string, families: Map<string, PromFamily>): string | undefined {
  if (families.has(name)) return name;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (m && ['histogram', 'summary'].includes(families.get(m[1]!)?.type ?? '')) return m[1];
  return undefined;
}

const keyOf = (labels: Record<string, string>, skip?: string) =>
  JSON.stringify(
    Object.entries(labels)
      .filter(([k]) => k !== skip)
      .sort(([a], [b]) => a.localeCompare(b)),
  );

export function parsePromText(text: string): Scrape {
  const families = new Map<string, PromFamily>();
  const samples: PromSample[] = [];
  const seen = new Set<string>();
  const lines = text.split('\n');
  if (lines.at(-1) !== '') throw new Error('the exposition must end with a newline');
  lines.forEach((line, n) => {
    const where = `line ${n + 1} (${line.slice(0, 80)})`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // a free comment
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
      const f = families.get(name);
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`${where}: unknown type "${rest}"`);
        if (f?.type) throw new Error(`${where}: second TYPE for ${name}`);
        if (samples.some((s) => familyOf(s.name, families) === name))
          throw new Error(`${where}: TYPE after samples`);
        families.set(name, { ...f, type: rest });
      } else families.set(name, { type: f?.type ?? '', help: rest });
      return;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) throw new Error(`${where}: not a sample`);
    const name = line.slice(0, nameEnd);
    if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
    let labels: Record<string, string> = {};
    let i = nameEnd;
    if (line[i] === '{') [labels, i] = parseLabels(line, i, where);
    if (line[i] !== ' ') throw new Error(`${where}: expected a space before the value`);
    const parts = line.slice(i + 1).split(' ');
    if (parts.length > 2 || (parts[1] !== undefined && !/^-?\d+$/.test(parts[1]))) {
      throw new Error(`${where}: expected a value and at most a timestamp`);
    }
    const family = familyOf(name, families);
    if (!family || !families.get(family)?.type) throw new Error(`${where}: sample before its TYPE`);
    const key = `${name}${keyOf(labels)}`;
    if (seen.has(key)) throw new Error(`${where}: duplicate series`);
    seen.add(key);
    samples.push({ name, labels, value: parseValue(parts[0]!, where) });
  });
  checkHistograms(families, samples);
  const matches = (s: PromSample, name: string, labels: Record<string, string>) =>
    s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v);
  const find = (name: string, labels: Record<string, string> = {}) =>
    samples.filter((s) => matches(s, name, labels));
  return {
    families,
    samples,
    find,
    value: (name, labels = {}) =>
      samples.find((s) => s.name === name && keyOf(s.labels) === keyOf(labels))?.value,
    sum: (name, labels = {}) => find(name, labels).reduce((a, s) => a + s.value, 0),
  };
}

/** Buckets rise with `le` and end at `+Inf`, which equals `_count`, for every series of a histogram. */
function checkHistograms(families: Map<string, PromFamily>, samples: PromSample[]): void {
  for (const [name, f] of families) {
    if (f.type !== 'histogram') continue;
    const series = new Map<string, PromSample[]>();
    for (const s of samples) {
      if (s.name !== `${name}_bucket`) continue;
      if (s.labels.le === undefined) throw new Error(`${name}_bucket without le`);
      const k = keyOf(s.labels, 'le');
      series.set(k, [...(series.get(k) ?? []), s]);
    }
    for (const [k, buckets] of series) {
      const sorted = [...buckets].sort(
        (a, b) => parseValue(a.labels.le!, 'le') - parseValue(b.labels.le!, 'le'),
      );
      if (sorted.at(-1)!.labels.le !== '+Inf') throw new Error(`${name}${k}: no +Inf bucket`);
      sorted.forEach((b, i) => {
        if (i > 0 && b.value < sorted[i - 1]!.value) throw new Error(`${name}${k}: buckets not cumulative`);
      });
      const count = samples.find((s) => s.name === `${name}_count` && keyOf(s.labels) === k);
      if (count?.value !== sorted.at(-1)!.value) throw new Error(`${name}${k}: +Inf bucket is not _count`);
      if (!samples.some((s) => s.name === `${name}_sum` && keyOf(s.labels) === k)) {
        throw new Error(`${name}${k}: no _sum`);
      }
    }
  }
}
