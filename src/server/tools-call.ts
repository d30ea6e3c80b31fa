import type { CatalogEntry } from '../aggregate/catalog.js';
import { rateLimited } from '../auth/shared-limit.js';
import { ManifoldError } from '../errors.js';
import { isReservedMetaKey } from '../protocol/versions.js';
import { UpstreamAuthRequired } from '../upstream/call-errors.js';
import { type ApprovalGate, type ApprovalOutcome, approvalQuestion, refusalResult } from './approval.js';
import { type Edge, failBody, json } from './dispatch.js';
import type { Exchange } from './exchange.js';
import type { Reply } from './http-in.js';
import { resultMessage } from './jsonrpc.js';
import { describeTool, searchTools } from './local-tools.js';
import { loginReply, takeLoginState } from './login-elicit.js';
import { planTask, taskCreated } from './tasks.js';
import { runThrough } from './through.js';

type Result = Record<string, unknown>;
export type Verdict = 'allowed' | 'denied' | 'quarantined' | 'invalid' | 'error';
/** The approval fields of an audit line: the outcome, and for a yes, who gave it and when. */
type ApprovalAudit = { approval: ApprovalOutcome | 'denied'; approvedBy?: string; approvedAt?: string };
type Audit = (verdict: Verdict, bytesOut: number, approval?: ApprovalAudit, reason?: string) => void;

/**
 * Relays one tools/call to the upstream that owns it, with one audit line per call. The answer
 * is plain JSON unless something must reach the client first (progress re-keyed to its token,
 * log messages it asked for): then the POST becomes an SSE stream (through.ts, answer.ts).
 */
export async function toolsCall(edge: Edge, outer: Exchange): Promise<Reply> {
  const { gateway } = edge;
  let ex = outer;
  const { principal } = ex;
  const started = gateway.platform.now();
  let params = ex.request.params ?? {};
  const bytesIn = ex.bytesIn;
  let entry: CatalogEntry | undefined;
  // Argument values are never logged: only sizes, names and the verdict (and, for a call that
  // needed a person's yes, what they answered and when).
  const audit: Audit = (verdict, bytesOut, approval, reason) => {
    const tool = entry?.name ?? (typeof params.name === 'string' ? params.name.slice(0, 128) : null);
    const server = entry?.server ?? null;
    const durationMs = gateway.platform.now() - started;
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
      ...approval,
    });
    const { observers } = gateway;
    observers.report('tools/call', principal, server, tool, verdict, durationMs, bytesIn, bytesOut, reason);
  };
  try {
    // A client may call a tool it already knows without listing first: wait for the first
    // catalog like tools/list does, and for the owning upstream's first connection attempt.
    if (!gateway.isReady) await gateway.ready;
    entry = gateway.resolve(principal, params.name);
    if (entry.meta === 'call_tool') {
      // Search mode's way to call a found tool: the call it names, exactly as if made directly.
      ex = innerCall(ex);
      params = ex.request.params ?? {};
      entry = undefined;
      entry = gateway.resolve(principal, params.name);
      if (entry.meta)
        throw new ManifoldError('ERR_INVALID_PARAMS', 'manifold__call_tool calls upstream tools only');
    }
    const owner = gateway.pool.get(entry.server);
    if (owner?.state === 'connecting') await owner.firstAttempt;
    let limit = gateway.takeCall(principal.tenant);
    // Awaited only when a shared limiter had to ask its store: the common call stays synchronous.
    if (limit instanceof Promise) limit = await limit;
    if (!limit.ok) throw rateLimited(limit.retryAfterSeconds);
  } catch (e) {
    audit('denied', 0, undefined, e instanceof ManifoldError ? e.code : undefined);
    throw e;
  }
  return relay(edge, ex, entry, audit);
}

async function relay(edge: Edge, ex: Exchange, entry: CatalogEntry, audit: Audit): Promise<Reply> {
  const { gateway } = edge;
  const { principal, request } = ex;
  const params = request.params ?? {};
  const args = params.arguments;
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
    audit('invalid', 0);
    throw new ManifoldError('ERR_INVALID_PARAMS', 'arguments must be an object');
  }
  const argsObject = (args ?? {}) as Record<string, unknown>;
  const respond = (verdict: Verdict, body: string) => {
    audit(verdict, body.length);
    return json(body);
  };
  const local = (r: Result) => resultMessage(request.id, ex.result(r));
  if (entry.meta === 'describe_tool') {
    return respond('allowed', local(describeTool(gateway, principal, argsObject)));
  }
  if (entry.meta === 'search_tools')
    return respond('allowed', local(searchTools(gateway, principal, argsObject)));
  const refusal = gateway.guards.refuse(entry);
  if (refusal) return respond('quarantined', local(refusal));
  // Arguments are checked against the full schema before anything is sent.
  const invalid = gateway.guards.checkArguments(gateway.catalog, entry, argsObject);
  if (invalid) return respond('invalid', local(invalid));
  // Refused by policy: an isError result with the reason, so the model can tell its user.
  const timeoutSeconds =
    entry.approval === 'allow'
      ? 0
      : (gateway.config.servers.find((s) => s.name === entry.server)?.approval.timeoutSeconds ?? 120);
  if (entry.approval === 'deny') {
    const body = local(refusalResult(entry, 'denied', timeoutSeconds));
    audit('denied', body.length, { approval: 'denied' });
    return json(body);
  }
  let approvedAt: number | undefined;
  let gate: ApprovalGate | undefined;
  if (entry.approval === 'ask') {
    const question = await approvalQuestion(entry, argsObject, gateway.redact);
    gate = {
      method: 'elicitation/create',
      params: question.params,
      digest: question.digest,
      timeoutMs: timeoutSeconds * 1000,
      approved: (at) => {
        approvedAt = at;
      },
      refuse: (outcome, id, detail) => {
        const body = resultMessage(id, ex.result(refusalResult(entry, outcome, timeoutSeconds, detail)));
        audit('denied', body.length, { approval: outcome });
        return body;
      },
    };
  }
  const approvalAudit = (): ApprovalAudit | undefined =>
    approvedAt === undefined
      ? undefined
      : {
          approval: 'accepted',
          approvedBy: principal.subject,
          approvedAt: new Date(approvedAt).toISOString(),
        };

  const shared = gateway.pool.get(entry.server);
  if (!shared) throw new ManifoldError('ERR_TOOL_UNKNOWN', `Unknown tool: ${entry.name}`);
  // An isolated server's call goes to the caller's own instance (no await on the shared path).
  let upstream = shared;
  // A `user` server (#19): a retry after the caller signed in carries the gateway's login state.
  let round = 0;
  if (shared.config.auth?.mode === 'user') ({ ex, round } = await takeLoginState(edge, ex, entry.name));
  if (shared.config.isolation !== 'shared') {
    try {
      upstream = await gateway.callee(entry.server, principal);
    } catch (e) {
      audit('error', 0);
      if (e instanceof UpstreamAuthRequired) return loginReply(edge, ex, entry.name, e, round);
      throw e;
    }
  }

  const upstreamParams: Record<string, unknown> = { name: entry.original, arguments: argsObject };
  // A task, where both sides run them (or an error that says why not: never a silent sync call).
  let plan: ReturnType<typeof planTask>;
  try {
    plan = planTask(ex, entry, upstream);
  } catch (e) {
    audit('denied', 0);
    throw e;
  }
  if (plan.task) upstreamParams.task = plan.task;
  const { progressToken, relayed } = splitMeta(params._meta);
  if (relayed) upstreamParams._meta = relayed;

  const validToken = typeof progressToken === 'string' || typeof progressToken === 'number';
  return runThrough(edge, ex, {
    upstream,
    method: 'tools/call',
    params: upstreamParams,
    target: entry.name,
    repeatable: entry.risk === 'read',
    progressToken: validToken ? progressToken : undefined,
    onResult: (result, id) => {
      const body = gateway.guards.resultMessage(entry, ex.result(result), id);
      audit('allowed', body.length, approvalAudit());
      return body;
    },
    onError: (e, id) => {
      const asResult = errorAsResult(entry, e);
      const f = asResult
        ? { body: resultMessage(id, ex.result(asResult)), status: 200 }
        : failBody(edge, id, e, ex.era);
      audit('error', f.body.length, approvalAudit());
      return f;
    },
    onCancelled: () => audit('error', 0, approvalAudit()),
    ...(gate ? { approval: gate } : {}),
    tasks: plan.extension,
    ...(plan.extension || plan.task
      ? {
          onTask: async (raw: Result, id: string | number) => {
            const body = await taskCreated(edge, ex, entry, raw, id);
            audit('allowed', body.length, approvalAudit());
            return body;
          },
        }
      : {}),
  });
}

/** `manifold__call_tool {name, arguments}` as the tools/call it stands for (the rest of params kept). */
function innerCall(ex: Exchange): Exchange {
  const params = ex.request.params ?? {};
  const args = params.arguments;
  const inner = typeof args === 'object' && args !== null && !Array.isArray(args) ? (args as Result) : {};
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

/**
 * The downstream `_meta`: its progress token is the gateway's to map, and keys under a reserved
 * MCP prefix describe the client's own request (version, capabilities, identity), so the upstream
 * edge writes its own instead. Everything else (trace context, vendor keys) is relayed.
 */
function splitMeta(meta: unknown): { progressToken: unknown; relayed: Record<string, unknown> | undefined } {
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) {
    return { progressToken: undefined, relayed: undefined };
  }
  let progressToken: unknown;
  let relayed: Record<string, unknown> | undefined;
  const m = meta as Record<string, unknown>;
  for (const key in m) {
    if (!Object.hasOwn(m, key)) continue;
    if (key === 'progressToken') progressToken = m[key];
    else if (!isReservedMetaKey(key)) {
      relayed ??= {};
      relayed[key] = m[key];
    }
  }
  return { progressToken, relayed };
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
