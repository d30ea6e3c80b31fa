/**
 * `manifold__run_code` (#50): a program runs in the sandbox (src/code), and each of its
 * `tools.x(args)` is an inner tools/call through the same chain as a direct one (`toolsCall`):
 * visibility and grants, profile, quarantine, argument checks, risk and approval, the tenant's
 * rate limit, caps, its own audit line (`via: "code"`, the run's id) and metrics. What the
 * caller cannot see does not exist in the program, and a program cannot reach the meta-tools.
 *
 * Approval inside a run:
 * - a legacy client is asked by elicitation on the run's own stream while the run waits;
 * - a modern client gets `input_required` (spec 2026-07-28, basic/patterns/mrtr: "Multi
 *   Round-Trip Requests"). The gateway's requestState names the run (its id, fixed clock and
 *   the program's digest), sealed and bound to the principal; the calls the run completed are
 *   kept in the store's journal under the principal and that id. The retry runs the program
 *   again from the start: each completed call is answered from the journal, never sent again,
 *   on this instance or another sharing the store (SECURITY H4); the call that asked gets the
 *   client's answer (its approval is claimed once, rounds/approval.ts); a replay that diverges
 *   stops the run and sends nothing.
 */
import type { CatalogEntry } from '../../../aggregate/catalog.js';
import { callDigest, Journal, journalKey } from '../../../code/journal.js';
import { runFailure, runProgram, runResult, seedOf } from '../../../code/run.js';
import type { HostAnswer, RunStop } from '../../../code/sandbox.js';
import { ManifoldError } from '../../../errors.js';
import { sha256Hex } from '../../../guards/canonical-json.js';
import { Cancellation } from '../../../lib/cancellation.js';
import { isObject } from '../../../lib/json.js';
import { resultMessage } from '../../../protocol/jsonrpc.js';
import type { InputRequests } from '../../../upstream/session.js';
import type { Edge } from '../edge.js';
import type { Exchange } from '../exchange.js';
import { json, type Reply, replyText } from '../http-in.js';
import {
  type ApprovalGate,
  type ApprovalOutcome,
  approvalQuestion,
  approvalVerdict,
  askApprovalLegacy,
  askApprovalModern,
  CLAIM_GRACE_MS,
} from '../rounds/approval.js';
import { INPUT_TTL_MS, inputRequiredResult, invalidState, openState } from '../rounds/mrtr.js';
import { Answer } from './answer.js';

type Result = Record<string, unknown>;

/** The sealed requestState of a run paused for input. */
interface CodeState {
  v: 1;
  k: 'code';
  /** Principal key, method, target, expiry: as every MRTR state (rounds/mrtr.ts). */
  p: string;
  m: 'tools/call';
  n: string;
  x: number;
  /** The run's id and its fixed clock. */
  r: string;
  t: number;
  /** The program's digest: a retry with another program is refused. */
  c: string;
  /** The call that asked, by its place in the program, and its own state. */
  i: number;
  s: string;
}

export type ToolsCall = (edge: Edge, ex: Exchange) => Promise<Reply>;
type Audit = (
  verdict: 'allowed' | 'invalid' | 'error' | 'denied',
  bytesOut: number,
  inputRequired?: boolean,
) => void;

/** A call that asked the client for input: the run pauses on it. */
interface Pause {
  index: number;
  requests: InputRequests;
  state: string;
}

/** Runs one program for `ex`; resolves with the first reply (a stream once a legacy client is asked). */
export async function runCode(
  edge: Edge,
  ex: Exchange,
  entry: CatalogEntry,
  args: Record<string, unknown>,
  audit: Audit,
  toolsCall: ToolsCall,
): Promise<Reply> {
  const { gateway } = edge;
  const { principal, request } = ex;
  const code = args.code;
  const local = (r: Result) => gateway.guards.resultMessage(entry, ex.dress(r), request.id);
  if (typeof code !== 'string' || code.trim() === '') {
    const body = local(runFailure('pass {"code": "<the body of an async function>"}', undefined, [], []));
    audit('invalid', body.length);
    return json(body);
  }
  const now = gateway.platform.now();
  // The program's digest binds a paused run's state to it: taken only for a state, made or read.
  let digested: Promise<string> | undefined;
  const digest = () => {
    digested ??= sha256Hex(code);
    return digested;
  };
  const params = request.params ?? {};
  const limits = gateway.config.gateway.code;
  // `gateway.code.approval: "ask"`: the user approves the program, shown its code, before it runs.
  const gate = limits.approval === 'ask' ? await runGate(edge, ex, entry, code, audit) : undefined;
  let state: CodeState | undefined;
  let journal = new Journal();
  let askFirst = false;
  if (ex.era === 'modern' && params.requestState !== undefined) {
    const sealer = await gateway.states;
    const kind = ((await sealer.open(params.requestState)) as { k?: unknown } | undefined)?.k;
    if (gate && kind === 'approve') {
      // The answer to the run's own question: the state's rules, then the user's (approval.ts).
      const body = await openState(sealer, params.requestState, {
        principal: principal.key,
        method: 'tools/call',
        target: entry.name,
        now,
      });
      const answers = isObject(params.inputResponses) ? params.inputResponses : {};
      const outcome = await approvalVerdict(edge, gate, body, answers, now);
      if (outcome !== 'accepted') return json(gate.refuse(outcome, request.id));
    } else {
      state = await openCodeState(edge, params.requestState, principal.key, entry.name, await digest(), now);
      const loaded = await Journal.load(gateway.store, journalKey(principal.key, state.r), now);
      if (!loaded) throw invalidState();
      journal = loaded;
    }
  } else if (gate) {
    if (ex.era === 'modern') {
      const sealer = await gateway.states;
      return askApprovalModern(edge, ex, { method: 'tools/call', target: entry.name }, gate, sealer);
    }
    askFirst = true;
  }
  const run = state?.r ?? crypto.randomUUID();
  const clock = state?.t ?? now;
  const answer = ex.answer();
  const cancelled = new Cancellation();
  const untrack = ex.track(request.id, cancelled);
  const calls: string[] = [];
  const inflight = new Set<Promise<unknown>>();
  let pause: Pause | undefined;
  let index = 0;

  const call = async (name: string, argsJson: string): Promise<HostAnswer> => {
    const k = index++;
    if (k >= limits.maxCalls) {
      return stop('limit', `the program made more than ${limits.maxCalls} tool calls`, 'maxCalls');
    }
    if (cancelled.aborted) return stop('refused', 'the client cancelled the run');
    if (!gateway.callable(principal, name)) return { error: `Unknown tool: ${name.slice(0, 128)}` };
    let callArgs: unknown;
    try {
      callArgs = JSON.parse(argsJson);
    } catch {
      callArgs = undefined;
    }
    if (!isObject(callArgs)) return { error: `the arguments of ${name} must be a JSON object` };
    calls.push(name);
    // A replay compares each call with the journal; a first run only records it (journal.ts).
    const d = state ? await callDigest(name, callArgs) : { name, args: callArgs };
    if (typeof d === 'string') {
      const replayed = journal.replay(k, d);
      if (replayed === 'diverged') {
        return stop(
          'diverged',
          `the program took another path than before the question: call ${k + 1} (${name}) differs from the journal, and nothing was sent`,
        );
      }
      if (replayed) return replayed;
    }
    const retry =
      state && k === state.i
        ? {
            requestState: state.s,
            inputResponses: isObject(params.inputResponses) ? params.inputResponses : {},
          }
        : undefined;
    const work = innerCall(edge, ex, answer, cancelled, run, k, name, callArgs, retry, toolsCall).then(
      (r) => {
        if ('pause' in r) {
          journal.record(k, d);
          pause ??= { index: k, requests: r.pause.requests, state: r.pause.state };
          return stop('paused', 'the run is waiting for the client');
        }
        journal.record(k, d, r);
        return r;
      },
    );
    inflight.add(work);
    try {
      return await work;
    } finally {
      inflight.delete(work);
    }
  };

  void (async () => {
    if (askFirst && gate) {
      // A legacy client's user is asked on the run's own stream, before anything runs.
      const { outcome, detail } = await askApprovalLegacy(ex, answer, gate, cancelled);
      if (outcome !== 'accepted') {
        untrack();
        answer.finish(gate.refuse(outcome, request.id, detail));
        return;
      }
    }
    let body: string;
    let verdict: 'allowed' | 'error' = 'allowed';
    let asked = false;
    try {
      const outcome = await runProgram(code, {
        names: {
          has: (name) => gateway.callable(principal, name),
          list: () => gateway.callableNames(principal),
        },
        call,
        limits,
        now: clock,
        seed: seedOf(run),
        clock: () => gateway.platform.now(),
        wasmModule: gateway.platform.codeEngine,
      });
      const pausing = pause !== undefined && outcome.ok === false && outcome.stop?.kind === 'paused';
      // A pause keeps the journal, so the calls still running are awaited and recorded first; any
      // other end answers now (its calls finish on their own, each with its audit line).
      while (pausing && inflight.size > 0) await Promise.allSettled([...inflight]);
      if (pausing && pause) {
        body = await paused(edge, ex, entry, pause, journal, { run, clock, digest: await digest() });
        asked = true;
      } else if (outcome.ok && state && calls.length <= state.i) {
        verdict = 'error';
        body = local(
          runFailure(
            'the program took another path than before the question: it never reached the call that asked',
            undefined,
            calls,
            outcome.logs,
          ),
        );
      } else if (outcome.ok) {
        body = local(runResult(outcome.value, outcome.logs));
      } else {
        verdict = 'error';
        body = local(runFailure(outcome.error, outcome.limit, calls, outcome.logs));
      }
    } catch (e) {
      verdict = 'error';
      gateway.log.warn('code.run_failed', {
        run,
        error: e instanceof ManifoldError ? e.code : e instanceof Error ? e.name : 'unknown',
      });
      const message = e instanceof ManifoldError ? e.publicMessage : 'the run failed inside the gateway';
      body = local(runFailure(message, undefined, calls, []));
    } finally {
      untrack();
    }
    audit(verdict, body.length, asked);
    answer.finish(body);
  })();
  return answer.response;
}

/** The question before a program runs, and the refusal when it does not (audited here). */
async function runGate(
  edge: Edge,
  ex: Exchange,
  entry: CatalogEntry,
  code: string,
  audit: Audit,
): Promise<ApprovalGate> {
  const seconds = edge.gateway.config.gateway.code.approvalTimeoutSeconds;
  const question = await approvalQuestion(entry, { code }, edge.gateway.redact);
  return {
    method: 'elicitation/create',
    params: question.params,
    digest: question.digest,
    timeoutMs: seconds * 1000,
    approved: () => {},
    refuse: (outcome, id, detail) => {
      const body = resultMessage(id, ex.dress(runRefusal(outcome, seconds, detail)));
      audit('denied', body.length);
      return body;
    },
  };
}

function runRefusal(outcome: Exclude<ApprovalOutcome, 'accepted'>, seconds: number, detail?: string): Result {
  const text = {
    declined: 'The user declined to run the program. It did not run.',
    cancelled:
      'The user dismissed the approval request for the program without approving it. It did not run.',
    timeout: `Nobody approved the program within ${seconds} s. It did not run; call manifold__run_code again to ask again.`,
    unsupported: `This gateway asks the user before running a program (gateway.code.approval), and this client cannot ask its user${detail ? ` (${detail})` : ': it did not declare the elicitation capability'}. The program did not run.`,
    replayed:
      'This approval was already used: an answer is final, and the program did not run again. Call manifold__run_code again to ask for a new approval.',
    failed: `The approval request for the program could not be answered${detail ? `: ${detail}` : ''}. It did not run.`,
    // A program is approved by its caller's user, never through the operators' queue.
    queued: 'The program waits for approval. It did not run yet.',
    expired:
      'Nobody approved the program in time. It did not run; call manifold__run_code again to ask again.',
    running: 'The program was approved and runs for another call. It did not run here.',
  }[outcome];
  return { content: [{ type: 'text', text }], isError: true, _meta: { 'manifold/approval': outcome } };
}

function stop(kind: RunStop['kind'], message: string, limit?: RunStop['limit']): HostAnswer {
  return { stop: { kind, message, ...(limit ? { limit } : {}) } };
}

/** Opens a run's requestState, or -32602 for anything that does not match this request. */
async function openCodeState(
  edge: Edge,
  raw: unknown,
  principal: string,
  target: string,
  digest: string,
  now: number,
): Promise<CodeState> {
  const sealer = await edge.gateway.states;
  const body = (await sealer.open(raw)) as Partial<CodeState> | undefined;
  if (
    body?.v !== 1 ||
    body.k !== 'code' ||
    body.p !== principal ||
    body.m !== 'tools/call' ||
    body.n !== target ||
    typeof body.x !== 'number' ||
    body.x < now ||
    typeof body.r !== 'string' ||
    typeof body.t !== 'number' ||
    typeof body.i !== 'number' ||
    typeof body.s !== 'string'
  ) {
    throw invalidState();
  }
  if (body.c !== digest) {
    throw new ManifoldError(
      'ERR_INVALID_PARAMS',
      'this requestState belongs to another program: send the same code again, or start over without a requestState',
    );
  }
  return body as CodeState;
}

/** The run paused on a question: its journal kept, its state sealed, the question passed on. */
async function paused(
  edge: Edge,
  ex: Exchange,
  entry: CatalogEntry,
  pause: Pause,
  journal: Journal,
  run: { run: string; clock: number; digest: string },
): Promise<string> {
  const { gateway } = edge;
  const now = gateway.platform.now();
  const expires = now + INPUT_TTL_MS;
  await journal.save(gateway.store, journalKey(ex.principal.key, run.run), expires + CLAIM_GRACE_MS, now);
  const sealer = await gateway.states;
  const state = await sealer.seal({
    v: 1,
    k: 'code',
    p: ex.principal.key,
    m: 'tools/call',
    n: entry.name,
    x: expires,
    r: run.run,
    t: run.clock,
    c: run.digest,
    i: pause.index,
    s: pause.state,
  } satisfies CodeState);
  return resultMessage(ex.request.id, inputRequiredResult(pause.requests, state, edge.serverInfo));
}

/**
 * One `tools.x(args)`: an inner tools/call for the same principal and client, answered as the
 * program sees it. A legacy client's questions go out on the run's own stream; nothing else of
 * the inner call reaches the client (no progress, no log lines).
 */
async function innerCall(
  edge: Edge,
  outer: Exchange,
  runAnswer: Answer,
  cancelled: Cancellation,
  run: string,
  index: number,
  name: string,
  args: Record<string, unknown>,
  retry: { requestState: string; inputResponses: Record<string, unknown> } | undefined,
  toolsCall: ToolsCall,
): Promise<{ value: unknown } | { error: string } | { pause: { requests: InputRequests; state: string } }> {
  const { http: _http, trace: _trace, logLevel: _level, pollMs: _poll, ask, ...base } = outer;
  const inner: Exchange = {
    ...base,
    request: {
      jsonrpc: '2.0',
      id: `${run}:${index}`,
      method: 'tools/call',
      params: { name, arguments: args, ...(retry ?? {}) },
    },
    meta: {},
    answer: () => new Answer(false),
    track: (_id, c) => cancelled.onAbort((reason) => c.abort(reason)),
    ...(ask ? { ask: (_first, method, p, c) => ask(runAnswer, method, p, c) } : {}),
    code: { run },
  };
  let text: string;
  try {
    text = await replyText(await toolsCall(edge, inner));
  } catch (e) {
    return { error: e instanceof ManifoldError ? e.publicMessage : `the call to ${name} failed` };
  }
  const message = JSON.parse(text) as { result?: unknown; error?: { message?: unknown } };
  if (!isObject(message.result)) {
    const why = message.error?.message;
    return { error: typeof why === 'string' ? why : `the call to ${name} failed` };
  }
  const result = message.result;
  if (result.resultType === 'input_required') {
    const requests = isObject(result.inputRequests) ? (result.inputRequests as InputRequests) : {};
    if (typeof result.requestState !== 'string')
      return { error: `the call to ${name} asked for input without a state` };
    return { pause: { requests, state: result.requestState } };
  }
  if (result.isError === true) return { error: textOf(result) || `${name} failed` };
  const entry = edge.gateway.resolve(outer.principal, name);
  if (entry.full.outputSchema && result.structuredContent !== undefined)
    return { value: result.structuredContent };
  return {
    value: {
      content: Array.isArray(result.content) ? result.content : [],
      ...(result.structuredContent !== undefined ? { structuredContent: result.structuredContent } : {}),
    },
  };
}

function textOf(result: Result): string {
  const content = Array.isArray(result.content) ? result.content : [];
  return content
    .map((c) => (isObject(c) && typeof c.text === 'string' ? c.text : ''))
    .filter((t) => t !== '')
    .join('\n')
    .slice(0, 4000);
}
