/**
 * Relays `prompts/get`, `resources/read` and `completion/complete` to the upstream that owns the
 * prompt, resource or template, under the same policy as tools: resolved for the principal (what
 * it cannot see does not exist for it), rate-limited per tenant, capped, audited, and answered in
 * the client's era. Upstream names and URIs are translated both ways.
 */

import { type ResourceRoute, unknownPrompt, unknownResource } from '../../../aggregate/surface-views.js';
import { rewriteUri } from '../../../aggregate/uris.js';
import { rateLimited } from '../../../auth/shared-limit.js';
import { ManifoldError } from '../../../errors.js';
import type { GuardedTarget, GuardrailNote } from '../../../gateway/guardrails.js';
import { promptInput, resourceInput } from '../../../guards/policy/input.js';
import { type CallFacts, decideCall, type Ruling } from '../../../guards/policy/rules.js';
import { isObject } from '../../../lib/json.js';
import { resultMessage } from '../../../protocol/jsonrpc.js';
import type { Edge } from '../edge.js';
import type { Exchange } from '../exchange.js';
import type { Reply } from '../http-in.js';
import { relayRequest } from './relay.js';

type Result = Record<string, unknown>;

interface Target {
  /** prompts/get or resources/read: what rules and guardrails see (#51). */
  guarded?: { target: GuardedTarget; args: Record<string, unknown> };
  server: string;
  /** The params as the upstream must see them. */
  params: Result;
  /** What the audit line names (exposed name or URI). */
  subject: string;
  /** Dress the upstream's answer for the client (translate URIs, cap). */
  finish: (result: Result) => Result;
  /** The modern caching hint of `resources/read` (it is a cacheable result). */
  cacheable?: boolean;
}

/**
 * `params` as the upstream gets them: with the keys of the client's `_meta` that are relayed
 * (exchange.ts `meta`), never its own progress token or reserved keys.
 */
function withMeta(params: Result, ex: Exchange): Result {
  return ex.meta.relayed ? { ...params, _meta: ex.meta.relayed } : params;
}

export async function promptsGet(edge: Edge, ex: Exchange): Promise<Reply> {
  const params = ex.request.params ?? {};
  const entry = edge.gateway.views.resolvePrompt(ex.principal, params.name);
  if (entry.quarantined) {
    throw new ManifoldError(
      'ERR_INVALID_PARAMS',
      `prompt ${entry.name} changed after it was trusted; an operator must re-trust server ${entry.server}`,
    );
  }
  const args = params.arguments;
  if (args !== undefined && !isObject(args))
    throw new ManifoldError('ERR_INVALID_PARAMS', 'arguments must be an object');
  const { policy } = edge.gateway;
  if (!policy.empty) {
    const chain = policy.chain(entry.server, ex.principal.profile, 'prompt');
    const ruling = policy.ruling(chain, promptInput(entry, ex.principal, ex.principal.profile));
    denyByRule(edge, ex, entry.server, entry.name, ruling, { args: args ?? {}, era: ex.era }, () =>
      unknownPrompt(entry.name),
    );
  }
  return relay(edge, ex, {
    guarded: { target: guardedTarget(ex, 'prompts/get', entry.server, entry.name), args: args ?? {} },
    server: entry.server,
    subject: entry.name,
    params: withMeta({ name: entry.original, ...(args ? { arguments: args } : {}) }, ex),
    finish: (r) => edge.gateway.guards.capSurface(entry.server, 'prompt', entry.name, r),
  });
}

/** The URI a client should see for an upstream's own URI, on this route. */
function exposedUri(route: ResourceRoute, upstreamUri: string): string {
  if (route.resource && upstreamUri === route.resource.original) return route.resource.uri;
  if (route.template?.rewrittenFor) return rewriteUri(upstreamUri, route.template.rewrittenFor);
  return upstreamUri;
}

export async function resourcesRead(edge: Edge, ex: Exchange): Promise<Reply> {
  const params = ex.request.params ?? {};
  const route = edge.gateway.views.resolveResource(ex.principal, params.uri);
  if (route.template?.quarantined) {
    throw new ManifoldError(
      'ERR_INVALID_PARAMS',
      `this resource template changed after it was trusted; an operator must re-trust server ${route.server}`,
    );
  }
  const { policy } = edge.gateway;
  // Rules see the URI as the client named it, in normal form (the one the filters read, J4).
  const uri = route.resource?.uri ?? String(params.uri);
  if (!policy.empty) {
    const chain = policy.chain(route.server, ex.principal.profile, 'resource');
    const input = resourceInput({ uri, server: route.server }, ex.principal, ex.principal.profile);
    denyByRule(edge, ex, route.server, uri, policy.ruling(chain, input), { args: {}, era: ex.era }, () =>
      unknownResource(params.uri),
    );
  }
  return relay(edge, ex, {
    guarded: { target: guardedTarget(ex, 'resources/read', route.server, uri), args: { uri } },
    server: route.server,
    subject: String(params.uri),
    params: withMeta({ uri: route.uri }, ex),
    cacheable: true,
    finish: (r) => {
      const contents = Array.isArray(r.contents)
        ? r.contents.map((c) =>
            isObject(c) && typeof c.uri === 'string' ? { ...c, uri: exposedUri(route, c.uri) } : c,
          )
        : [];
      return edge.gateway.guards.capSurface(route.server, 'contents', String(params.uri), { ...r, contents });
    },
  });
}

export async function completionComplete(edge: Edge, ex: Exchange): Promise<Reply> {
  const params = ex.request.params ?? {};
  const ref = isObject(params.ref) ? params.ref : {};
  const views = edge.gateway.views;
  let server: string;
  let upstreamRef: Result;
  if (ref.type === 'ref/prompt') {
    const entry = views.resolvePrompt(ex.principal, ref.name);
    server = entry.server;
    upstreamRef = { ...ref, name: entry.original };
  } else if (ref.type === 'ref/resource') {
    // A completion names a template; a literal URI is routed like a read.
    let route: { server: string; uri: string };
    try {
      const t = views.resolveTemplate(ex.principal, ref.uri);
      route = { server: t.server, uri: t.original };
    } catch {
      route = views.resolveResource(ex.principal, ref.uri);
    }
    server = route.server;
    upstreamRef = { ...ref, uri: route.uri };
  } else {
    throw new ManifoldError(
      'ERR_INVALID_PARAMS',
      'ref must be {"type": "ref/prompt", "name"} or {"type": "ref/resource", "uri"}',
    );
  }
  const { ref: _r, _meta: _m, ...rest } = params;
  return relay(edge, ex, {
    server,
    subject: String(ref.name ?? ref.uri ?? ''),
    params: withMeta({ ...rest, ref: upstreamRef }, ex),
    finish: boundCompletion,
  });
}

/** At most 100 values (schema: CompleteResult), each a bounded string. */
function boundCompletion(r: Result): Result {
  const completion = isObject(r.completion) ? r.completion : {};
  const values = Array.isArray(completion.values)
    ? completion.values
        .filter((v): v is string => typeof v === 'string')
        .slice(0, 100)
        .map((v) => v.slice(0, 1024))
    : [];
  const out: Result = { values };
  if (typeof completion.total === 'number') out.total = completion.total;
  if (typeof completion.hasMore === 'boolean') out.hasMore = completion.hasMore;
  return { ...r, completion: out };
}

/**
 * The audit line and the tenant's rate limit for one relayed request (prompts, resources,
 * completion, tasks): returns the function that writes the audit line when it ends; a request
 * over the limit is audited as denied and refused here.
 */
export async function admitRequest(
  edge: Edge,
  ex: Exchange,
  method: string,
  target: string,
  server: string,
): Promise<RequestAudit> {
  const { gateway } = edge;
  const { principal } = ex;
  const started = gateway.platform.now();
  const audit = (
    verdict: string,
    bytesOut: number,
    reason?: string,
    inputRequired?: boolean,
    policy?: Record<string, unknown>,
  ) => {
    const durationMs = gateway.platform.now() - started;
    const shown = target.slice(0, 256);
    ex.trace?.verdict(verdict, server, reason);
    gateway.log.info('audit.request', {
      method,
      tenant: principal.tenant,
      subject: principal.subject,
      target: shown,
      server,
      verdict,
      durationMs,
      bytesIn: ex.bytesIn,
      bytesOut,
      ...(inputRequired ? { resultType: 'input_required' } : {}),
      ...policy,
    });
    const { observers } = gateway;
    observers.report(method, principal, server, shown, verdict, durationMs, ex.bytesIn, bytesOut, reason);
  };
  const limit = await gateway.takeCall(principal.tenant);
  if (limit.ok) return audit;
  audit('denied', 0, 'ERR_RATE_LIMITED');
  throw rateLimited(limit.retryAfterSeconds);
}

/**
 * Writes a request's audit line when it ends (admitRequest), or when one of its rounds ends
 * asking the client for input (`inputRequired`: the request goes on in a later round).
 */
export type RequestAudit = (
  verdict: string,
  bytesOut: number,
  reason?: string,
  inputRequired?: boolean,
  /** What policy rules and guardrails decided (#51): types, never values. */
  policy?: Record<string, unknown>,
) => void;

async function relay(edge: Edge, ex: Exchange, target: Target): Promise<Reply> {
  const { gateway } = edge;
  const { request } = ex;
  const notes: GuardrailNote[] = [];
  const admitted = await admitRequest(edge, ex, request.method, target.subject, target.server);
  const audit: RequestAudit = (verdict, bytesOut, reason, inputRequired) =>
    admitted(verdict, bytesOut, reason, inputRequired, notes.length > 0 ? { guardrails: notes } : undefined);
  const guarded = target.guarded;
  let params = target.params;
  if (guarded && gateway.guardrails.applies(guarded.target, 'request')) {
    const out = await gateway.guardrails.request(guarded.target, guarded.args);
    notes.push(...out.notes);
    if (out.blocked) {
      // A prompt or a resource has no isError result: the refusal is the request's error.
      audit('denied', 0, 'guardrail');
      throw new ManifoldError('ERR_INVALID_PARAMS', out.message);
    }
    // A prompt's arguments as a guardrail left them (a resource's URI is never rewritten).
    if (out.modified && request.method === 'prompts/get') params = { ...params, arguments: out.args };
  }
  const respond = guarded && gateway.guardrails.applies(guarded.target, 'response');
  const upstream = await gateway.callee(target.server, ex.principal);
  return relayRequest(edge, ex, {
    upstream,
    method: request.method,
    params,
    target: target.subject,
    progressToken: ex.meta.progressToken,
    onResult: async (raw, id) => {
      let result = raw;
      if (respond) {
        const out = await gateway.guardrails.response(guarded.target, raw);
        notes.push(...out.notes);
        if (out.withheld) throw new ManifoldError('ERR_INVALID_PARAMS', out.withheld);
        result = out.result;
      }
      const dressed = ex.dress(target.finish(result));
      if (target.cacheable && ex.era === 'modern') {
        // resources/read is cacheable (2026-07-28: caching): the upstream's hint, private
        // whenever the answer depends on who asks.
        dressed.ttlMs = typeof result.ttlMs === 'number' && result.ttlMs >= 0 ? result.ttlMs : 0;
        dressed.cacheScope =
          edge.listCache.cacheScope === 'private' || result.cacheScope !== 'public' ? 'private' : 'public';
      } else {
        delete dressed.ttlMs;
        delete dressed.cacheScope;
      }
      return resultMessage(id, dressed);
    },
    audit: (verdict, bytesOut, inputRequired) => audit(verdict, bytesOut, undefined, inputRequired),
  });
}

function guardedTarget(
  ex: Exchange,
  method: 'prompts/get' | 'resources/read',
  server: string,
  name: string,
): GuardedTarget {
  return { method, server, profile: ex.principal.profile, name, principal: ex.principal };
}

/**
 * The policy rules of a prompts/get or resources/read (#51), all of them in order against the
 * request itself. A deny (and an `ask`, which only a tools/call can put to a person) fails
 * exactly like a prompt or resource the caller cannot see: audited with the rule, then thrown.
 */
function denyByRule(
  edge: Edge,
  ex: Exchange,
  server: string,
  target: string,
  ruling: Ruling,
  call: CallFacts,
  unknown: () => ManifoldError,
): void {
  const decision = ruling.hidden
    ? { rule: ruling.hidden.rule, effect: 'deny' as const, error: ruling.hidden.error }
    : decideCall(ruling, call);
  if (!decision || decision.effect === 'allow') return;
  const { gateway } = edge;
  const { rule } = decision;
  gateway.policyMetrics.rule(rule.id, decision.effect, rule.reason);
  const method = ex.request.method;
  const reason = `rule ${rule.id}: ${rule.reason}`;
  gateway.log.info('audit.request', {
    method,
    tenant: ex.principal.tenant,
    subject: ex.principal.subject,
    target: target.slice(0, 256),
    server,
    verdict: 'denied',
    rule: rule.id,
    ruleEffect: decision.effect,
    ruleReason: rule.reason,
    ...(decision.error ? { ruleError: decision.error.slice(0, 200) } : {}),
  });
  gateway.observers.report(
    method,
    ex.principal,
    server,
    target.slice(0, 256),
    'denied',
    0,
    ex.bytesIn,
    0,
    reason,
  );
  throw unknown();
}
