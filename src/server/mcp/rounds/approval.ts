/**
 * Human approval before a risky tool runs (issue #14). The gateway asks the calling client's user
 * with an elicitation of its own: on the call's SSE stream for a legacy client (a server-initiated
 * `elicitation/create`), as an MRTR `input_required` result for a modern one. Only an explicit
 * yes lets the call go upstream; a decline, a cancel, silence past the deadline, a client that
 * cannot be asked, or a replayed answer gets an `isError` result, and the upstream never sees the
 * call.
 *
 * At most once: a modern client's yes travels in a sealed requestState naming one approval id,
 * which is claimed in the store before the call is sent. Two retries with the same answer, on
 * one instance or two, send the call once; the state is also bound to a digest of the arguments,
 * so an approval for one set of arguments never runs another. Every state minted for a later
 * round of the approved call (the upstream's own questions) carries that digest, and who approved
 * and when (SECURITY G1). Any answer spends the state: a decline is never followed by a yes (G2).
 */
import type { CatalogEntry } from '../../../aggregate/catalog.js';
import type { Sealer } from '../../../auth/seal.js';
import { ManifoldError } from '../../../errors.js';
import { canonicalJson, sha256Hex } from '../../../guards/canonical-json.js';
import { stripUnsafe } from '../../../guards/text.js';
import { Cancellation } from '../../../lib/cancellation.js';
import { isObject } from '../../../lib/json.js';
import type { Redactor } from '../../../lib/redact.js';
import { rawResultMessage } from '../../../protocol/jsonrpc.js';
import type { InputRequests } from '../../../upstream/session.js';
import type { Edge } from '../edge.js';
import type { Exchange } from '../exchange.js';
import type { Reply } from '../http-in.js';
import { json } from '../http-in.js';
import type { Answer } from '../relay/answer.js';
import { type Approved, approvedOf, inputRequiredResult, invalidState, type StateBody } from './mrtr.js';

type Result = Record<string, unknown>;

/** The key of the gateway's own question among a modern client's input requests. */
export const APPROVAL_INPUT_KEY = 'manifold.approval';
/** How much of the arguments the question shows a person. */
const MAX_SHOWN_ARGUMENTS = 2000;
/** A claim outlives its state by this much, so clock skew between instances cannot reopen it. */
export const CLAIM_GRACE_MS = 10 * 60_000;

export type ApprovalOutcome =
  | 'accepted'
  | 'declined'
  | 'cancelled'
  | 'timeout'
  | 'unsupported'
  | 'replayed'
  | 'failed'
  // #52, the approvals queue: still waiting for an operator, or past its expiry undecided, or
  // approved and being run by another call of the same approval, whose result was not in yet.
  | 'queued'
  | 'expired'
  | 'running';

/** What the relay needs to ask, built once per call that needs approval (tools-call.ts). */
export interface ApprovalGate {
  /** The elicitation to send. */
  method: 'elicitation/create';
  params: Result;
  /** Digest of the canonical arguments: a retry must carry the same ones. */
  digest: string;
  timeoutMs: number;
  /** A person said yes, for the audit line: when, and who (the subject whose client answered). */
  approved(at: number, by: string): void;
  /** The final message when the call does not run; writes the audit line. */
  refuse(outcome: Exclude<ApprovalOutcome, 'accepted'>, id: string | number, detail?: string): string;
}

/**
 * The question a person sees: the server, the tool, its class and the arguments, bounded and
 * stripped of invisible characters, with every configured secret redacted. The form has one
 * boolean that must be set to true: a client that "accepts" an empty form approves nothing.
 */
export async function approvalQuestion(
  entry: CatalogEntry,
  args: Record<string, unknown>,
  redact: Redactor,
  /** Why a policy rule asks (#51): the operator's words, shown first. */
  reason?: string,
): Promise<{ params: Result; digest: string }> {
  const canonical = canonicalJson(args);
  const shown = shownArguments(args, redact);
  const risk = entry.risk === 'undeclared' ? 'not classified' : `classified ${entry.risk}`;
  const message = [
    `Allow the tool ${entry.original} of server ${entry.server} (${entry.name}, ${risk}) to run?`,
    ...(reason === undefined ? [] : [`Why you are asked: ${stripUnsafe(reason)}`]),
    'Arguments:',
    shown,
  ].join('\n');
  return {
    digest: await sha256Hex(canonical),
    params: {
      mode: 'form',
      message,
      requestedSchema: {
        type: 'object',
        properties: {
          approve: {
            type: 'boolean',
            title: 'Approve this call',
            description: `Run ${entry.name} with the arguments shown`,
            default: false,
          },
        },
        required: ['approve'],
      },
    },
  };
}

/** The arguments as a person sees them: bounded, invisible characters stripped, secrets redacted. */
export function shownArguments(args: Record<string, unknown>, redact: Redactor): string {
  const shown = redact(stripUnsafe(JSON.stringify(args, null, 1) ?? '{}'));
  return shown.length > MAX_SHOWN_ARGUMENTS
    ? `${shown.slice(0, MAX_SHOWN_ARGUMENTS)}… (${shown.length - MAX_SHOWN_ARGUMENTS} more characters)`
    : shown;
}

/** An elicitation answer, read strictly: only `accept` with `approve: true` is a yes. */
export function outcomeOf(answer: unknown): 'accepted' | 'declined' | 'cancelled' {
  if (typeof answer !== 'object' || answer === null) return 'cancelled';
  const { action, content } = answer as { action?: unknown; content?: unknown };
  if (action === 'accept') {
    const approve = (content as { approve?: unknown } | undefined)?.approve;
    return approve === true ? 'accepted' : 'declined';
  }
  return action === 'decline' ? 'declined' : 'cancelled';
}

/** The modern client's answer to the gateway's question, from a retry's `inputResponses`. */
export function modernAnswer(inputResponses: unknown): unknown {
  if (typeof inputResponses !== 'object' || inputResponses === null) return undefined;
  return Object.hasOwn(inputResponses, APPROVAL_INPUT_KEY)
    ? (inputResponses as Record<string, unknown>)[APPROVAL_INPUT_KEY]
    : undefined;
}

export function approvalRequests(gate: ApprovalGate): InputRequests {
  return { [APPROVAL_INPUT_KEY]: { method: gate.method, params: gate.params } };
}

/** Whether the client can be asked: it declared elicitation, in form mode (or with no modes). */
export function canElicitForm(capabilities: Record<string, unknown>): boolean {
  const cap = capabilities.elicitation;
  if (!isObject(cap)) return false;
  const modes = Object.keys(cap);
  return modes.length === 0 || modes.includes('form') || !modes.includes('url');
}

/**
 * The isError result for a call that did not run, in words a model can pass on to its user.
 * `setting` names the config that made the gateway ask.
 */
export function refusalResult(
  entry: CatalogEntry,
  outcome: Exclude<ApprovalOutcome, 'accepted'> | 'denied',
  timeoutSeconds: number,
  detail?: string,
): Result {
  const tool = entry.name;
  const setting = `mcpServers.${entry.server}.approval`;
  const text = {
    denied: `The gateway's policy does not allow ${tool} to run (${entry.risk === 'undeclared' ? 'an unclassified tool' : `a ${entry.risk} tool`}, refused by ${setting}). It was not called; tell the user, who can ask the operator.`,
    declined: `The user declined to run ${tool}. It was not called.`,
    cancelled: `The user dismissed the approval request for ${tool} without approving it. It was not called.`,
    timeout: `Nobody approved ${tool} within ${timeoutSeconds} s. It was not called; call it again to ask again.`,
    unsupported: `${tool} needs the user's approval (${setting}), and this client cannot ask its user: it did not declare the elicitation capability${detail ? ` (${detail})` : ''}. It was not called. Use a client that supports elicitation, or ask the operator to change ${setting}.`,
    replayed: `This approval was already used: it was answered once, an answer is final, and ${tool} was not sent again. Call the tool again to ask for a new approval.`,
    failed: `The approval request for ${tool} could not be answered${detail ? `: ${detail}` : ''}. It was not called.`,
    queued: `${tool} waits for an operator's approval${detail ? ` (approval id ${detail})` : ''}. It was not called yet: call it again with the same arguments once it is approved to get its result.`,
    expired: `Nobody approved ${tool} before its approval request${detail ? ` ${detail}` : ''} expired. It was not called; call it again to ask again.`,
    running: `${tool} was approved${detail ? ` (approval id ${detail})` : ''} and is running for another call of yours; its result was not in yet. Call it again with the same arguments to get it.`,
  }[outcome];
  return {
    content: [{ type: 'text', text }],
    isError: true,
    _meta: { 'manifold/approval': outcome },
  };
}

/** A modern client's answer to an approval question: the state's rules, then the user's. */
export async function approvalVerdict(
  edge: Edge,
  gate: ApprovalGate,
  body: StateBody,
  answers: Record<string, unknown>,
  now: number,
): Promise<Exclude<ApprovalOutcome, 'unsupported' | 'failed'>> {
  // The approval covers the arguments it showed: any others need a question of their own.
  if (body.d !== gate.digest) throw invalidState();
  const outcome = body.x < now ? 'timeout' : outcomeOf(modernAnswer(answers));
  // A decision is final (SECURITY G2): the first answer spends the state whatever it said, so a
  // decline (or a cancel, or silence past the deadline) is never followed by a yes. Claimed in the
  // store before anything is sent, so a second retry, here or on another instance, never runs the call.
  return (await edge.gateway.store.claim(`approve:${body.a}`, body.x + CLAIM_GRACE_MS, now))
    ? outcome
    : 'replayed';
}

/**
 * A later round of a call that needs approval (the upstream's own question: a wrap or held
 * state). Its state must carry the approval of exactly these arguments, or it is refused as an
 * invalid state (SECURITY G1); the approval is the round's, for its audit line.
 */
export function approvedRound(gate: ApprovalGate, body: StateBody): Approved {
  const approved = approvedOf(body);
  if (!approved || approved.digest !== gate.digest) throw invalidState();
  gate.approved(approved.at, approved.by);
  return approved;
}

/** The gateway's question to a modern client, as `input_required` with a sealed approval state. */
export async function askApprovalModern(
  edge: Edge,
  ex: Exchange,
  t: { method: string; target: string },
  gate: ApprovalGate,
  sealer: Sealer,
): Promise<Reply> {
  if (!canElicitForm(ex.clientCapabilities)) return json(gate.refuse('unsupported', ex.request.id));
  const state = await sealer.seal({
    v: 1,
    k: 'approve',
    p: ex.principal.key,
    m: t.method,
    n: t.target,
    x: edge.gateway.platform.now() + gate.timeoutMs,
    a: crypto.randomUUID(),
    d: gate.digest,
  } satisfies StateBody);
  const result = inputRequiredResult(approvalRequests(gate), state, edge.serverInfo);
  return json(rawResultMessage(ex.request.id, JSON.stringify(result)));
}

/** A legacy client's user is asked on the call's own stream, with the gate's deadline. */
export async function askApprovalLegacy(
  ex: Exchange,
  first: Answer,
  g: ApprovalGate,
  cancellation: Cancellation,
): Promise<{ outcome: Exclude<ApprovalOutcome, 'replayed'>; detail?: string }> {
  if (!canElicitForm(ex.clientCapabilities)) return { outcome: 'unsupported' };
  if (!ex.ask || !ex.canStream) {
    return {
      outcome: 'unsupported',
      detail:
        'its request accepts only JSON, so it cannot be asked: send Accept: application/json, text/event-stream',
    };
  }
  // The deadline is the gate's own; the client cancelling the call ends the question too.
  const asking = new Cancellation();
  const timer = setTimeout(() => asking.abort(g), g.timeoutMs);
  const off = cancellation.onAbort((reason) => asking.abort(reason));
  try {
    return { outcome: outcomeOf(await ex.ask(first, g.method, g.params, asking)) };
  } catch (e) {
    if (asking.reason === g) return { outcome: 'timeout' };
    if (cancellation.aborted) return { outcome: 'cancelled' };
    return {
      outcome: 'failed',
      detail: e instanceof ManifoldError ? e.publicMessage : 'the client did not answer',
    };
  } finally {
    clearTimeout(timer);
    off();
  }
}
