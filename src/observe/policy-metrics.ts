/**
 * What policy rules and guardrails decided (#51), as counters: a rule by where it is written and
 * its reason, a guardrail by its type, phase, action and mode, with what it found by type only
 * (SECURITY I3). Every label comes from config or from the rule set's own names, so the label
 * set is bounded by the config.
 */
import type { MetricFamily, Sample } from './metrics.js';

export class PolicyMetrics {
  private readonly rules = new Map<string, { labels: Record<string, string>; value: number }>();
  private readonly guardrails = new Map<string, { labels: Record<string, string>; value: number }>();

  /** A rule decided a call or hid a target. */
  rule(id: string, effect: string, reason: string): void {
    bump(this.rules, { rule: id, effect, reason: reason.slice(0, 120) });
  }

  /** A guardrail acted (or failed); `found` names each type it found. */
  guardrail(
    labels: { guardrail: string; phase: string; action: string; mode: string },
    found: readonly string[],
  ): void {
    if (found.length === 0) bump(this.guardrails, { ...labels, finding: '' });
    for (const finding of found) bump(this.guardrails, { ...labels, finding });
  }

  families(): MetricFamily[] {
    const family = (
      name: string,
      help: string,
      m: Map<string, { labels: Record<string, string>; value: number }>,
    ) => ({
      name,
      help,
      type: 'counter' as const,
      samples: [...m.values()].map((s): Sample => ({ name, labels: s.labels, value: s.value })),
    });
    return [
      family(
        'manifold_policy_rule_decisions_total',
        'Calls decided and targets hidden by policy rules.',
        this.rules,
      ),
      family('manifold_guardrail_actions_total', 'What guardrails found and did, by type.', this.guardrails),
    ].filter((f) => f.samples.length > 0);
  }
}

function bump(
  m: Map<string, { labels: Record<string, string>; value: number }>,
  labels: Record<string, string>,
): void {
  const key = JSON.stringify(labels);
  const hit = m.get(key);
  if (hit) hit.value++;
  else m.set(key, { labels, value: 1 });
}
