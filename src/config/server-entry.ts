/**
 * Reads one entry of `mcpServers`: its name, its shape, the transport (explicit or inferred), the
 * prefix it claims, and the per-server limits checked against the gateway's.
 */

import * as z from 'zod/v4-mini';
import { isObject, type JsonObject } from '../lib/json.js';
import { FIELD_TEXT } from './field-text.js';
import { error, type Findings, hasIssueUnder, interpolateField, isTainted, readNested } from './findings.js';
import type { GatewayRead } from './gateway.js';
import { describeKind, validateShape } from './issues.js';
import { keysOf } from './json-parse.js';
import { nameProblems, suggestName } from './names.js';
import { checkServerAuth, readServerAuth } from './oauth.js';
import { readPromptOverrides, readToolOverrides } from './overrides.js';
import { formatPath, type PathSegment } from './paths.js';
import { checkPlaceholders } from './placeholders.js';
import { POLICY_KEYS, readGuardrails, readPolicy } from './policy.js';
import { LAZY_IDLE_STOP_SECONDS, readSandbox, type StartMode } from './sandbox.js';
import {
  approvalObjectSchema,
  HTTP_ONLY_KEYS,
  SERVER_KEYS,
  STDIO_ONLY_KEYS,
  serverSchema,
  TOOLS_KEYS,
} from './schema.js';
import {
  checkApproval,
  checkHeaders,
  checkStdioStrings,
  checkUrl,
  readApproval,
  readRisk,
} from './server-checks.js';
import type { ServerConfig, TransportKind } from './types.js';
import { unknownKeyWarning } from './unknown-keys.js';

export interface PrefixClaim {
  server: string;
  prefix: string;
  /** Where a collision is reported: the explicit prefix, or the entry itself. */
  path: PathSegment[];
  tainted: boolean;
}

/** Keys other MCP clients' configs use for ours. */
const ALIASES: Record<string, string> = { serverUrl: 'url' };

/** Spellings of the streamable HTTP transport in other clients' configs (lower-cased). */
const TYPE_SPELLINGS: Record<string, string> = {
  streamablehttp: 'streamable-http',
  streamable_http: 'streamable-http',
  'streamable-http': 'streamable-http',
};

/**
 * The headers as written, before `${VAR}` substitution, when any of them names a variable: a
 * `static` server's secret can then be read again after a 401 (Platform.readSecret).
 */
function headerTemplates(raw: unknown): Record<string, string> | undefined {
  if (!isObject(raw)) return undefined;
  const entries = keysOf(raw).flatMap((k) =>
    typeof raw[k] === 'string' ? [[k, raw[k] as string] as const] : [],
  );
  return entries.some(([, v]) => v.includes('${')) ? Object.fromEntries(entries) : undefined;
}

export function readServer(
  f: Findings,
  mapKey: string,
  name: string,
  raw: unknown,
  gateway: GatewayRead,
  claims: PrefixClaim[],
): ServerConfig | undefined {
  const base: PathSegment[] = [mapKey, name];
  const before = f.errors.length;

  const badName = nameProblems(name, 'server name');
  if (badName.length > 0) {
    error(f, base, badName.join('; '), `rename the server, e.g. to ${JSON.stringify(suggestName(name))}`);
  }
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object describing the server, got ${describeKind(raw)}`,
      'write the entry as {"command": "...", "args": [...]} for a local server or {"url": "https://..."} for a remote one',
    );
    return undefined;
  }

  const picked: JsonObject = {};
  for (const given of keysOf(raw)) {
    // The spellings other clients' configs use: Windsurf's `serverUrl` for `url`.
    const key = ALIASES[given] ?? given;
    if (key !== given && raw[key] !== undefined) {
      error(
        f,
        [...base, given],
        `is another spelling of "${key}", and both are set`,
        `keep one of them: "${key}" or "${given}"`,
      );
      continue;
    }
    // Policy (#51) has its own reader (below).
    if ((POLICY_KEYS as readonly string[]).includes(key)) continue;
    if (!SERVER_KEYS.includes(key)) {
      f.warnings.push(unknownKeyWarning([...base, key], [...SERVER_KEYS, ...POLICY_KEYS]));
      continue;
    }
    picked[key] =
      key === 'tools' || key === 'prompts' || key === 'resources'
        ? readNested(f, raw[given], [...base, given], TOOLS_KEYS)
        : key === 'auth' || key === 'overrides' || key === 'promptOverrides' || key === 'sandbox'
          ? raw[given] // oauth.ts, overrides.ts and sandbox.ts read them key by key, interpolating once
          : interpolateField(f, raw[given], [...base, given]);
  }
  // Cline writes "streamableHttp", others "streamable_http" or "streamableHTTP".
  if (typeof picked.type === 'string' && TYPE_SPELLINGS[picked.type.toLowerCase()]) {
    picked.type = TYPE_SPELLINGS[picked.type.toLowerCase()]!;
  }
  const shape = { table: FIELD_TEXT.server, base, tainted: f.interpolator.tainted };
  const issues = validateShape(serverSchema, picked, shape);
  // An `approval` object that fails the union is checked alone, so each bad field is named with its fix (#52).
  if (isObject(picked.approval) && hasIssueUnder(issues, [...base, 'approval'])) {
    const detail = validateShape(
      z.object({ approval: approvalObjectSchema }),
      { approval: picked.approval },
      shape,
    );
    if (detail.length > 0)
      issues.splice(
        0,
        issues.length,
        ...issues.filter((i) => !i.path.startsWith(formatPath([...base, 'approval']))),
        ...detail,
      );
    checkApproval(f, picked.approval, [...base, 'approval']);
  }
  f.errors.push(...issues);
  const has = (key: string) => picked[key] !== undefined;
  const valid = (key: string) => has(key) && !hasIssueUnder(issues, [...base, key]);

  // Transport: explicit, or inferred from command / url.
  let type: TransportKind | undefined;
  let inferred = false;
  let sseFallback = false;
  if (has('type')) {
    if (valid('type')) type = picked.type === 'http' ? 'streamable-http' : (picked.type as TransportKind);
  } else if (has('command') && has('url')) {
    error(
      f,
      base,
      'has both "command" and "url", so the transport is ambiguous',
      'remove one of them: keep command, args, env and cwd for a local stdio server, or url and headers for a remote one',
    );
  } else if (has('command')) {
    type = 'stdio';
    inferred = true;
  } else if (has('url')) {
    type = 'streamable-http';
    inferred = true;
    sseFallback = true;
  } else {
    error(
      f,
      base,
      'has neither "command" nor "url", so there is nothing to connect to',
      'add "command" to start a local server, or "url" to connect to a remote one',
    );
  }

  if (type !== undefined) {
    const stdio = type === 'stdio';
    const how = inferred ? ` (inferred from "${stdio ? 'command' : 'url'}")` : '';
    for (const key of stdio ? HTTP_ONLY_KEYS : STDIO_ONLY_KEYS) {
      if (!has(key)) continue;
      error(
        f,
        [...base, key],
        `"${key}" applies only to ${stdio ? 'streamable-http and sse' : 'stdio'} servers, but this server uses ${type}${how}`,
        stdio
          ? `remove ${key}; a stdio server is started with command, args, env and cwd`
          : `remove ${key}; a ${type} server is reached through url and headers`,
      );
    }
    if (stdio && !has('command')) {
      error(
        f,
        [...base, 'command'],
        'is missing: a stdio server needs a command to start',
        'set command to the program to start, e.g. "npx"',
      );
    }
    if (!stdio && !has('url')) {
      error(
        f,
        [...base, 'url'],
        `is missing: a ${type} server needs a url`,
        'set url to the server endpoint, e.g. "https://example.com/mcp"',
      );
    }
    if (!stdio && valid('url')) checkUrl(f, picked.url as string, [...base, 'url']);
    if (!stdio && valid('headers')) checkHeaders(f, picked.headers as JsonObject, [...base, 'headers']);
    if (stdio) checkStdioStrings(f, picked, base);
  }

  // Prefix.
  let prefix: string | false = name;
  let prefixTainted = false;
  if (valid('prefix')) {
    prefix = picked.prefix as string | false;
    prefixTainted = isTainted(f, [...base, 'prefix']);
    if (typeof prefix === 'string') {
      const bad = nameProblems(prefix, 'prefix');
      if (bad.length > 0) {
        error(
          f,
          [...base, 'prefix'],
          bad.join('; '),
          prefixTainted
            ? 'set prefix to a valid name, or to false'
            : `set prefix to a valid name such as ${JSON.stringify(suggestName(prefix))}, or to false`,
        );
      }
    }
  }
  const disabled = valid('disabled') ? (picked.disabled as boolean) : false;
  if (typeof prefix === 'string' && !disabled && !(has('prefix') && !valid('prefix'))) {
    claims.push({
      server: name,
      prefix,
      path: has('prefix') ? [...base, 'prefix'] : base,
      tainted: prefixTainted,
    });
  }

  // Filters: tools, prompts, resources (globs over the upstream's own names and URIs).
  const filter = (kind: 'tools' | 'prompts' | 'resources') => {
    const given = (valid(kind) ? picked[kind] : {}) as { allow?: string[]; deny?: string[] };
    if (given.allow !== undefined && given.allow.length === 0) {
      f.warnings.push({
        path: formatPath([...base, kind, 'allow']),
        message: `is empty, so no ${kind} from this server are exposed`,
        fix: `add names or globs, or remove allow to expose every one of its ${kind}`,
      });
    }
    return { ...(given.allow ? { allow: given.allow } : {}), deny: given.deny ?? [] };
  };
  const tools = filter('tools');
  const prompts = filter('prompts');
  const resources = filter('resources');

  // Timeout and result cap: each at most the gateway's maximum for it.
  const atMost = (
    key: 'timeoutMs' | 'maxResultBytes',
    fallback: number,
    maxKey: 'maxCallTimeoutMs' | 'maxUpstreamBodyBytes',
  ): number => {
    if (!valid(key)) return fallback;
    const value = picked[key] as number;
    const max = gateway.config[maxKey];
    if (!gateway.invalid.has(maxKey) && value > max) {
      error(
        f,
        [...base, key],
        `must be at most gateway.${maxKey} (${max}), got ${value}`,
        `lower ${key} to ${max} or less, or raise gateway.${maxKey}`,
      );
    }
    return value;
  };
  const timeoutMs = atMost('timeoutMs', gateway.config.callTimeoutMs, 'maxCallTimeoutMs');
  const maxResultBytes = atMost('maxResultBytes', gateway.config.maxResultBytes, 'maxUpstreamBodyBytes');

  // Disclosure budget: alwaysLoad wins over any budget.
  let budgetTokens = gateway.config.disclosure.budgetTokens;
  if (valid('budgetTokens')) budgetTokens = picked.budgetTokens as number | 'off';
  if (gateway.config.disclosure.alwaysLoad.includes(name)) {
    if (valid('budgetTokens') && budgetTokens !== 'off') {
      f.warnings.push({
        path: formatPath([...base, 'budgetTokens']),
        message:
          'is ignored: this server is listed in gateway.disclosure.alwaysLoad, so its schemas are always inlined',
        fix: 'remove budgetTokens, or remove the server from gateway.disclosure.alwaysLoad',
      });
    }
    budgetTokens = 'off';
  }

  if (type === 'sse' && valid('protocol') && picked.protocol === '2026-07-28') {
    error(
      f,
      [...base, 'protocol'],
      'is "2026-07-28", but an "sse" server speaks the deprecated HTTP+SSE transport, which only legacy revisions use',
      'set "type": "http" if the server speaks streamable HTTP, or remove protocol',
    );
  }
  if (valid('approval')) checkApproval(f, picked.approval, [...base, 'approval']);

  // Whose identity reaches an HTTP server (#19); mode user implies a connection per caller.
  const auth =
    valid('auth') && type !== 'stdio' ? readServerAuth(f, picked.auth, [...base, 'auth']) : undefined;
  const isolation: ServerConfig['isolation'] = valid('isolation')
    ? (picked.isolation as ServerConfig['isolation'])
    : auth?.mode === 'user' || auth?.mode === 'user-key'
      ? 'per-subject'
      : 'shared';
  if (auth) {
    const headers = (valid('headers') ? picked.headers : {}) as Record<string, string>;
    checkServerAuth(f, base, auth, { headers, isolation }, valid('isolation'), gateway);
  }
  // {{tenant}} and {{subject}} must each be filled with the caller, or not be written at all.
  if (valid('isolation') || !has('isolation')) {
    checkPlaceholders(f, picked, base, { valid, isolation, isolationGiven: valid('isolation') });
  }
  // Policy (#51): this server's rules and guardrails.
  const policy = readPolicy(f, raw.policy, [...base, 'policy']);
  const guardrails = readGuardrails(f, raw.guardrails, [...base, 'guardrails']);
  // Overrides (#54): checked at load; whether each named tool exists is known only once listed.
  const overrides = valid('overrides')
    ? readToolOverrides(f, picked.overrides, [...base, 'overrides'], prefix)
    : undefined;
  const promptOverrides = valid('promptOverrides')
    ? readPromptOverrides(f, picked.promptOverrides, [...base, 'promptOverrides'], prefix)
    : undefined;
  // Local servers (#53): the sandbox (stdio only; the gateway's default unless the entry says), start, idle stop.
  const sandbox =
    type !== 'stdio'
      ? false
      : has('sandbox')
        ? valid('sandbox')
          ? readSandbox(f, picked.sandbox, [...base, 'sandbox'], gateway.config.sandbox)
          : undefined
        : gateway.config.sandbox;
  if (sandbox && !sandbox.filesystem.write) sandbox.dataDir = `${gateway.config.serverDataDir}/${name}`;
  const start: StartMode = valid('start') ? (picked.start as StartMode) : 'eager';
  const idleStopSeconds = valid('idleStopSeconds')
    ? (picked.idleStopSeconds as number)
    : start === 'lazy'
      ? LAZY_IDLE_STOP_SECONDS
      : 0;
  if (f.errors.length > before || type === undefined || sandbox === undefined) return undefined;
  const server: ServerConfig = {
    name,
    type,
    ...(sseFallback ? { sseFallback } : {}),
    args: (picked.args as string[] | undefined) ?? [],
    env: (picked.env as Record<string, string> | undefined) ?? {},
    headers: (picked.headers as Record<string, string> | undefined) ?? {},
    prefix,
    tools,
    prompts,
    resources,
    timeoutMs,
    disabled,
    maxResultBytes,
    budgetTokens,
    protocol: valid('protocol') ? (picked.protocol as ServerConfig['protocol']) : 'auto',
    isolation,
    maxInstances: valid('maxInstances') ? (picked.maxInstances as number) : 16,
    instanceIdleSeconds: valid('instanceIdleSeconds') ? (picked.instanceIdleSeconds as number) : 300,
    clientFeatures: {
      elicitation: true,
      sampling: false,
      roots: false,
      ...(valid('clientFeatures') ? (picked.clientFeatures as Partial<ServerConfig['clientFeatures']>) : {}),
    },
    risk: readRisk(valid('risk') ? picked.risk : undefined),
    trustAnnotations: valid('trustAnnotations') ? (picked.trustAnnotations as boolean) : false,
    approval: readApproval(valid('approval') ? picked.approval : undefined),
    retry: valid('retry') ? (picked.retry as number) : 1,
    ...(policy?.rules.length ? { policy } : {}),
    ...(guardrails?.length ? { guardrails } : {}),
    ...(overrides && Object.keys(overrides).length > 0 ? { overrides } : {}),
    ...(promptOverrides && Object.keys(promptOverrides).length > 0 ? { promptOverrides } : {}),
    ...(valid('trust') && picked.trust === 'review' ? { trust: 'review' as const } : {}),
    sandbox,
    start,
    idleStopSeconds,
  };
  if (type === 'stdio') {
    server.command = picked.command as string;
    if (has('cwd')) server.cwd = picked.cwd as string;
  } else {
    server.url = picked.url as string;
    if (auth) server.auth = auth;
    const templates = headerTemplates(raw.headers);
    if (templates) server.headerTemplates = templates;
  }
  return server;
}
