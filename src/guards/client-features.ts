/**
 * Which requests from an upstream to the calling client the gateway relays, as pure decisions
 * (no I/O): sampling, elicitation and roots, each opted into per server, and only to a client
 * that declared the capability (spec 2025-11-25: client/*; 2026-07-28: patterns/mrtr, "Servers
 * MUST NOT send an inputRequests that the client has not declared support for"). What is relayed
 * is bounded and stripped like all upstream text a person or a model is shown.
 */
import { ManifoldError } from '../errors.js';
import { isObject } from '../lib/json.js';
import { META } from '../protocol/versions.js';
import { clipText, stripUnsafe, utf8Bytes } from './text.js';

type Requests = Record<string, { method: string; params?: Record<string, unknown> }>;

export type ClientFeature = 'sampling' | 'elicitation' | 'roots';

export const FEATURE_OF: Readonly<Record<string, ClientFeature>> = {
  'sampling/createMessage': 'sampling',
  'elicitation/create': 'elicitation',
  'roots/list': 'roots',
};

export interface FeatureSettings {
  sampling: boolean;
  elicitation: boolean;
  roots: boolean;
}

export type FeatureVerdict =
  | { ok: true; feature: ClientFeature }
  | { ok: false; why: 'unknown' | 'off' | 'undeclared'; feature?: ClientFeature; reason: string };

/**
 * May `server` ask the calling client `method`? Only a known client request, enabled for the
 * server, and declared by the client; the refusal names the server and the setting to change.
 */
export function mayAsk(
  server: string,
  settings: FeatureSettings,
  declared: Record<string, unknown>,
  method: string,
): FeatureVerdict {
  const feature = FEATURE_OF[method];
  if (!feature) {
    return {
      ok: false,
      why: 'unknown',
      reason: `server ${server} asked the client for ${method.slice(0, 64)}, which is not a client request the gateway relays`,
    };
  }
  return (
    refusal(server, settings, declared, feature, `asked for ${feature} (${method})`) ?? { ok: true, feature }
  );
}

/** Why `server` may not reach the client's `feature`: off for the server, or not declared by the client. */
function refusal(
  server: string,
  settings: FeatureSettings,
  declared: Record<string, unknown>,
  feature: ClientFeature,
  asked: string,
): { ok: false; why: 'off' | 'undeclared'; feature: ClientFeature; reason: string } | undefined {
  if (!settings[feature]) {
    const reason = `server ${server} ${asked}, which is off for it: set mcpServers.${server}.clientFeatures.${feature} to true to relay it`;
    return { ok: false, why: 'off', feature, reason };
  }
  if (!declared[feature] || typeof declared[feature] !== 'object') {
    const reason = `server ${server} ${asked}, but this client did not declare the ${feature} capability`;
    return { ok: false, why: 'undeclared', feature, reason };
  }
  return undefined;
}

/**
 * A modern upstream refused a request for a client capability the gateway did not declare to it
 * (MissingRequiredClientCapability): says which side lacks it. Off for the server: the setting to
 * change. Not declared by the client: the capability, for the client to declare and retry.
 * Returns undefined when the capabilities named are not ones the gateway relays.
 */
export function explainMissing(
  server: string,
  settings: FeatureSettings,
  declared: Record<string, unknown>,
  required: unknown,
): { why: 'off' | 'undeclared'; feature: ClientFeature; reason: string } | undefined {
  if (typeof required !== 'object' || required === null) return undefined;
  for (const feature of ['sampling', 'elicitation', 'roots'] as const) {
    const refused =
      feature in required ? refusal(server, settings, declared, feature, `needs ${feature}`) : undefined;
    if (refused) return refused;
  }
  return undefined;
}

/** The client capabilities to declare upstream for one request: enabled AND declared by the client. */
export function relayedCapabilities(
  settings: FeatureSettings,
  declared: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const feature of ['sampling', 'elicitation', 'roots'] as const) {
    const cap = declared[feature];
    if (settings[feature] && typeof cap === 'object' && cap !== null) out[feature] = cap;
  }
  return out;
}

/** The capabilities a legacy upstream is told at initialize: what the gateway could relay for it. */
export function offeredCapabilities(settings: FeatureSettings): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (settings.elicitation) out.elicitation = { form: {}, url: {} };
  if (settings.sampling) out.sampling = {};
  if (settings.roots) out.roots = {};
  return out;
}

const MAX_MESSAGE = 4096;
const MAX_PARAMS_BYTES = 256 * 1024;

/**
 * A relayed request's params, bounded: the text a person reads (an elicitation's message) is
 * stripped and clipped; the whole must stay within a size a client can be expected to take.
 * Returns undefined when it is too large to relay at all.
 */
export function boundClientRequest(method: string, params: unknown): Record<string, unknown> | undefined {
  const p = isObject(params) ? params : {};
  let json: string;
  try {
    json = JSON.stringify(p);
  } catch {
    return undefined;
  }
  if (utf8Bytes(json) > MAX_PARAMS_BYTES) return undefined;
  if (method === 'elicitation/create' && typeof p.message === 'string') {
    return { ...p, message: clipText(stripUnsafe(p.message), MAX_MESSAGE).text };
  }
  return p;
}

/**
 * Every request of one round, checked and bounded before any reaches the client, or the error
 * that refuses the round: a capability the client could declare (MissingRequiredClientCapability,
 * naming it) or the gateway's policy (naming the setting). `relatedTask` replaces an upstream's
 * related-task marker with the task id the client knows (or drops it).
 */
export function checkInputRequests(
  server: string,
  settings: FeatureSettings,
  declared: Record<string, unknown>,
  requests: Requests,
  relatedTask?: string,
): { ok: true; requests: Requests } | { ok: false; error: ManifoldError } {
  const out: Requests = {};
  for (const [key, r] of Object.entries(requests).slice(0, 16)) {
    const method = typeof r?.method === 'string' ? r.method : '';
    const verdict = mayAsk(server, settings, declared, method);
    if (!verdict.ok) {
      return {
        ok: false,
        error:
          verdict.why === 'undeclared'
            ? new ManifoldError('ERR_MISSING_CAPABILITY', verdict.reason, {
                data: { requiredCapabilities: { [verdict.feature!]: {} } },
              })
            : new ManifoldError('ERR_CLIENT_FEATURE', verdict.reason),
      };
    }
    const bounded = boundClientRequest(method, r.params);
    if (!bounded) {
      return {
        ok: false,
        error: new ManifoldError(
          'ERR_CLIENT_FEATURE',
          `server ${server} sent a ${method} too large to relay`,
        ),
      };
    }
    out[clientKey(key.slice(0, 128))] = { method, params: withRelatedTask(bounded, relatedTask) };
  }
  return { ok: true, requests: out };
}

/** The prefix of the gateway's own input-request keys (`manifold.approval`, `manifold.login`). */
const GATEWAY_KEYS = 'manifold.';
/** What an upstream's key under the gateway's prefix becomes for the client. */
const RENAMED = 'upstream.';

/**
 * The key a client sees for an upstream's input request. An upstream never asks under the
 * gateway's own keys (SECURITY G6): a client that shows the gateway's questions specially (an
 * approval, a sign-in link) would show the upstream's text as the gateway's. Such a key is
 * renamed `upstream.<key>`, and so is any key that already starts with `upstream.`, so that no two
 * keys meet and each answer maps back to the key it answers (`upstreamResponses`).
 *
 * @example clientKey('manifold.approval') // 'upstream.manifold.approval'
 */
export function clientKey(key: string): string {
  return key.startsWith(GATEWAY_KEYS) || key.startsWith(RENAMED) ? `${RENAMED}${key}` : key;
}

/** The upstream's key for a client's answer, or undefined for a key no upstream request has here. */
function upstreamKey(key: string): string | undefined {
  if (!key.startsWith(RENAMED)) return key.startsWith(GATEWAY_KEYS) ? undefined : key;
  const original = key.slice(RENAMED.length);
  return original.startsWith(GATEWAY_KEYS) || original.startsWith(RENAMED) ? original : undefined;
}

/**
 * A client's answers under the keys its upstream asked with (the inverse of `clientKey`). An
 * answer under one of the gateway's own keys is the gateway's, never the upstream's: dropped.
 */
export function upstreamResponses<T>(answers: Record<string, T>): Record<string, T> {
  const out: [string, T][] = [];
  for (const [key, answer] of Object.entries(answers)) {
    const original = upstreamKey(key);
    if (original !== undefined) out.push([original, answer]);
  }
  // fromEntries defines own properties: a key "__proto__" stays a key.
  return Object.fromEntries(out);
}

function withRelatedTask(
  params: Record<string, unknown>,
  taskId: string | undefined,
): Record<string, unknown> {
  const meta = params._meta;
  if (typeof meta !== 'object' || meta === null || !(META.relatedTask in meta)) return params;
  const { [META.relatedTask]: _upstream, ...rest } = meta as Record<string, unknown>;
  const next = taskId === undefined ? rest : { ...rest, [META.relatedTask]: { taskId } };
  return Object.keys(next).length > 0 ? { ...params, _meta: next } : without(params, '_meta');
}

function without(o: Record<string, unknown>, key: string): Record<string, unknown> {
  const { [key]: _gone, ...rest } = o;
  return rest;
}
