/**
 * The validated shapes of policy rules and guardrails (#51), as config holds them: plain data,
 * compiled per config by rules.ts and run by the call's chain.
 */

export type RuleEffect = 'allow' | 'deny' | 'ask';
export const RULE_EFFECTS: readonly RuleEffect[] = ['allow', 'deny', 'ask'];

/** One rule of `policy.rules`: the first whose `when` holds decides. */
export interface PolicyRuleConfig {
  when: string;
  effect: RuleEffect;
  /** For the audit line, metrics and an `ask` question; never shown to a caller who is refused. */
  reason: string;
}

export interface PolicyConfig {
  rules: PolicyRuleConfig[];
}

export type GuardrailPhase = 'request' | 'response';
export const GUARDRAIL_METHODS = ['tools/call', 'prompts/get', 'resources/read'] as const;
export type GuardrailMethod = (typeof GUARDRAIL_METHODS)[number];
export type GuardrailAction = 'block' | 'redact' | 'flag';
export const GUARDRAIL_ACTIONS: readonly GuardrailAction[] = ['block', 'redact', 'flag'];
export const PII_TYPES = ['email', 'phone', 'card', 'iban'] as const;
export type PiiType = (typeof PII_TYPES)[number];
export const GUARDRAIL_TYPES = ['secrets', 'pii', 'spotlight', 'webhook'] as const;

interface GuardrailCommon {
  /** Phases it runs on (default both; `spotlight` only ever on responses). */
  on: GuardrailPhase[];
  /** Methods it runs for (default `tools/call`). */
  methods: GuardrailMethod[];
  /** `enforce` (default) acts; `audit` only records what it would have done. */
  mode: 'enforce' | 'audit';
}

export interface DetectorGuardrail extends GuardrailCommon {
  type: 'secrets' | 'pii';
  /** Default `block` for secrets, `redact` for pii. */
  action: GuardrailAction;
  /** pii only: the kinds looked for (default all). */
  types?: PiiType[];
}

export interface SpotlightGuardrail extends GuardrailCommon {
  type: 'spotlight';
  /** `redact` is not offered: spotlight wraps (`block` withholds flagged text, `flag` only marks). */
  action: 'flag' | 'block';
}

export interface WebhookGuardrail extends GuardrailCommon {
  type: 'webhook';
  url: string;
  /** Default 2000. */
  timeoutMs: number;
  /** `closed` (default): a failure denies. `open`: it allows, and the audit line says so. */
  failure: 'closed' | 'open';
  headers: Record<string, string>;
}

export type GuardrailConfig = DetectorGuardrail | SpotlightGuardrail | WebhookGuardrail;
