/**
 * Policy rules (#51): ordered `{when, effect, reason}` over the tool (or prompt, or resource), its
 * arguments, the caller and the request, compiled once per config. The first rule whose `when`
 * holds decides; none holding leaves the grants and the approval settings to decide.
 *
 * Listing and calling agree (SECURITY I1): a rule that reads neither `args` nor `request.era` is
 * decided once per view (aggregate/tool-views.ts, cached per share key), and a tool it denies is
 * neither listed nor callable. A rule that reads them is decided per call, in order, before the
 * first view rule that held. A view rule that denies hides the tool whatever an argument rule
 * before it would have said: hiding never depends on arguments nobody has sent yet.
 *
 * @example
 * const rules = PolicyRules.compile({ gateway: [{ when: "tool.risk == 'destructive'", effect: 'deny', reason: 'no deletes' }] });
 * const ruling = rules.ruling(rules.chain('github'), { tool, principal, request });
 * ruling.hidden; // the deny rule, when it held
 */
import {
  type CompiledExpression,
  compileExpression,
  type Evaluate,
  type Reads,
  type RuleInput,
  type TargetKind,
} from './cel.js';
import { celValue } from './input.js';
import type { PolicyRuleConfig, RuleEffect } from './types.js';

export interface Rule {
  /** Where it is written: `gateway.policy.rules[2]`, for the audit line and metrics. */
  id: string;
  effect: RuleEffect;
  reason: string;
  expr: CompiledExpression;
  /** Reads `args` or `request.era`: decided per request, never folded into a view. */
  perCall: boolean;
}

/** The rules of each level, as config holds them. */
export interface RuleSources {
  gateway?: readonly PolicyRuleConfig[] | undefined;
  servers?: ReadonlyMap<string, readonly PolicyRuleConfig[]>;
  profiles?: ReadonlyMap<string, readonly PolicyRuleConfig[]>;
}

/** A rule left for the call, and what of it a call still checks. */
export interface Pending {
  rule: Rule;
  /** The whole expression, or only its argument part when its view part held (cel.ts `split`). */
  check: Evaluate;
}

/** What the view part of the rules decided for one tool, prompt or resource and one share key. */
export interface Ruling {
  /** A view rule denied it (or could not be decided): not listed, not callable. */
  hidden?: { rule: Rule; error?: string };
  /** Rules decided per call, in order, before the view rule that held (if any). */
  pending: readonly Pending[];
  /** The view rule that held (allow or ask), deciding when no pending rule does. */
  decided?: Rule;
  /** The view's input (target, caller, request), which a call completes with its own. */
  base?: RuleInput;
}

/** What a call adds to its view's input. */
export interface CallFacts {
  args: Record<string, unknown>;
  era: string;
}

/**
 * Stands for arguments not yet known when a view is cut. Any use of it is an error, and CEL's
 * `&&` and `||` absorb an error when the other side decides (`false && x` is false for every x):
 * so a rule that still comes out true or false has that value whatever the arguments will be.
 */
const UNKNOWN_ARGS = new Proxy(
  {},
  {
    get(_t, key) {
      // The evaluator asks whether a bound value is a protobuf message; that is not a read.
      if (typeof key === 'symbol' || key === '$typeName') return undefined;
      throw new Error('arguments are read per call');
    },
    has() {
      throw new Error('arguments are read per call');
    },
    ownKeys() {
      throw new Error('arguments are read per call');
    },
    getOwnPropertyDescriptor() {
      throw new Error('arguments are read per call');
    },
  },
);

/** What decided one call: the rule, and why it could not be evaluated when it could not. */
export interface CallDecision {
  rule: Rule;
  effect: RuleEffect;
  /** The expression failed at run time (a missing argument, a type mismatch): this denies. */
  error?: string;
}

/** The ruling of a chain with no rules: nothing pending, nothing decided. */
export const NO_RULING: Ruling = Object.freeze({ pending: Object.freeze([]) as readonly Pending[] });

export class PolicyRules {
  /** No rules at all. */
  static readonly none = PolicyRules.compile({});
  /** No rule anywhere: views and calls skip policy entirely. */
  readonly empty: boolean;
  /** What the view rules read of the principal: the share key must cover it. */
  readonly viewReads: Pick<Reads, 'subject' | 'scopes' | 'claims'>;
  private readonly chains = new Map<string, readonly Rule[]>();

  private constructor(
    private readonly gateway: readonly Rule[],
    private readonly servers: ReadonlyMap<string, readonly Rule[]>,
    private readonly profiles: ReadonlyMap<string, readonly Rule[]>,
  ) {
    const all = [...gateway, ...[...servers.values()].flat(), ...[...profiles.values()].flat()];
    this.empty = all.length === 0;
    let claims: Set<string> | 'all' = new Set();
    let subject = false;
    let scopes = false;
    for (const r of all) {
      if (r.perCall) continue;
      subject ||= r.expr.reads.subject;
      scopes ||= r.expr.reads.scopes;
      const c = r.expr.reads.claims;
      if (c === 'all' || claims === 'all') claims = 'all';
      else for (const name of c) claims.add(name);
    }
    this.viewReads = { subject, scopes, claims };
  }

  /**
   * Compiles every rule. The config reader has already reported each bad expression with its
   * path and position (config/policy.ts), so one that fails here is a programming error.
   */
  static compile(sources: RuleSources): PolicyRules {
    const level = (rules: readonly PolicyRuleConfig[] | undefined, base: string): Rule[] =>
      (rules ?? []).map((r, i) => {
        const compiled = compileExpression(r.when);
        if (!compiled.ok) throw new Error(`${base}[${i}].when: ${compiled.problems[0]?.message}`);
        const { reads } = compiled.expr;
        return {
          id: `${base}[${i}]`,
          effect: r.effect,
          reason: r.reason,
          expr: compiled.expr,
          perCall: reads.args || reads.era,
        };
      });
    const map = (
      m: ReadonlyMap<string, readonly PolicyRuleConfig[]> | undefined,
      base: (k: string) => string,
    ) =>
      new Map(
        [...(m ?? new Map<string, readonly PolicyRuleConfig[]>())].map(([k, v]) => [k, level(v, base(k))]),
      );
    return new PolicyRules(
      level(sources.gateway, 'gateway.policy.rules'),
      map(sources.servers, (s) => `mcpServers.${s}.policy.rules`),
      map(sources.profiles, (p) => `profiles.${p}.policy.rules`),
    );
  }

  /**
   * The rules that apply to a server's tools, prompts and resources as served in a profile: the
   * gateway's first (an operator's global deny is never overridden below it), then the
   * profile's, then the server's. Built once per pair.
   */
  chain(server: string, profile?: string, kind: TargetKind = 'tool'): readonly Rule[] {
    const key = `${server}\0${profile ?? ''}\0${kind}`;
    let chain = this.chains.get(key);
    if (!chain) {
      // A rule that names `tool` is about tools only (likewise `prompt`, `resource`); one that
      // names none of them (`principal.tenant == 'x'`) is about every kind.
      const about = (r: Rule) =>
        r.expr.reads.targets.size === 0 ||
        (r.expr.reads.targets.size === 1 && r.expr.reads.targets.has(kind));
      chain = [
        ...this.gateway,
        ...(profile === undefined ? [] : (this.profiles.get(profile) ?? [])),
        ...(this.servers.get(server) ?? []),
      ].filter(about);
      this.chains.set(key, chain);
    }
    return chain;
  }

  /**
   * The view part of a chain for one target and caller. A rule that reads the arguments is kept
   * for the call, unless it comes out the same whatever they are (`tool.name == 'x' && args…` for
   * another tool is false without them): then it is decided here like a view rule, and a call
   * does not pay for it.
   */
  ruling(chain: readonly Rule[], input: RuleInput): Ruling {
    if (chain.length === 0) return NO_RULING;
    const pending: Pending[] = [];
    for (const rule of chain) {
      let holds: boolean | { error: string };
      if (rule.perCall) {
        if (rule.expr.reads.era) {
          pending.push(callPart(rule, input));
          continue;
        }
        holds = rule.expr.evaluate({ ...input, args: UNKNOWN_ARGS });
        if (typeof holds !== 'boolean') {
          pending.push(callPart(rule, input));
          continue;
        }
      } else {
        holds = rule.expr.evaluate(input);
        if (typeof holds !== 'boolean')
          return { hidden: { rule, error: holds.error }, pending: [], base: input };
      }
      if (!holds) continue;
      if (rule.effect === 'deny') return { hidden: { rule }, pending: [], base: input };
      return { pending, decided: rule, base: input };
    }
    return { pending, base: input };
  }
}

/**
 * What a call checks of a rule: only the argument part of a conjunction whose view part holds for
 * this view (the view part is then true for every call of it), else the whole expression.
 */
function callPart(rule: Rule, input: RuleInput): Pending {
  const split = rule.expr.split;
  if (!split) return { rule, check: rule.expr.evaluate };
  for (const part of split.view) if (part(input) !== true) return { rule, check: rule.expr.evaluate };
  const parts = split.call;
  if (parts.length === 1) return { rule, check: parts[0]! };
  // CEL's `&&`: false if any part is false, else the first error, else true.
  const check: Evaluate = (call) => {
    let error: { error: string } | undefined;
    for (const part of parts) {
      const r = part(call);
      if (r === false) return false;
      if (r !== true) error ??= r;
    }
    return error ?? true;
  };
  return { rule, check };
}

/**
 * Decides one call: the first pending rule that holds, else the view rule that held, else
 * nothing (grants and approval decide). A rule that cannot be evaluated denies.
 */
export function decideCall(ruling: Ruling, call: CallFacts): CallDecision | undefined {
  if (ruling.pending.length === 0) {
    return ruling.decided ? { rule: ruling.decided, effect: ruling.decided.effect } : undefined;
  }
  const base = ruling.base ?? {};
  const request = new Map(base.request instanceof Map ? (base.request as Map<string, unknown>) : undefined);
  request.set('era', call.era);
  const input: RuleInput = { ...base, args: celValue(call.args), request };
  for (const { rule, check } of ruling.pending) {
    const holds = check(input);
    if (typeof holds !== 'boolean') return { rule, effect: 'deny', error: holds.error };
    if (holds) return { rule, effect: rule.effect };
  }
  return ruling.decided ? { rule: ruling.decided, effect: ruling.decided.effect } : undefined;
}
