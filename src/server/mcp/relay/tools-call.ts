import type { CatalogEntry } from '../../../aggregate/catalog.js';
import { DESCRIBE_MAX_NAMES } from '../../../aggregate/describe-tool.js';
import { upstreamArguments } from '../../../aggregate/overrides.js';
import { codeHit } from '../../../aggregate/run-code-tool.js';
import { MAX_QUERY_LENGTH, searchHit } from '../../../aggregate/search.js';
import type { Principal } from '../../../auth/principal.js';
import { rateLimited } from '../../../auth/shared-limit.js';
import { DEFAULT_QUEUE_TTL_SECONDS } from '../../../config/server-checks.js';
import { ManifoldError } from '../../../errors.js';
import type { Gateway } from '../../../gateway/gateway.js';
import { type GuardedTarget, guardToolResult } from '../../../gateway/guardrails.js';
import { deeperThan, MAX_ARGUMENT_DEPTH } from '../../../guards/depth.js';
import { decideCall } from '../../../guards/policy/rules.js';
import { isObject } from '../../../lib/json.js';
import { checkParamHeaders } from '../../../protocol/headers.js';
import { resultMessage } from '../../../protocol/jsonrpc.js';
import { UpstreamAuthRequired } from '../../../upstream/call-errors.js';
import type { Upstream } from '../../../upstream/upstream.js';
import type { Edge } from '../edge.js';
import type { Exchange } from '../exchange.js';
import { json, type Reply } from '../http-in.js';
import {
  type ApprovalGate,
  type ApprovalOutcome,
  approvalQuestion,
  refusalResult,
  shownArguments,
} from '../rounds/approval.js';
import { loginReply, takeLoginState } from '../rounds/login.js';
import { type QueueAudit, type QueueGate, queuedCall, queues } from '../rounds/queued.js';
import { queuedTask, takesTask } from '../rounds/queued-task.js';
import { planTask, taskCreated } from '../tasks.js';
import { relayRequest } from './relay.js';
import { runCode } from './run-code.js';

type Result = Record<string, unknown>;
export type Verdict = 'allowed' | 'denied' | 'quarantined' | 'invalid' | 'error';
/** The approval fields of an audit line: the outcome, and for a yes, who gave it and when. */
type ApprovalAudit =
  | { approval: ApprovalOutcome | 'denied'; approvedBy?: string; approvedAt?: string }
  | QueueAudit;

/**
 * Relays one tools/call to the upstream that owns it, with one audit line per call. The answer
 * is plain JSON unless something must reach the client first (progress re-keyed to its token,
 * log messages it asked for): then the POST becomes an SSE stream (relay.ts, answer.ts).
 */
export async function toolsCall(edge: Edge, outer: Exchange): Promise<Reply> {
  const call = new ToolCall(edge, outer);
  const { gateway } = edge;
  try {
    // A client may call a tool it already knows without listing first: wait for the first
    // catalog like tools/list does. The tool is looked up here, once, for the whole call.
    await gateway.ready;
    call.entry = gateway.resolve(outer.principal, call.params.name);
    // A program calls upstream tools only (#50): never a meta-tool, never itself.
    if (outer.code && call.entry.meta)
      throw new ManifoldError('ERR_TOOL_UNKNOWN', `Unknown tool: ${call.entry.name}`);
  } catch (e) {
    return call.denied(e);
  }
  // A 2026-07-28 client mirrors some arguments into headers: a transport check, not audited.
  const plan = outer.era === 'modern' && outer.http ? gateway.guards.paramHeaders(call.entry) : [];
  if (plan.length > 0) {
    const args = call.params.arguments;
    checkParamHeaders(plan, isObject(args) ? args : {}, (name) => outer.http!.header(name));
  }
  try {
    await admit(edge, call);
  } catch (e) {
    return call.denied(e);
  }
  try {
    return await relay(edge, call);
  } catch (e) {
    return call.refused(e);
  }
}

/** One tools/call on its way: the exchange (an inner one for `manifold__call_tool`), its tool, and its audit line. */
class ToolCall {
  ex: Exchange;
  params: Record<string, unknown>;
  entry: CatalogEntry | undefined;
  /** The exchange as the client sent it (`ex` may become the call it names). */
  private readonly outer: Exchange;
  private readonly started: number;
  /** Audit lines written for this request (a held call's rounds write theirs through the first). */
  private lines = 0;
  /** What policy rules and guardrails decided (#51), for the audit line: types, never values. */
  policy: Record<string, unknown> | undefined;

  constructor(
    private readonly edge: Edge,
    ex: Exchange,
  ) {
    this.ex = ex;
    this.outer = ex;
    this.params = ex.request.params ?? {};
    this.started = edge.gateway.platform.now();
  }

  /**
   * The call's audit line and metrics. Argument values are never logged: only sizes, names and
   * the verdict (and, for a call that needed a person's yes, what they answered and when).
   */
  audit(
    verdict: Verdict,
    bytesOut: number,
    approval?: ApprovalAudit,
    reason?: string,
    /** The round ended asking the client for input: the call goes on in a later request. */
    inputRequired?: boolean,
  ): void {
    this.lines++;
    const { gateway } = this.edge;
    const { entry, params, outer } = this;
    const { principal, bytesIn } = outer;
    const tool = entry?.name ?? (typeof params.name === 'string' ? params.name.slice(0, 128) : null);
    const server = entry?.server ?? null;
    const durationMs = gateway.platform.now() - this.started;
    outer.trace?.verdict(verdict, server, reason);
    gateway.log.info('audit.tools_call', {
      tenant: principal.tenant,
      subject: principal.subject,
      tool,
      server,
      verdict,
      durationMs,
      bytesIn,
      bytesOut,
      ...(inputRequired ? { resultType: 'input_required' } : {}),
      ...approval,
      ...this.policy,
      ...(outer.code ? { via: 'code', run: outer.code.run } : {}),
    });
    const { observers } = gateway;
    observers.report('tools/call', principal, server, tool, verdict, durationMs, bytesIn, bytesOut, reason);
  }

  /** Refused before it was sent: audited, and thrown on. */
  denied(e: unknown): never {
    this.audit('denied', 0, undefined, e instanceof ManifoldError ? e.code : undefined);
    throw e;
  }

  /** Adds policy fields (#51) to this call's audit line; guardrail notes accumulate. */
  note(fields: Record<string, unknown>): void {
    const before = this.policy ?? {};
    const notes = fields.guardrails as unknown[] | undefined;
    if (notes && notes.length === 0) return;
    const merged = { ...before, ...fields };
    if (notes && Array.isArray(before.guardrails)) merged.guardrails = [...before.guardrails, ...notes];
    this.policy = merged;
  }

  /**
   * Refused after admission (a request state that does not open, a question that could not be
   * asked…): audited unless a line for this request already says what happened, and thrown on.
   */
  refused(e: unknown): never {
    if (this.lines === 0) {
      const code = e instanceof ManifoldError ? e.code : undefined;
      const verdict =
        code === 'ERR_INVALID_PARAMS' ? 'invalid' : code === 'ERR_TOOL_UNKNOWN' ? 'denied' : 'error';
      this.audit(verdict, 0, undefined, code);
    }
    throw e;
  }
}

/**
 * Takes the call from the tenant's rate limit, once its callee is known (search mode's
 * `manifold__call_tool` names the call it stands for) and its server's first connection attempt
 * has settled.
 */
async function admit(edge: Edge, call: ToolCall): Promise<void> {
  const { gateway } = edge;
  const { principal } = call.ex;
  let entry = call.entry!;
  if (entry.meta === 'call_tool') {
    // Search mode's way to call a found tool: the call it names, exactly as if made directly.
    call.ex = innerCall(call.ex);
    call.params = call.ex.request.params ?? {};
    call.entry = undefined;
    entry = gateway.resolve(principal, call.params.name);
    call.entry = entry;
    if (entry.meta)
      throw new ManifoldError('ERR_INVALID_PARAMS', 'manifold__call_tool calls upstream tools only');
  }
  const owner = gateway.pool.get(entry.server);
  if (owner?.state === 'connecting') await owner.firstAttempt;
  const limit = await gateway.takeCall(principal.tenant);
  if (!limit.ok) throw rateLimited(limit.retryAfterSeconds);
}

/** What a call needs to wait for before it is sent: an approval question, a login, its callee. */
class Prepared {
  gate?: ApprovalGate | undefined;
  /** When a person approved it (ms since the epoch), and who (the subject whose client answered). */
  approvedAt?: number | undefined;
  approvedBy?: string | undefined;

  constructor(
    public ex: Exchange,
    public upstream: Upstream,
    public round = 0,
  ) {}
}

async function relay(edge: Edge, call: ToolCall): Promise<Reply> {
  const { gateway } = edge;
  const { ex } = call;
  const entry = call.entry!;
  const { principal, request } = ex;
  const params = request.params ?? {};
  const args = params.arguments;
  if (args !== undefined && !isObject(args)) {
    call.audit('invalid', 0);
    throw new ManifoldError('ERR_INVALID_PARAMS', 'arguments must be an object');
  }
  const argsObject = (args ?? {}) as Record<string, unknown>;
  // Bounded here, at the edge, whatever the schema allows: nothing after (the approval question's
  // canonical JSON, the checks, the encoder that sends them upstream) meets a depth it cannot take.
  if (deeperThan(argsObject, MAX_ARGUMENT_DEPTH)) {
    call.audit('invalid', 0, undefined, 'ERR_INVALID_PARAMS');
    throw new ManifoldError(
      'ERR_INVALID_PARAMS',
      `arguments are nested deeper than ${MAX_ARGUMENT_DEPTH} levels; send them less deeply nested`,
    );
  }
  const respond = (verdict: Verdict, body: string) => {
    call.audit(verdict, body.length);
    return json(body);
  };
  const local = (r: Result) => resultMessage(request.id, ex.dress(r));
  if (entry.meta === 'describe_tool') {
    return respond('allowed', local(describeTool(gateway, principal, argsObject)));
  }
  if (entry.meta === 'search_tools')
    return respond('allowed', local(searchTools(gateway, principal, argsObject)));
  if (entry.meta === 'run_code') {
    const audit = (verdict: Verdict, bytes: number, inputRequired?: boolean) =>
      call.audit(verdict, bytes, undefined, undefined, inputRequired);
    return runCode(edge, ex, entry, argsObject, audit, toolsCall);
  }
  const refusal = gateway.guards.refuse(entry);
  if (refusal) return respond('quarantined', local(refusal));
  // Policy rules (#51): what a rule that reads no arguments denies is already out of the view.
  const askReason = gateway.policy.empty ? undefined : decideRules(edge, call, entry, argsObject);
  // Arguments are checked against the full schema before anything is sent.
  const invalid = gateway.guards.checkArguments(gateway.catalog, entry, argsObject);
  if (invalid) return respond('invalid', local(invalid));
  let sent = argsObject;
  // No guardrail configured: nothing is built for them.
  const target = gateway.guardrails.empty ? undefined : guardedTarget(entry, ex);
  if (target && gateway.guardrails.applies(target, 'request')) {
    const out = await gateway.guardrails.request(target, argsObject);
    call.note({ guardrails: out.notes });
    if (out.blocked) return respond('denied', local(errorResult(out.message)));
    if (out.modified) {
      // A redacted or rewritten request is checked against the tool's schema again.
      const again = gateway.guards.checkArguments(gateway.catalog, entry, out.args);
      if (again) return respond('invalid', local(again));
      sent = out.args;
    }
  }
  // Refused by policy: an isError result with the reason, so the model can tell its user.
  const timeoutSeconds =
    entry.approval === 'allow' && askReason === undefined
      ? 0
      : (gateway.config.servers.find((s) => s.name === entry.server)?.approval.timeoutSeconds ?? 120);
  if (entry.approval === 'deny') {
    const body = local(refusalResult(entry, 'denied', timeoutSeconds));
    call.audit('denied', body.length, { approval: 'denied' });
    return json(body);
  }
  const shared = gateway.pool.get(entry.server);
  if (!shared) throw new ManifoldError('ERR_TOOL_UNKNOWN', `Unknown tool: ${entry.name}`);
  const asks = entry.approval === 'ask' || askReason !== undefined;
  const waits = asks || shared.config.auth?.mode === 'user' || shared.config.isolation !== 'shared';
  const prepared = waits
    ? await prepare(edge, call, entry, sent, shared, timeoutSeconds, asks, askReason)
    : new Prepared(ex, shared);
  if (!(prepared instanceof Prepared)) return prepared;
  // #52: an operator decides in the approvals queue, where the server says so or the client cannot be asked.
  const approval = shared.config.approval;
  if (prepared.gate && queues(approval, prepared.ex)) {
    const gate: QueueGate = {
      entry,
      args: sent,
      digest: prepared.gate.digest,
      shown: shownArguments(sent, gateway.redact),
      upstream: prepared.upstream,
      timeoutMs: timeoutSeconds * 1000,
      runTimeoutMs: shared.config.timeoutMs,
      ttlMs: (approval.queueTtlSeconds ?? DEFAULT_QUEUE_TTL_SECONDS) * 1000,
      notify: approval.notify,
      audit: (verdict, bytesOut, fields) => call.audit(verdict, bytesOut, fields),
    };
    // A client that takes tasks gets one while the call waits; any other is held.
    return takesTask(prepared.ex) ? queuedTask(edge, prepared.ex, gate) : queuedCall(edge, prepared.ex, gate);
  }
  return send(edge, call, entry, sent, prepared);
}

/** What must be waited for before the call is sent; a reply instead when the call ends here. */
async function prepare(
  edge: Edge,
  call: ToolCall,
  entry: CatalogEntry,
  argsObject: Record<string, unknown>,
  shared: Upstream,
  timeoutSeconds: number,
  asks: boolean,
  /** The reason of the policy rule that asks (#51), shown in the question. */
  askReason: string | undefined,
): Promise<Prepared | Reply> {
  const { gateway } = edge;
  let ex = call.ex;
  const prepared = new Prepared(ex, shared);
  if (asks) {
    const question = await approvalQuestion(entry, argsObject, gateway.redact, askReason);
    prepared.gate = {
      method: 'elicitation/create',
      params: question.params,
      digest: question.digest,
      timeoutMs: timeoutSeconds * 1000,
      approved: (at, by) => {
        prepared.approvedAt = at;
        prepared.approvedBy = by;
      },
      refuse: (outcome, id, detail) => {
        const body = resultMessage(id, ex.dress(refusalResult(entry, outcome, timeoutSeconds, detail)));
        call.audit('denied', body.length, { approval: outcome });
        return body;
      },
    };
  }
  // A `user` server (#19): a retry after the caller signed in carries the gateway's login state.
  // #52: a `user-key` server's caller gives a key through the same round as a sign-in.
  if (shared.config.auth?.mode === 'user' || shared.config.auth?.mode === 'user-key') {
    ({ ex, round: prepared.round } = await takeLoginState(edge, ex, entry.name));
    prepared.ex = ex;
  }
  if (shared.config.isolation !== 'shared') {
    try {
      // An isolated server's call goes to the caller's own instance.
      prepared.upstream = await gateway.callee(entry.server, ex.principal);
    } catch (e) {
      call.audit('error', 0);
      if (e instanceof UpstreamAuthRequired) return loginReply(edge, ex, entry.name, e, prepared.round);
      throw e;
    }
  }
  return prepared;
}

/**
 * Sends the call. A retry's request state can still refuse it (the state does not open, or it
 * carries other arguments than were approved): that rejects, and is audited like any refusal.
 */
function send(
  edge: Edge,
  call: ToolCall,
  entry: CatalogEntry,
  argsObject: Record<string, unknown>,
  prepared: Prepared,
): Promise<Reply> {
  const { gateway } = edge;
  const { ex, upstream, gate } = prepared;
  const approvalAudit = (): ApprovalAudit | undefined =>
    prepared.approvedAt === undefined
      ? undefined
      : {
          approval: 'accepted',
          approvedBy: prepared.approvedBy ?? ex.principal.subject,
          approvedAt: new Date(prepared.approvedAt).toISOString(),
        };
  // An override's fixed, hidden, defaulted and renamed arguments, mapped back for the upstream (#54).
  const upstreamArgs = entry.args ? upstreamArguments(entry.args, argsObject) : argsObject;
  const upstreamParams: Record<string, unknown> = { name: entry.original, arguments: upstreamArgs };
  // A task, where both sides run them (or an error that says why not: never a silent sync call).
  let plan: ReturnType<typeof planTask>;
  try {
    plan = planTask(ex, entry, upstream);
  } catch (e) {
    call.audit('denied', 0);
    throw e;
  }
  if (plan.task) upstreamParams.task = plan.task;
  if (ex.meta.relayed) upstreamParams._meta = ex.meta.relayed;
  return relayRequest(edge, ex, {
    upstream,
    method: 'tools/call',
    params: upstreamParams,
    target: entry.name,
    repeatable: entry.risk === 'read',
    progressToken: ex.meta.progressToken,
    onResult:
      !gateway.guardrails.empty && gateway.guardrails.applies(guardedTarget(entry, ex), 'response')
        ? async (result, id) =>
            gateway.guards.resultMessage(
              entry,
              ex.dress(await guardToolResult(gateway, entry, ex.principal, result, (n) => call.note(n))),
              id,
            )
        : (result, id) => gateway.guards.resultMessage(entry, ex.dress(result), id),
    errorResult: (e) => errorAsResult(entry, e),
    audit: (verdict, bytesOut, inputRequired) =>
      call.audit(verdict, bytesOut, approvalAudit(), undefined, inputRequired),
    approval: gate,
    tasks: plan.extension,
    onTask:
      plan.extension || plan.task
        ? (raw: Result, id: string | number) => taskCreated(edge, ex, entry, raw, id)
        : undefined,
  });
}

/** `manifold__call_tool {name, arguments}` as the tools/call it stands for (the rest of params kept). */
function innerCall(ex: Exchange): Exchange {
  const params = ex.request.params ?? {};
  const args = params.arguments;
  const inner = isObject(args) ? args : {};
  if (typeof inner.name !== 'string' || inner.name === '') {
    throw new ManifoldError(
      'ERR_INVALID_PARAMS',
      'manifold__call_tool needs {"name": "<tool>", "arguments": {...}}',
    );
  }
  return {
    ...ex,
    request: { ...ex.request, params: { ...params, name: inner.name, arguments: inner.arguments ?? {} } },
  };
}

/** Failures that belong to the tool's answer rather than to the protocol become isError results. */
function errorAsResult(entry: CatalogEntry, e: unknown): Result | undefined {
  if (e instanceof ManifoldError && e.code === 'ERR_UPSTREAM_BODY_TOO_LARGE') {
    return {
      content: [
        {
          type: 'text',
          text: `The answer of ${entry.name} was too large: ${e.publicMessage}. Ask for less.`,
        },
      ],
      isError: true,
      _meta: { 'manifold/truncated': true },
    };
  }
  return undefined;
}

const errorResult = (text: string): Result => ({ content: [{ type: 'text', text }], isError: true });

/**
 * manifold__describe_tool: the full definitions of tools the caller can see. A tool the caller
 * cannot see and a tool that does not exist give the same answer (SECURITY A13).
 */
export function describeTool(gateway: Gateway, principal: Principal, args: Record<string, unknown>): Result {
  const requested: unknown[] =
    args.names !== undefined ? (Array.isArray(args.names) ? args.names : [args.names]) : [args.name];
  if (
    requested.length === 0 ||
    requested.length > DESCRIBE_MAX_NAMES ||
    requested.some((n) => typeof n !== 'string')
  ) {
    return errorResult(
      `Pass {"name": "<tool>"} or {"names": [...]} with 1 to ${DESCRIBE_MAX_NAMES} tool names.`,
    );
  }
  const found: CatalogEntry[] = [];
  for (const name of requested as string[]) {
    try {
      found.push(gateway.resolve(principal, name));
    } catch (e) {
      if (e instanceof ManifoldError) return errorResult(e.publicMessage);
      throw e;
    }
  }
  const tools = found.map((e) => {
    const { name, title, description, inputSchema, outputSchema, annotations } = e.full;
    return { name, title, description, inputSchema, outputSchema, annotations };
  });
  return {
    content: [{ type: 'text', text: JSON.stringify(tools.length === 1 ? tools[0] : tools, null, 2) }],
  };
}

/**
 * manifold__search_tools: the best matching tools the caller may see, as tools/list would show
 * them (a quarantined tool as its stub). Bounded query, bounded answer.
 */
export function searchTools(gateway: Gateway, principal: Principal, args: Record<string, unknown>): Result {
  const query = args.query;
  if (typeof query !== 'string' || query.trim() === '' || query.length > MAX_QUERY_LENGTH) {
    return errorResult(`Pass {"query": "<a few words>"} of 1 to ${MAX_QUERY_LENGTH} characters.`);
  }
  const limit = args.limit;
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1)) {
    return errorResult('limit must be a positive integer.');
  }
  const hits = gateway.searchTools(principal, query, limit as number | undefined);
  // Code mode (#50): each hit is its TypeScript declaration (made from the schemas tools/list
  // would show, so bounded by the disclosure budget), which says what its input schema says.
  const code = gateway.codeMode(principal);
  const found = hits.map((e) => (code ? codeHit(e) : searchHit(e)));
  const text =
    found.length === 0
      ? `No tool matches ${JSON.stringify(query)}. Try other words.`
      : JSON.stringify(found, null, 1);
  return { content: [{ type: 'text', text }], structuredContent: { tools: found } };
}

/** What guardrails see of a call: its method, server, profile, exposed name and caller. */
function guardedTarget(entry: CatalogEntry, ex: Exchange): GuardedTarget {
  return {
    method: 'tools/call',
    server: entry.server,
    profile: ex.principal.profile,
    name: entry.name,
    principal: ex.principal,
  };
}

/**
 * The policy rules of one call (#51): the pending rules that read its arguments, then the view
 * rule that held. A deny fails exactly like a call to a tool outside the caller's grants (the
 * rule and its reason only in the audit line and metrics); an ask returns its reason for the
 * approval question; an allow, or nothing, returns undefined.
 */
function decideRules(
  edge: Edge,
  call: ToolCall,
  entry: CatalogEntry,
  args: Record<string, unknown>,
): string | undefined {
  const { gateway } = edge;
  const { ex } = call;
  const decision = decideCall(gateway.ruling(ex.principal, entry), { args, era: ex.era });
  if (!decision) return undefined;
  const { rule, effect } = decision;
  gateway.policyMetrics.rule(rule.id, effect, rule.reason);
  call.note({
    rule: rule.id,
    ruleEffect: effect,
    ruleReason: rule.reason,
    ...(decision.error ? { ruleError: decision.error.slice(0, 200) } : {}),
  });
  if (effect === 'deny') {
    call.audit('denied', 0, undefined, `rule ${rule.id}: ${rule.reason}`);
    throw new ManifoldError('ERR_TOOL_UNKNOWN', `Unknown tool: ${entry.name}`);
  }
  return effect === 'ask' ? rule.reason : undefined;
}
