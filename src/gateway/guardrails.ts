/**
 * Guardrails (#51): the ordered checks a request and its answer pass through. The detectors are
 * pure (src/guards/policy: secrets, pii, spotlight) and compiled once per config; the webhook is
 * I/O, made here through the platform's egress-guarded fetch, with its deadline. The chain
 * (server/mcp/relay) calls `request` after the rules and before approval, and `response` after
 * the upstream answered and before the output schema and the size cap.
 *
 * A webhook that does not answer within its `timeoutMs`, answers with an error status, or answers
 * anything but one of the three decisions has failed: `failure: "closed"` (the default) denies,
 * `"open"` allows, and either way the audit line says so (SECURITY I2). Findings are named by type,
 * never by value (I3).
 */
import type { CatalogEntry } from '../aggregate/catalog.js';
import type { Config } from '../config/types.js';
import { piiDetector } from '../guards/policy/pii.js';
import { type Detector, type Found, scanValue } from '../guards/policy/scan.js';
import { secretDetector } from '../guards/policy/secrets.js';
import { detectInstructions, spotlightNonce, spotlightWrap } from '../guards/policy/spotlight.js';
import {
  type GuardrailConfig,
  type GuardrailMethod,
  type GuardrailPhase,
  PII_TYPES,
  type WebhookGuardrail,
} from '../guards/policy/types.js';
import { RESULT_CAP_SLACK } from '../guards/result-cap.js';
import { isObject } from '../lib/json.js';
import type { PolicyMetrics } from '../observe/policy-metrics.js';
import type { Platform } from '../platform.js';
import type { CallGuards } from './call-guards.js';

type Result = Record<string, unknown>;

/** What one guardrail did, for the audit line: types and counts, never values. */
export interface GuardrailNote {
  guardrail: GuardrailConfig['type'];
  phase: GuardrailPhase;
  /** block, redact, flag; a webhook's allow, deny or modify; `failed` for a webhook that failed. */
  action: string;
  mode: 'enforce' | 'audit';
  found?: Record<string, number>;
  /** A webhook's failure (timeout, status, garbage) and whether it then allowed (`open`). */
  failure?: string;
  failedOpen?: boolean;
  /** A webhook's reason for a deny (the operator's service, for the audit line). */
  reason?: string;
}

/** What the request or response is, as guardrails and the webhook see it. */
export interface GuardedTarget {
  method: GuardrailMethod;
  server: string;
  profile?: string | undefined;
  /** The exposed name (tool or prompt) or the URI, as the client named it. */
  name: string;
  principal: { subject: string; tenant: string };
}

export type RequestOutcome =
  | { blocked: false; args: Record<string, unknown>; modified: boolean; notes: GuardrailNote[] }
  | { blocked: true; message: string; notes: GuardrailNote[] };

export interface ResponseOutcome {
  result: Result;
  /** Something was removed or replaced (the output schema is checked again). */
  modified: boolean;
  /** A guardrail withheld the whole result: this is the isError text. */
  withheld?: string;
  /** What was redacted, by type, for a withheld-because-invalid message. */
  redacted: Found;
  notes: GuardrailNote[];
}

interface Compiled {
  config: GuardrailConfig;
  detect?: Detector;
}

const WEBHOOK_MAX_BYTES = 1_000_000;

export class Guardrails {
  /** No guardrail anywhere: the chain skips them. */
  readonly empty: boolean;
  private readonly gateway: Compiled[];
  private readonly servers = new Map<string, Compiled[]>();
  private readonly profiles = new Map<string, Compiled[]>();
  private readonly chains = new Map<string, readonly Compiled[]>();
  /** Each server's result cap (characters of a string scanned on a response, at most). */
  private readonly caps = new Map<string, number>();

  constructor(
    config: Config,
    private readonly platform: Platform,
    private readonly metrics?: PolicyMetrics,
  ) {
    let secrets: Detector | undefined;
    const compile = (g: GuardrailConfig): Compiled => {
      if (g.type === 'secrets') {
        // One matcher for every secrets guardrail of the config: compiling it is the cost.
        secrets ??= secretDetector();
        return { config: g, detect: secrets };
      }
      if (g.type === 'pii') return { config: g, detect: piiDetector(g.types ?? PII_TYPES) };
      if (g.type === 'spotlight') return { config: g, detect: detectInstructions };
      return { config: g };
    };
    this.gateway = (config.gateway.guardrails ?? []).map(compile);
    // A capped result keeps at most its cap (and the markers' slack) of UTF-8 bytes, so never
    // more characters of one string than that.
    for (const s of config.servers) this.caps.set(s.name, s.maxResultBytes + RESULT_CAP_SLACK);
    for (const s of config.servers)
      if (s.guardrails?.length) this.servers.set(s.name, s.guardrails.map(compile));
    for (const p of config.profiles)
      if (p.guardrails?.length) this.profiles.set(p.name, p.guardrails.map(compile));
    this.empty = this.gateway.length === 0 && this.servers.size === 0 && this.profiles.size === 0;
  }

  /** The guardrails for one target and phase: the gateway's, the profile's, the server's. */
  private chain(t: GuardedTarget, phase: GuardrailPhase): readonly Compiled[] {
    const key = `${t.server}\0${t.profile ?? ''}\0${t.method}\0${phase}`;
    let chain = this.chains.get(key);
    if (!chain) {
      chain = [
        ...this.gateway,
        ...(t.profile === undefined ? [] : (this.profiles.get(t.profile) ?? [])),
        ...(this.servers.get(t.server) ?? []),
      ].filter((c) => c.config.on.includes(phase) && c.config.methods.includes(t.method));
      this.chains.set(key, chain);
    }
    return chain;
  }

  /** Whether anything runs for this target on this phase (the chain skips the work otherwise). */
  applies(t: GuardedTarget, phase: GuardrailPhase): boolean {
    return !this.empty && this.chain(t, phase).length > 0;
  }

  /** The request phase over the arguments (a prompt's arguments; a resource read's `{uri}`). */
  async request(t: GuardedTarget, args: Record<string, unknown>): Promise<RequestOutcome> {
    const notes: GuardrailNote[] = [];
    let current = args;
    let modified = false;
    for (const c of this.chain(t, 'request')) {
      const g = c.config;
      const enforce = g.mode === 'enforce';
      if (g.type === 'webhook') {
        const answer = await this.webhook(g, t, 'request', current);
        const note = this.noteWebhook(g, 'request', answer);
        notes.push(note);
        if (answer.kind === 'deny' || (answer.kind === 'failed' && g.failure === 'closed')) {
          if (enforce) return { blocked: true, message: refusedBy('webhook', answer), notes };
        } else if (answer.kind === 'modify' && enforce) {
          current = answer.value;
          modified = true;
        }
        continue;
      }
      if (!c.detect) continue;
      const redact = enforce && g.type !== 'spotlight' && g.action === 'redact';
      const scanned = scanValue(current, c.detect, redact ? marker(g.type) : undefined);
      if (scanned.found.size === 0) continue;
      notes.push(this.note(g, 'request', g.action, scanned.found));
      if (!enforce) continue;
      if (g.action === 'block') {
        return {
          blocked: true,
          message: `The gateway's ${g.type} guardrail refused this call: its arguments carry ${describe(scanned.found)}. Remove them and call again.`,
          notes,
        };
      }
      if (redact && scanned.value !== current) {
        current = scanned.value as Record<string, unknown>;
        modified = true;
      }
    }
    return { blocked: false, args: current, modified, notes };
  }

  /** The response phase over an upstream's result, before the output schema and the cap. */
  async response(t: GuardedTarget, result: Result): Promise<ResponseOutcome> {
    const notes: GuardrailNote[] = [];
    const redacted: Found = new Map();
    let current = result;
    let modified = false;
    for (const c of this.chain(t, 'response')) {
      const g = c.config;
      const enforce = g.mode === 'enforce';
      if (g.type === 'webhook') {
        const answer = await this.webhook(g, t, 'response', current);
        notes.push(this.noteWebhook(g, 'response', answer));
        if (answer.kind === 'deny' || (answer.kind === 'failed' && g.failure === 'closed')) {
          if (enforce)
            return {
              result: current,
              modified,
              redacted,
              notes,
              withheld: refusedBy('webhook', answer, true),
            };
        } else if (answer.kind === 'modify' && enforce) {
          current = answer.value;
          modified = true;
        }
        continue;
      }
      if (g.type === 'spotlight') {
        const out = spotlight(current, c.detect!, enforce && g.action === 'block');
        if (out.found.size > 0) notes.push(this.note(g, 'response', g.action, out.found));
        if (enforce) {
          current = out.result;
          modified = true;
        }
        continue;
      }
      const redact = enforce && g.action === 'redact';
      const limit = this.caps.get(t.server);
      const scanned = scanValue(current, c.detect!, redact ? marker(g.type) : undefined, limit);
      if (scanned.found.size === 0) continue;
      notes.push(this.note(g, 'response', g.action, scanned.found));
      if (!enforce) continue;
      if (g.action === 'block') {
        return {
          result: current,
          modified,
          redacted,
          notes,
          withheld: `The answer was withheld by the gateway's ${g.type} guardrail: it carried ${describe(scanned.found)}.`,
        };
      }
      if (redact) {
        for (const [type, n] of scanned.found) redacted.set(type, (redacted.get(type) ?? 0) + n);
        current = scanned.value as Result;
        modified = true;
      }
    }
    return { result: current, modified, redacted, notes };
  }

  private note(g: GuardrailConfig, phase: GuardrailPhase, action: string, found: Found): GuardrailNote {
    this.metrics?.guardrail({ guardrail: g.type, phase, action, mode: g.mode }, [...found.keys()]);
    return { guardrail: g.type, phase, action, mode: g.mode, found: Object.fromEntries(found) };
  }

  private noteWebhook(g: WebhookGuardrail, phase: GuardrailPhase, answer: WebhookAnswer): GuardrailNote {
    const action = answer.kind === 'failed' ? 'failed' : answer.kind;
    this.metrics?.guardrail({ guardrail: 'webhook', phase, action, mode: g.mode }, []);
    const note: GuardrailNote = { guardrail: 'webhook', phase, action, mode: g.mode };
    if (answer.kind === 'failed') {
      note.failure = answer.failure;
      note.failedOpen = g.failure === 'open';
    }
    if (answer.kind === 'deny' && answer.reason) note.reason = answer.reason;
    return note;
  }

  /**
   * One POST to the operator's service, within `timeoutMs`, through the egress-guarded fetch.
   * The answer is read strictly: anything but the three decisions is a failure.
   */
  private async webhook(
    g: WebhookGuardrail,
    t: GuardedTarget,
    phase: GuardrailPhase,
    payload: Result,
  ): Promise<WebhookAnswer> {
    const body = {
      phase,
      method: t.method,
      ...(t.method === 'tools/call'
        ? { tool: { name: t.name, server: t.server } }
        : t.method === 'prompts/get'
          ? { prompt: { name: t.name, server: t.server } }
          : { resource: { uri: t.name, server: t.server } }),
      ...(phase === 'request' ? { arguments: payload } : { result: payload }),
      principal: { subject: t.principal.subject, tenant: t.principal.tenant },
    };
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), g.timeoutMs);
    try {
      const res = await this.platform.fetch(g.url, {
        method: 'POST',
        headers: { ...g.headers, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        signal: controller.signal,
        redirect: 'manual',
      });
      if (res.status < 200 || res.status > 299) {
        await res.body?.cancel().catch(() => {});
        return { kind: 'failed', failure: `status ${res.status}` };
      }
      const text = await res.text();
      if (text.length > WEBHOOK_MAX_BYTES) return { kind: 'failed', failure: 'answer too large' };
      return readAnswer(text, phase);
    } catch {
      return { kind: 'failed', failure: controller.signal.aborted ? 'timeout' : 'unreachable' };
    } finally {
      clearTimeout(timer);
    }
  }
}

type WebhookAnswer =
  | { kind: 'allow' }
  | { kind: 'deny'; reason?: string }
  | { kind: 'modify'; value: Result }
  | { kind: 'failed'; failure: string };

/** A webhook's answer, read with the standard parser and checked field by field. */
function readAnswer(text: string, phase: GuardrailPhase): WebhookAnswer {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { kind: 'failed', failure: 'not JSON' };
  }
  if (!isObject(parsed)) return { kind: 'failed', failure: 'not a decision' };
  const { decision } = parsed;
  if (decision === 'allow') return { kind: 'allow' };
  if (decision === 'deny') {
    const reason = typeof parsed.reason === 'string' ? parsed.reason.slice(0, 500) : undefined;
    return reason ? { kind: 'deny', reason } : { kind: 'deny' };
  }
  if (decision === 'modify') {
    const value = phase === 'request' ? parsed.arguments : parsed.result;
    if (isObject(value)) return { kind: 'modify', value };
    return { kind: 'failed', failure: `modify without ${phase === 'request' ? 'arguments' : 'result'}` };
  }
  return { kind: 'failed', failure: 'not a decision' };
}

/** The text of a webhook's refusal; its reason stays in the audit line. */
function refusedBy(_g: 'webhook', answer: WebhookAnswer, response = false): string {
  const what = response ? 'The answer was withheld' : 'This call was refused';
  return answer.kind === 'failed'
    ? `${what}: the gateway's policy service could not decide it (it fails closed).`
    : `${what} by the gateway's policy service.`;
}

const marker = (detector: string) => (type: string) =>
  `[redacted ${detector === 'pii' ? type : `secret:${type}`}]`;

/** `2 secrets (aws-access-token, github-pat)`: counts and types, never values. */
export function describe(found: Found): string {
  const total = [...found.values()].reduce((a, b) => a + b, 0);
  return `${total} finding${total === 1 ? '' : 's'} (${[...found.keys()].join(', ')})`;
}

/**
 * Wraps each text of a result in marked delimiters with this response's nonce, and flags (or,
 * with `block`, withholds) text that reads like an instruction: tool content, prompt messages,
 * resource contents. The nonce is also in `_meta`, so a client can check the delimiters.
 */
function spotlight(result: Result, detect: Detector, block: boolean): { result: Result; found: Found } {
  const nonce = spotlightNonce();
  const found: Found = new Map();
  const text = (s: string): string => {
    const hits = detect(s);
    for (const h of hits) found.set(h.type, (found.get(h.type) ?? 0) + 1);
    if (hits.length > 0 && block) return spotlightWrap('[withheld: instruction-like text]', nonce);
    return spotlightWrap(s, nonce);
  };
  const item = (c: unknown): unknown => {
    if (!isObject(c)) return c;
    if (c.type === 'text' && typeof c.text === 'string') return { ...c, text: text(c.text) };
    if (c.type === 'resource' && isObject(c.resource) && typeof c.resource.text === 'string')
      return { ...c, resource: { ...c.resource, text: text(c.resource.text) } };
    return c;
  };
  const out: Result = { ...result };
  if (Array.isArray(result.content)) out.content = result.content.map(item);
  if (Array.isArray(result.messages))
    out.messages = result.messages.map((m) => (isObject(m) ? { ...m, content: item(m.content) } : m));
  if (Array.isArray(result.contents))
    out.contents = result.contents.map((c) =>
      isObject(c) && typeof c.text === 'string' ? { ...c, text: text(c.text) } : c,
    );
  const meta = isObject(result._meta) ? result._meta : {};
  out._meta = {
    ...meta,
    'manifold/spotlight': { nonce, ...(found.size > 0 ? { flagged: Object.fromEntries(found) } : {}) },
  };
  return { result: out, found };
}

/**
 * The response guardrails over a tool's result (#51), for a call and for a task's result alike. A
 * redaction that leaves structured content its output schema rejects, and a withheld answer,
 * become an isError result that says what was withheld (by type, never by value). `note` takes
 * the audit fields.
 */
export async function guardToolResult(
  gateway: { guardrails: Guardrails; guards: Pick<CallGuards, 'outputValid'> },
  entry: CatalogEntry,
  principal: { subject: string; tenant: string; profile?: string | undefined },
  result: Result,
  note?: (fields: Record<string, unknown>) => void,
): Promise<Result> {
  const target: GuardedTarget = {
    method: 'tools/call',
    server: entry.server,
    profile: principal.profile,
    name: entry.name,
    principal,
  };
  if (!gateway.guardrails.applies(target, 'response')) return result;
  const out = await gateway.guardrails.response(target, result);
  if (out.notes.length > 0) note?.({ guardrails: out.notes });
  if (out.withheld) return { content: [{ type: 'text', text: out.withheld }], isError: true };
  if (!out.modified) return result;
  if (
    entry.full.outputSchema !== undefined &&
    out.result.isError !== true &&
    out.result.structuredContent !== result.structuredContent &&
    !gateway.guards.outputValid(entry, out.result.structuredContent)
  ) {
    return {
      content: [
        {
          type: 'text',
          text: `The answer of tool ${entry.name} carried ${describe(out.redacted)}, which the gateway withheld; without them its structured content no longer matches the tool's output schema, so it is not relayed.`,
        },
      ],
      isError: true,
    };
  }
  return out.result;
}
