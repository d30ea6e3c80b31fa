/**
 * The `secrets` detector (#51): gitleaks' maintained rule set, vendored as data
 * (data/secret-rules.ts, refreshed by scripts/refresh-secret-rules.mjs), compiled once into one
 * prefiltered matcher. A text is first searched for every rule's keywords in one pass; only the
 * rules whose keywords occur run their own pattern, so a clean text costs one scan. What matched
 * is then checked as gitleaks checks it: the secret group, its Shannon entropy against the rule's
 * threshold, and the allow lists (placeholders such as `${VAR}` or `xxxx`).
 *
 * @example
 * const found = secretDetector()('key AKIAZ3MSKVNNGW4GTQ3X');
 * found[0]?.type; // 'aws-access-token'
 */
import { GLOBAL_ALLOW, GLOBAL_STOPWORDS, SECRET_RULES } from './data/secret-rules.js';
import type { Detector, Finding } from './scan.js';

/** One rule as vendored: the pattern as JavaScript source, and gitleaks' checks of a match. */
export interface SecretRuleData {
  id: string;
  regex: string;
  flags: string;
  keywords: string[];
  entropy?: number;
  secretGroup?: number;
  stopwords?: string[];
  allow?: [string, string][];
}

interface SecretRule {
  id: string;
  pattern: RegExp;
  entropy: number;
  group: number | undefined;
  stopwords: readonly string[];
  allow: readonly RegExp[];
}

/**
 * Rules written here, for what the vendored set does not cover: a database or broker URL with a
 * password in it (gitleaks leaves connection strings to its generic rule, which is left out).
 */
const LOCAL_RULES: readonly SecretRuleData[] = [
  {
    id: 'connection-string',
    regex:
      '\\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\\+srv)?|redis|rediss|amqps?|mssql|sqlserver)://[^\\s:@/]{1,128}:([^\\s@/]{3,128})@',
    flags: 'i',
    keywords: ['://'],
  },
];

const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/** Builds the matcher once (the caller keeps it per config): every rule compiled here. */
export function secretDetector(): Detector {
  const all = [...SECRET_RULES, ...LOCAL_RULES];
  const rules = all.map(
    (r): SecretRule => ({
      id: r.id,
      pattern: new RegExp(r.regex, `${r.flags}g`),
      entropy: r.entropy ?? 0,
      group: r.secretGroup,
      stopwords: r.stopwords ?? [],
      allow: (r.allow ?? []).map(([s, f]) => new RegExp(s, f)),
    }),
  );
  const byKeyword = new Map<string, number[]>();
  all.forEach((r, i) => {
    for (const k of r.keywords) {
      const list = byKeyword.get(k) ?? [];
      if (!list.includes(i)) list.push(i);
      byKeyword.set(k, list);
    }
  });
  const keywords = [...byKeyword.keys()].sort((a, b) => b.length - a.length);
  // One pass finds where any keyword starts; the keywords at that start are then read directly.
  const prefilter = new RegExp(keywords.map(literal).join('|'), 'gi');
  const globalAllow = GLOBAL_ALLOW.map(([s, f]) => new RegExp(s, f));
  return function detectSecrets(text: string): Finding[] {
    prefilter.lastIndex = 0;
    let candidates: Set<number> | undefined;
    let lower: string | undefined;
    for (let m = prefilter.exec(text); m !== null; m = prefilter.exec(text)) {
      lower ??= text.toLowerCase();
      candidates ??= new Set();
      for (const k of keywords) {
        if (lower.startsWith(k, m.index)) for (const i of byKeyword.get(k)!) candidates.add(i);
      }
      prefilter.lastIndex = m.index + 1;
    }
    if (!candidates) return [];
    const found: Finding[] = [];
    for (const i of candidates) {
      const rule = rules[i]!;
      rule.pattern.lastIndex = 0;
      for (let m = rule.pattern.exec(text); m !== null; m = rule.pattern.exec(text)) {
        if (m[0] === '') {
          rule.pattern.lastIndex++;
          continue;
        }
        const group = rule.group ?? firstGroup(m);
        const secret = m[group] ?? m[0];
        if (!isSecret(rule, secret, globalAllow)) continue;
        const start = m.index + m[0].indexOf(secret);
        found.push({ type: rule.id, start, end: start + secret.length });
      }
    }
    return found;
  };
}

function firstGroup(m: RegExpExecArray): number {
  for (let g = 1; g < m.length; g++) if (m[g] !== undefined && m[g] !== '') return g;
  return 0;
}

function isSecret(rule: SecretRule, secret: string, globalAllow: readonly RegExp[]): boolean {
  if (rule.entropy > 0 && shannon(secret) < rule.entropy) return false;
  const lower = secret.toLowerCase();
  if (rule.stopwords.some((w) => lower.includes(w))) return false;
  if (GLOBAL_STOPWORDS.some((w) => lower.includes(w))) return false;
  if (rule.allow.some((a) => a.test(secret))) return false;
  return !globalAllow.some((a) => a.test(secret));
}

/** Shannon entropy in bits per character, as gitleaks computes it. */
export function shannon(s: string): number {
  const counts = new Map<string, number>();
  for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}
