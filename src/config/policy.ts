/**
 * Reads `policy` and `guardrails` (#51) wherever they may be written: under `gateway`, under a
 * server, under a profile. Every rule's expression is compiled here, so a syntax error, an unknown
 * variable or field, or a type error is reported with its JSON path and its position in the
 * expression, together with every other problem of the config, before anything starts.
 */
import { compileExpression } from '../guards/policy/cel.js';
import {
  GUARDRAIL_ACTIONS,
  GUARDRAIL_METHODS,
  GUARDRAIL_TYPES,
  type GuardrailConfig,
  type GuardrailMethod,
  type GuardrailPhase,
  PII_TYPES,
  type PiiType,
  type PolicyConfig,
  type PolicyRuleConfig,
  RULE_EFFECTS,
  type RuleEffect,
} from '../guards/policy/types.js';
import { isObject } from '../lib/json.js';
import { error, type Findings } from './findings.js';
import { describeKind } from './issues.js';
import { keysOf } from './json-parse.js';
import { formatPath, type PathSegment } from './paths.js';
import { unknownKeyWarning } from './unknown-keys.js';

/** The keys policy adds to `gateway`, a server and a profile. */
export const POLICY_KEYS = ['policy', 'guardrails'] as const;

export const RULE_KEYS = ['when', 'effect', 'reason'];
export const GUARDRAIL_KEYS = [
  'type',
  'on',
  'methods',
  'action',
  'mode',
  'types',
  'url',
  'timeoutMs',
  'failure',
  'headers',
];
/** A webhook's deadline, at most: a call waits for it. */
const MAX_WEBHOOK_TIMEOUT_MS = 60_000;
const RULE_FIX =
  'write a rule as {"when": "tool.server == \'github\' && !args.repo.startsWith(\'acme/\')", "effect": "deny", "reason": "only acme repositories"}';

/** `policy`: `{"rules": [...]}`; undefined when absent or wrong (each problem recorded). */
export function readPolicy(
  f: Findings,
  raw: unknown,
  base: readonly PathSegment[],
): PolicyConfig | undefined {
  if (raw === undefined) return undefined;
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object with "rules", got ${describeKind(raw)}`,
      `write policy as {"rules": [...]}; ${RULE_FIX}`,
    );
    return undefined;
  }
  for (const key of keysOf(raw))
    if (key !== 'rules') f.warnings.push(unknownKeyWarning([...base, key], ['rules']));
  const list = raw.rules;
  if (list === undefined) return { rules: [] };
  if (!Array.isArray(list)) {
    error(f, [...base, 'rules'], `expected an array of rules, got ${describeKind(list)}`, RULE_FIX);
    return undefined;
  }
  const before = f.errors.length;
  const rules = list.map((r, i) => readRule(f, r, [...base, 'rules', i]));
  return f.errors.length > before ? undefined : { rules: rules as PolicyRuleConfig[] };
}

function readRule(f: Findings, raw: unknown, path: PathSegment[]): PolicyRuleConfig | undefined {
  if (!isObject(raw)) {
    error(f, path, `expected a rule object, got ${describeKind(raw)}`, RULE_FIX);
    return undefined;
  }
  for (const key of keysOf(raw))
    if (!RULE_KEYS.includes(key)) f.warnings.push(unknownKeyWarning([...path, key], RULE_KEYS));
  const { when, effect, reason } = raw;
  let ok = true;
  if (typeof when !== 'string' || when.trim() === '') {
    error(
      f,
      [...path, 'when'],
      `expected a CEL expression (a non-empty string), got ${describeKind(when)}`,
      RULE_FIX,
    );
    ok = false;
  } else {
    const compiled = compileExpression(when);
    if (compiled.ok && compiled.expr.reads.targets.size > 1) {
      ok = false;
      error(
        f,
        [...path, 'when'],
        `reads ${[...compiled.expr.reads.targets].join(' and ')}: a rule is about tools, prompts or resources, never two at once`,
        'split it into one rule per kind',
      );
    }
    if (!compiled.ok) {
      ok = false;
      for (const p of compiled.problems) {
        const at = p.line === undefined ? '' : ` (at line ${p.line}, column ${p.column})`;
        error(
          f,
          [...path, 'when'],
          `${p.message}${at}`,
          'a rule sees tool (name, server, upstreamName, risk, annotations), args, principal (subject, tenant, scopes, claims), request (method, era, profile), prompt and resource (uri); it must give true or false',
        );
      }
    }
  }
  if (!RULE_EFFECTS.includes(effect as RuleEffect)) {
    error(
      f,
      [...path, 'effect'],
      `expected "allow", "deny" or "ask", got ${describeKind(effect)}`,
      'write "effect": "deny"',
    );
    ok = false;
  }
  if (reason !== undefined && (typeof reason !== 'string' || reason.length > 500)) {
    error(
      f,
      [...path, 'reason'],
      'expected a string of at most 500 characters',
      'write "reason": "only acme repositories"',
    );
    ok = false;
  }
  if (!ok) return undefined;
  return {
    when: when as string,
    effect: effect as RuleEffect,
    reason: typeof reason === 'string' && reason !== '' ? reason : formatPath(path),
  };
}

/** `guardrails`: an ordered array of checks; undefined when absent or wrong (each problem recorded). */
export function readGuardrails(
  f: Findings,
  raw: unknown,
  base: readonly PathSegment[],
): GuardrailConfig[] | undefined {
  if (raw === undefined) return undefined;
  if (!Array.isArray(raw)) {
    error(
      f,
      base,
      `expected an array of guardrails, got ${describeKind(raw)}`,
      'write guardrails as [{"type": "secrets"}, {"type": "pii", "action": "redact"}]',
    );
    return undefined;
  }
  const before = f.errors.length;
  const out = raw.map((g, i) => readGuardrail(f, g, [...base, i]));
  return f.errors.length > before ? undefined : (out as GuardrailConfig[]);
}

function readGuardrail(f: Findings, raw: unknown, path: PathSegment[]): GuardrailConfig | undefined {
  if (!isObject(raw)) {
    error(
      f,
      path,
      `expected a guardrail object, got ${describeKind(raw)}`,
      'write {"type": "secrets", "action": "block"}',
    );
    return undefined;
  }
  for (const key of keysOf(raw))
    if (!GUARDRAIL_KEYS.includes(key)) f.warnings.push(unknownKeyWarning([...path, key], GUARDRAIL_KEYS));
  const type = raw.type;
  if (!(GUARDRAIL_TYPES as readonly unknown[]).includes(type)) {
    error(
      f,
      [...path, 'type'],
      `expected one of ${GUARDRAIL_TYPES.map((t) => `"${t}"`).join(', ')}, got ${describeKind(type)}`,
      'write "type": "secrets"',
    );
    return undefined;
  }
  const before = f.errors.length;
  const on = readPhases(f, raw.on, [...path, 'on'], type === 'spotlight');
  const methods = readMethods(f, raw.methods, [...path, 'methods']);
  const mode = raw.mode ?? 'enforce';
  if (mode !== 'enforce' && mode !== 'audit') {
    error(
      f,
      [...path, 'mode'],
      `expected "enforce" or "audit", got ${describeKind(mode)}`,
      'write "mode": "audit" to only record what it would do',
    );
  }
  const common = { on, methods, mode: mode as 'enforce' | 'audit' };
  if (type === 'webhook') {
    const url = raw.url;
    let parsed: URL | undefined;
    try {
      parsed =
        typeof url === 'string'
          ? new URL(f.interpolator.string(url, formatPath([...path, 'url'])))
          : undefined;
    } catch {
      parsed = undefined;
    }
    if (
      !parsed ||
      (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') ||
      parsed.username ||
      parsed.password
    ) {
      error(
        f,
        [...path, 'url'],
        'expected an http(s) URL without credentials',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
        'write "url": "https://policy.example.com/check" (put a token in headers, as ${VAR})',
      );
    }
    const timeoutMs = raw.timeoutMs ?? 2000;
    if (
      typeof timeoutMs !== 'number' ||
      !Number.isInteger(timeoutMs) ||
      timeoutMs < 1 ||
      timeoutMs > MAX_WEBHOOK_TIMEOUT_MS
    ) {
      error(
        f,
        [...path, 'timeoutMs'],
        `expected an integer from 1 to ${MAX_WEBHOOK_TIMEOUT_MS} (milliseconds)`,
        'write "timeoutMs": 2000',
      );
    }
    const failure = raw.failure ?? 'closed';
    if (failure !== 'closed' && failure !== 'open') {
      error(
        f,
        [...path, 'failure'],
        `expected "closed" or "open", got ${describeKind(failure)}`,
        'write "failure": "closed" (a failure denies, the default) or "open"',
      );
    }
    const headers = readHeaders(f, raw.headers, [...path, 'headers']);
    if (f.errors.length > before || !parsed || !headers) return undefined;
    return {
      type,
      ...common,
      url: parsed.href,
      timeoutMs: timeoutMs as number,
      failure: failure as 'closed' | 'open',
      headers,
    };
  }
  const fallback = type === 'secrets' ? 'block' : type === 'pii' ? 'redact' : 'flag';
  const action = raw.action ?? fallback;
  const allowed = type === 'spotlight' ? ['flag', 'block'] : GUARDRAIL_ACTIONS;
  if (!allowed.includes(action as never)) {
    error(
      f,
      [...path, 'action'],
      `expected ${allowed.map((a) => `"${a}"`).join(', ')}, got ${describeKind(action)}`,
      `write "action": "${fallback}"`,
    );
  }
  let types: PiiType[] | undefined;
  if (raw.types !== undefined) {
    if (type !== 'pii') error(f, [...path, 'types'], 'only a "pii" guardrail has types', 'remove types');
    else if (
      !Array.isArray(raw.types) ||
      raw.types.length === 0 ||
      raw.types.some((t) => !(PII_TYPES as readonly unknown[]).includes(t))
    ) {
      error(
        f,
        [...path, 'types'],
        `expected a non-empty array of ${PII_TYPES.map((t) => `"${t}"`).join(', ')}`,
        'write "types": ["email", "card"]',
      );
    } else types = [...new Set(raw.types as PiiType[])];
  }
  if (f.errors.length > before) return undefined;
  if (type === 'spotlight') return { type, ...common, action: action as 'flag' | 'block' };
  return {
    type: type as 'secrets' | 'pii',
    ...common,
    action: action as 'block' | 'redact' | 'flag',
    ...(types ? { types } : {}),
  };
}

function readPhases(f: Findings, raw: unknown, path: PathSegment[], responseOnly: boolean): GuardrailPhase[] {
  if (raw === undefined) return responseOnly ? ['response'] : ['request', 'response'];
  const list = raw === 'both' ? ['request', 'response'] : Array.isArray(raw) ? raw : [raw];
  if (list.length === 0 || list.some((p) => p !== 'request' && p !== 'response')) {
    error(f, path, 'expected "request", "response", "both" or an array of them', 'write "on": "request"');
    return [];
  }
  if (responseOnly && list.includes('request')) {
    error(
      f,
      path,
      'spotlight marks upstream text returned to the model: it runs on responses only',
      'write "on": "response" or remove on',
    );
  }
  return [...new Set(list as GuardrailPhase[])];
}

function readMethods(f: Findings, raw: unknown, path: PathSegment[]): GuardrailMethod[] {
  if (raw === undefined) return ['tools/call'];
  if (
    !Array.isArray(raw) ||
    raw.length === 0 ||
    raw.some((m) => !(GUARDRAIL_METHODS as readonly unknown[]).includes(m))
  ) {
    error(
      f,
      path,
      `expected a non-empty array of ${GUARDRAIL_METHODS.map((m) => `"${m}"`).join(', ')}`,
      'write "methods": ["tools/call", "resources/read"]',
    );
    return [];
  }
  return [...new Set(raw as GuardrailMethod[])];
}

/** Webhook headers: strings, `${VAR}` interpolated (and so redacted), no CR, LF or NUL (D6). */
function readHeaders(f: Findings, raw: unknown, path: PathSegment[]): Record<string, string> | undefined {
  if (raw === undefined) return {};
  if (!isObject(raw)) {
    error(
      f,
      path,
      `expected an object of header names to values, got ${describeKind(raw)}`,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
      'write "headers": {"authorization": "Bearer ${POLICY_TOKEN}"}',
    );
    return undefined;
  }
  const out: Record<string, string> = {};
  let ok = true;
  for (const name of keysOf(raw)) {
    const value = raw[name];
    const at = [...path, name];
    if (typeof value !== 'string') {
      error(f, at, `expected a string, got ${describeKind(value)}`, 'write the header value as a string');
      ok = false;
      continue;
    }
    const text = f.interpolator.string(value, formatPath(at));
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || /[\r\n\0]/.test(text)) {
      error(
        f,
        at,
        'is not a valid header: a token name, and a value without CR, LF or NUL',
        'remove the control characters',
      );
      ok = false;
      continue;
    }
    out[name.toLowerCase()] = text;
  }
  return ok ? out : undefined;
}
