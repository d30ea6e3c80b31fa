/**
 * Risk classes, trust tiers and the approval decision (issue #14): pure functions of a server's
 * config and one tool, computed once per catalog build, never per call.
 *
 * - A tool's class comes from the server's `risk` map (globs over the upstream's tool names, the
 *   first that matches in the order written), else from its annotations when the operator set
 *   `trustAnnotations`, else it is `undeclared`.
 * - Annotations are untrusted input: without `trustAnnotations` they never change a decision, and
 *   with it only the literal values `true` / `false` count.
 * - The approval decision of a tool (`allow`, `ask`, `deny`) comes from the server's `approval`
 *   lists (deny, then ask, then allow) and then its preset's table (PRESETS below).
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { compileGlob } from './glob.js';

export const RISK_CLASSES = ['read', 'write', 'network', 'execute', 'destructive'] as const;
export type DeclaredRisk = (typeof RISK_CLASSES)[number];
export type RiskClass = DeclaredRisk | 'undeclared';

export type ApprovalDecision = 'allow' | 'ask' | 'deny';
export const APPROVAL_PRESETS = ['off', 'standard', 'strict'] as const;
export type ApprovalPreset = (typeof APPROVAL_PRESETS)[number];
/**
 * Who is asked (#52): the calling client's user (`client`, the default), an operator through the
 * approvals queue (`queue`), or the client when it can answer and the queue when it cannot.
 */
export const APPROVAL_VIA = ['client', 'queue', 'client-then-queue'] as const;
export type ApprovalVia = (typeof APPROVAL_VIA)[number];

/** How an approval list names a class rather than a tool: `risk:destructive`. */
export const RISK_PATTERN_PREFIX = 'risk:';

/**
 * The presets' table. `off` lets everything run (the default: approval is opt-in). Under
 * `standard` and `strict`, a tool nobody classified is asked about: the gateway cannot tell it is
 * harmless.
 */
export const PRESETS: Readonly<Record<ApprovalPreset, Readonly<Record<RiskClass, ApprovalDecision>>>> = {
  off: {
    read: 'allow',
    write: 'allow',
    network: 'allow',
    execute: 'allow',
    destructive: 'allow',
    undeclared: 'allow',
  },
  standard: {
    read: 'allow',
    write: 'allow',
    network: 'ask',
    execute: 'ask',
    destructive: 'ask',
    undeclared: 'ask',
  },
  strict: {
    read: 'allow',
    write: 'ask',
    network: 'ask',
    execute: 'ask',
    destructive: 'deny',
    undeclared: 'ask',
  },
};

/** The classification settings of one server, as validated config. */
export interface RiskSettings {
  /** Globs over upstream tool names, in the order written; the first match decides. */
  risk: readonly { pattern: string; class: DeclaredRisk }[];
  trustAnnotations: boolean;
}

export interface ApprovalSettings {
  preset: ApprovalPreset;
  /** Globs over upstream tool names, or `risk:<class>`. */
  ask: readonly string[];
  deny: readonly string[];
  allow: readonly string[];
  /** How long a person has to answer (the client's user), or a queued call holds before it returns. */
  timeoutSeconds: number;
  /** Who is asked (#52); the loader fills it, absent reads as `client`. */
  via?: ApprovalVia;
  /** How long a queued approval waits for an operator's decision (#52); the loader fills it (one day). */
  queueTtlSeconds?: number;
  /** A webhook that receives each queued approval request with signed links to decide it (#52). */
  notify?: string;
}

export const isRiskClass = (v: string): v is DeclaredRisk => (RISK_CLASSES as readonly string[]).includes(v);

/**
 * The class a tool's annotations claim, when the operator vouches for the server: `readOnlyHint`
 * true is `read`; `destructiveHint` true is `destructive` (it wins over a contradicting
 * `readOnlyHint`: the riskier reading); both explicitly false is `write`; anything else,
 * including no annotations at all, is `undeclared`.
 *
 * @example
 * annotatedClass({ readOnlyHint: true }); // 'read'
 * annotatedClass({ readOnlyHint: 'yes' }); // 'undeclared': not the literal true
 */
export function annotatedClass(annotations: unknown): RiskClass {
  if (typeof annotations !== 'object' || annotations === null) return 'undeclared';
  const a = annotations as Record<string, unknown>;
  const readOnly = Object.hasOwn(a, 'readOnlyHint') ? a.readOnlyHint : undefined;
  const destructive = Object.hasOwn(a, 'destructiveHint') ? a.destructiveHint : undefined;
  if (destructive === true) return 'destructive';
  if (readOnly === true) return 'read';
  if (readOnly === false && destructive === false) return 'write';
  return 'undeclared';
}

/**
 * The classifier of one server: declared `risk` first, then trusted annotations, else undeclared.
 *
 * @example
 * const classify = riskClassifier({ risk: [{ pattern: 'get_*', class: 'read' }], trustAnnotations: false });
 * classify({ name: 'get_issue', inputSchema: { type: 'object' } }); // 'read'
 * classify({ name: 'x', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } }); // 'undeclared'
 */
export function riskClassifier(
  settings: RiskSettings,
): (tool: Pick<Tool, 'name' | 'annotations'>) => RiskClass {
  const rules = settings.risk.map((r) => ({ match: compileGlob(r.pattern), class: r.class }));
  return function classify(tool) {
    for (const rule of rules) if (rule.match(tool.name)) return rule.class;
    return settings.trustAnnotations ? annotatedClass(tool.annotations) : 'undeclared';
  };
}

/**
 * The approval decision of one server's tools. Lists first, deny before ask before allow (each
 * entry a glob over the upstream name or `risk:<class>`), then the preset's table.
 *
 * @example
 * const decide = approvalDecider({ preset: 'strict', ask: [], deny: ['drop_*'], allow: [], timeoutSeconds: 120 });
 * decide('drop_table', 'write'); // 'deny'
 * decide('insert_row', 'write'); // 'ask': strict asks about writes
 */
export function approvalDecider(
  settings: ApprovalSettings,
): (upstreamName: string, risk: RiskClass) => ApprovalDecision {
  const compile = (patterns: readonly string[]) => {
    const classes = new Set<string>();
    const globs: ((s: string) => boolean)[] = [];
    for (const p of patterns) {
      if (p.startsWith(RISK_PATTERN_PREFIX)) classes.add(p.slice(RISK_PATTERN_PREFIX.length));
      else globs.push(compileGlob(p));
    }
    return (name: string, risk: RiskClass) => classes.has(risk) || globs.some((g) => g(name));
  };
  const deny = compile(settings.deny);
  const ask = compile(settings.ask);
  const allow = compile(settings.allow);
  const table = PRESETS[settings.preset];
  return function decide(name, risk) {
    if (deny(name, risk)) return 'deny';
    if (ask(name, risk)) return 'ask';
    if (allow(name, risk)) return 'allow';
    return table[risk];
  };
}
