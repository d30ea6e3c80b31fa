/**
 * One policy expression compiled with @bufbuild/cel (the maintained CEL evaluator; no evaluator is
 * written here): parsed and planned once per config, checked at config time, and run per view or
 * per call. What it cannot do, said plainly: the library's type checker is not exported, so a
 * type error is found by evaluating the plan once against typed probe values (see `probe`).
 *
 * @example
 * const c = compileExpression("tool.server == 'github' && !args.repo.startsWith('acme/')");
 * if (c.ok) c.expr.reads.args; // true: decided per call, never folded into a view
 */
import { celEnv, isCelError, parse, plan } from '@bufbuild/cel';

/** The variables a rule sees, and the fields of the ones whose shape the gateway fixes. */
export const RULE_VARIABLES = ['tool', 'args', 'principal', 'request', 'prompt', 'resource'] as const;
export type RuleVariable = (typeof RULE_VARIABLES)[number];
const FIELDS: Partial<Record<RuleVariable, readonly string[]>> = {
  tool: ['name', 'server', 'upstreamName', 'risk', 'annotations'],
  principal: ['subject', 'tenant', 'scopes', 'claims'],
  request: ['method', 'era', 'profile'],
  prompt: ['name', 'server', 'upstreamName'],
  resource: ['uri', 'server'],
};

/** The values one evaluation binds (plain JSON values: CEL converts them). */
export type RuleInput = Partial<Record<RuleVariable, unknown>>;

/** What an expression reads, decided from its AST at compile time. */
export interface Reads {
  /** `args`: decided per call (never folded into a view). */
  args: boolean;
  /** `request.era` (or `request` whole): decided per request, never folded into a view. */
  era: boolean;
  /** `principal.subject` (or `principal` whole): a view that depends on who asks. */
  subject: boolean;
  /** `principal.scopes`. */
  scopes: boolean;
  /** The claim names read (`principal.claims.role`), or 'all' when the map is used whole. */
  claims: ReadonlySet<string> | 'all';
  /**
   * Which of `tool`, `prompt` and `resource` it reads: a rule applies to the kinds it names, or
   * to every kind when it names none (rules.ts).
   */
  targets: ReadonlySet<TargetKind>;
}

export type TargetKind = 'tool' | 'prompt' | 'resource';

/** true or false, or why it could not be decided (a missing argument, a type mismatch). */
export type Evaluate = (input: RuleInput) => boolean | { error: string };

export interface CompiledExpression {
  readonly source: string;
  readonly reads: Reads;
  /**
   * A top-level conjunction (`a && b && c`) split by what each part reads: the parts that read
   * neither `args` nor `request` (decidable with the view) and the rest. Absent when the
   * expression is not such a conjunction, or when every part is of one kind.
   */
  readonly split?: { view: readonly Evaluate[]; call: readonly Evaluate[] };
  /** true or false, or why it could not be decided (a missing argument, a type mismatch). */
  evaluate(input: RuleInput): boolean | { error: string };
}

export interface ExpressionProblem {
  message: string;
  /** 1-based line and column in the expression, when known. */
  line?: number;
  column?: number;
}

export type Compiled = { ok: true; expr: CompiledExpression } | { ok: false; problems: ExpressionProblem[] };

const env = celEnv({});

type Expr = ReturnType<typeof parse>['expr'];
type Parsed = ReturnType<typeof parse>;

/** Parses, checks and plans one expression. Every problem found comes back with its position. */
export function compileExpression(source: string): Compiled {
  let parsed: Parsed;
  try {
    parsed = parse(source);
  } catch (e) {
    const at = (e as { location?: { start?: { line?: number; column?: number } } }).location?.start;
    const raw = (e as { rawMessage?: unknown }).rawMessage;
    const message = `syntax error: ${typeof raw === 'string' ? raw : String((e as Error).message)}`;
    return {
      ok: false,
      problems: [at?.line ? { message, line: at.line, column: at.column ?? 1 } : { message }],
    };
  }
  const where = positionOf(source, parsed);
  const walk = new Walk(where);
  walk.expr(parsed.expr, new Set());
  if (walk.problems.length > 0) return { ok: false, problems: walk.problems };
  const run = plan(env, parsed);
  const problem = probe(run, walk, where);
  if (problem) return { ok: false, problems: [problem] };
  const split = splitConjunction(parsed.expr);
  return {
    ok: true,
    expr: { source, reads: walk.reads, evaluate: evaluator(run), ...(split ? { split } : {}) },
  };
}

function evaluator(run: (input: never) => unknown): Evaluate {
  return (input) => {
    let out: unknown;
    try {
      out = run(input as never);
    } catch (e) {
      return { error: String((e as Error).message ?? e) };
    }
    if (isCelError(out)) return { error: out.message };
    if (typeof out !== 'boolean') return { error: `the expression gave ${kindOf(out)}, not a bool` };
    return out;
  };
}

/**
 * The parts of a top-level `&&` chain, planned one by one and sorted by whether they read the
 * call (`args`, `request`): a rule such as `tool.name == 'x' && args.repo.startsWith('acme/')`
 * then checks only its argument part per call, its tool part once per view. CEL's `&&` gives the
 * same answer whatever order its parts are taken in (an error is absorbed by a false), so
 * splitting it changes nothing but the cost.
 */
function splitConjunction(root: Expr): CompiledExpression['split'] {
  const parts: Expr[] = [];
  const flatten = (e: Expr) => {
    const k = e.exprKind;
    if (
      k.case === 'callExpr' &&
      k.value.function === '_&&_' &&
      !k.value.target &&
      k.value.args.length === 2
    ) {
      flatten(k.value.args[0]!);
      flatten(k.value.args[1]!);
    } else parts.push(e);
  };
  flatten(root);
  if (parts.length < 2) return undefined;
  const view = parts.filter((p) => !readsCall(p, new Set()));
  const call = parts.filter((p) => readsCall(p, new Set()));
  if (view.length === 0 || call.length === 0) return undefined;
  const planned = (list: Expr[]) => list.map((e) => evaluator(plan(env, e)));
  return { view: planned(view), call: planned(call) };
}

/** Whether a subtree names `args` or `request` (outside comprehension variables that shadow them). */
function readsCall(e: Expr, locals: ReadonlySet<string>): boolean {
  const k = e.exprKind;
  switch (k.case) {
    case 'identExpr':
      return !locals.has(k.value.name) && (k.value.name === 'args' || k.value.name === 'request');
    case 'selectExpr':
      return k.value.operand ? readsCall(k.value.operand, locals) : false;
    case 'callExpr':
      return (
        (k.value.target ? readsCall(k.value.target, locals) : false) ||
        k.value.args.some((a) => readsCall(a, locals))
      );
    case 'listExpr':
      return k.value.elements.some((a) => readsCall(a, locals));
    case 'structExpr':
      return k.value.entries.some(
        (en) =>
          (en.keyKind.case === 'mapKey' && readsCall(en.keyKind.value, locals)) ||
          (en.value ? readsCall(en.value, locals) : false),
      );
    case 'comprehensionExpr': {
      const c = k.value;
      const inner = new Set(locals);
      for (const v of [c.iterVar, c.iterVar2, c.accuVar]) if (v) inner.add(v);
      return (
        [c.iterRange, c.accuInit].some((p) => p && readsCall(p, locals)) ||
        [c.loopCondition, c.loopStep, c.result].some((p) => p && readsCall(p, inner))
      );
    }
    default:
      return false;
  }
}

/**
 * The type check this library allows: the plan evaluated once against typed probe values (every
 * fixed field with a value of its type, `args`, `claims` and `annotations` empty maps). It catches
 * a result that is not a bool and an operation on fixed fields that has no overload
 * (`tool.name + 1`, `principal.scopes > 2`): an error raised where no dynamic value is read is a
 * type error at any input. It cannot judge what reads `args`, `claims` or `annotations` (their
 * types are only known per call): those are decided at run time, and an error then denies.
 */
function probe(run: ReturnType<typeof plan>, walk: Walk, where: Where): ExpressionProblem | undefined {
  const input = {
    tool: { name: 'probe', server: 'probe', upstreamName: 'probe', risk: 'read', annotations: {} },
    args: {},
    principal: { subject: 'probe', tenant: 'probe', scopes: [], claims: {} },
    request: { method: 'tools/call', era: 'modern', profile: '' },
    prompt: { name: 'probe', server: 'probe', upstreamName: 'probe' },
    resource: { uri: 'probe:', server: 'probe' },
  };
  let out: unknown;
  try {
    out = run(input as never);
  } catch (e) {
    return { message: `type error: ${String((e as Error).message ?? e)}` };
  }
  if (isCelError(out)) {
    const id = out.exprId;
    if (id === undefined || walk.dynamic.has(id)) return undefined;
    return { message: `type error: ${out.message}`, ...where(id) };
  }
  if (typeof out !== 'boolean') {
    return { message: `the expression must give a bool (true or false), it gives ${kindOf(out)}` };
  }
  return undefined;
}

const kindOf = (v: unknown): string =>
  v === null
    ? 'null'
    : Array.isArray(v)
      ? 'a list'
      : typeof v === 'object'
        ? 'a map or object'
        : `a ${typeof v}`;

type Where = (id: bigint) => { line?: number; column?: number };

/** Line and column of an AST node, from the parser's offsets. */
function positionOf(source: string, parsed: Parsed): Where {
  const positions = parsed.sourceInfo?.positions ?? {};
  return (id) => {
    const offset = (positions as Record<string, number>)[String(id)];
    if (offset === undefined) return {};
    const before = source.slice(0, offset);
    const line = before.split('\n').length;
    return { line, column: offset - before.lastIndexOf('\n') };
  };
}

/**
 * The AST walk: identifiers outside the declared variables and the comprehension variables in
 * scope, fields the gateway does not provide on its fixed objects, what the expression reads, and
 * which nodes read a dynamic value (so the probe can tell a type error from a missing argument).
 */
class Walk {
  problems: ExpressionProblem[] = [];
  readonly reads: {
    args: boolean;
    era: boolean;
    subject: boolean;
    scopes: boolean;
    claims: Set<string> | 'all';
    targets: Set<TargetKind>;
  } = {
    args: false,
    era: false,
    subject: false,
    scopes: false,
    claims: new Set(),
    targets: new Set(),
  };
  /** Nodes whose value depends on a value known only per call (args, claims, annotations). */
  readonly dynamic = new Set<bigint>();

  constructor(private readonly where: Where) {}

  /** Walks `e`; true when its value depends on a dynamic input. */
  expr(e: Expr, locals: ReadonlySet<string>): boolean {
    const k = e.exprKind;
    let dyn = false;
    switch (k.case) {
      case 'identExpr': {
        const name = k.value.name;
        if (locals.has(name)) dyn = true;
        else if (!(RULE_VARIABLES as readonly string[]).includes(name)) {
          this.problems.push({
            message: `unknown variable ${JSON.stringify(name)}: a rule sees ${RULE_VARIABLES.join(', ')}`,
            ...this.where(e.id),
          });
        } else {
          dyn = name === 'args';
          this.whole(name as RuleVariable);
        }
        break;
      }
      case 'selectExpr': {
        const operand = k.value.operand;
        const root = operand?.exprKind.case === 'identExpr' ? operand.exprKind.value.name : undefined;
        if (root && !locals.has(root) && (RULE_VARIABLES as readonly string[]).includes(root)) {
          dyn = this.field(root as RuleVariable, k.value.field, e.id);
          if (operand) this.dynamicIf(operand, root === 'args');
        } else if (
          operand?.exprKind.case === 'selectExpr' &&
          operand.exprKind.value.field === 'claims' &&
          operand.exprKind.value.operand?.exprKind.case === 'identExpr' &&
          operand.exprKind.value.operand.exprKind.value.name === 'principal' &&
          !locals.has('principal')
        ) {
          // principal.claims.<name>: only that claim is read.
          if (this.reads.claims !== 'all') this.reads.claims.add(k.value.field);
          this.dynamic.add(operand.id);
          dyn = true;
        } else if (operand) dyn = this.expr(operand, locals);
        break;
      }
      case 'callExpr': {
        if (k.value.target) dyn = this.expr(k.value.target, locals) || dyn;
        for (const a of k.value.args) dyn = this.expr(a, locals) || dyn;
        break;
      }
      case 'listExpr':
        for (const a of k.value.elements) dyn = this.expr(a, locals) || dyn;
        break;
      case 'structExpr':
        for (const entry of k.value.entries) {
          if (entry.keyKind.case === 'mapKey') dyn = this.expr(entry.keyKind.value, locals) || dyn;
          if (entry.value) dyn = this.expr(entry.value, locals) || dyn;
        }
        break;
      case 'comprehensionExpr': {
        const c = k.value;
        const inner = new Set(locals);
        for (const v of [c.iterVar, c.iterVar2, c.accuVar]) if (v) inner.add(v);
        for (const part of [c.iterRange, c.accuInit]) if (part) dyn = this.expr(part, locals) || dyn;
        for (const part of [c.loopCondition, c.loopStep, c.result])
          if (part) dyn = this.expr(part, inner) || dyn;
        break;
      }
      default:
        break;
    }
    if (dyn) this.dynamic.add(e.id);
    return dyn;
  }

  private dynamicIf(e: Expr, dyn: boolean): void {
    if (dyn) this.dynamic.add(e.id);
  }

  private target(name: RuleVariable): void {
    if (name === 'tool' || name === 'prompt' || name === 'resource') this.reads.targets.add(name);
  }

  /** A variable used whole (passed to a function, compared, iterated). */
  private whole(name: RuleVariable): void {
    this.target(name);
    if (name === 'args') this.reads.args = true;
    if (name === 'request') this.reads.era = true;
    if (name === 'principal') {
      this.reads.subject = true;
      this.reads.scopes = true;
      this.reads.claims = 'all';
    }
  }

  /** `<variable>.<field>`: checked against the fields the gateway provides; true when dynamic. */
  private field(root: RuleVariable, field: string, id: bigint): boolean {
    this.target(root);
    if (root === 'args') {
      this.reads.args = true;
      return true;
    }
    const known = FIELDS[root];
    if (known && !known.includes(field)) {
      this.problems.push({
        message: `${root} has no field ${JSON.stringify(field)}: it has ${known.join(', ')}`,
        ...this.where(id),
      });
      return false;
    }
    if (root === 'request' && field === 'era') this.reads.era = true;
    if (root === 'principal') {
      if (field === 'subject') this.reads.subject = true;
      if (field === 'scopes') this.reads.scopes = true;
      if (field === 'claims') {
        this.reads.claims = 'all';
        return true;
      }
    }
    return root === 'tool' && field === 'annotations';
  }
}
