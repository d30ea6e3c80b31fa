/** Warnings for unknown keys, with a "did you mean" for likely typos. */
import { formatPath, type PathSegment } from './paths.js';
import type { ConfigIssue } from './types.js';

/** Extra fields other clients write into the same file, with a tailored explanation. */
const FOREIGN_KEYS: Record<string, string> = {
  autoApprove: 'it is a client setting that Manifold does not use; remove it to silence this warning',
  alwaysAllow: 'it is a client setting that Manifold does not use; remove it to silence this warning',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
  envFile: "Manifold does not read env files; set the variables in the gateway's environment and use ${VAR}",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
  inputs: 'VS Code input prompts are not supported; pass secrets through environment variables and ${VAR}',
};

/** Edit distance where swapping two neighbouring characters counts as one edit. */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      }
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/** A known key that `key` is probably a typo of. */
export function closestKey(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const d = distance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance && d <= 2 && d < candidate.length / 2) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

export function unknownKeyWarning(path: readonly PathSegment[], known: readonly string[]): ConfigIssue {
  const key = String(path[path.length - 1]);
  const near = closestKey(key, known);
  const fix = near
    ? `did you mean "${near}"? Otherwise remove it to silence this warning`
    : (FOREIGN_KEYS[key] ?? 'remove it to silence this warning');
  return { path: formatPath(path), message: `unknown key ${JSON.stringify(key)} is ignored`, fix };
}
