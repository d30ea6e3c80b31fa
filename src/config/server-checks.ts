/**
 * Checks on the values of a server entry: the url of a remote server, its headers, and the
 * strings handed to a local process. Messages never show a header value or an argument.
 */

import {
  type ApprovalPreset,
  type ApprovalSettings,
  type DeclaredRisk,
  isRiskClass,
  RISK_CLASSES,
  RISK_PATTERN_PREFIX,
} from '../guards/risk.js';
import { isObject, type JsonObject } from '../lib/json.js';
import { error, type Findings, isTainted } from './findings.js';
import { keysOf } from './json-parse.js';
import type { PathSegment } from './paths.js';

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function checkUrl(f: Findings, url: string, path: PathSegment[]): void {
  const example = 'write an absolute URL such as "https://example.com/mcp"';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    error(f, path, 'is not a valid absolute URL', example);
    return;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    const scheme = isTainted(f, path) ? 'another scheme' : parsed.protocol;
    error(f, path, `must use the http: or https: scheme, got ${scheme}`, example);
  }
  if (parsed.username !== '' || parsed.password !== '') {
    error(
      f,
      path,
      'must not contain a username or password',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
      'remove the credentials from the URL and send them in headers, e.g. "headers": {"Authorization": "Bearer ${TOKEN}"}',
    );
  }
}

function hasCharAbove(value: string, max: number): boolean {
  for (let k = 0; k < value.length; k++) if (value.charCodeAt(k) > max) return true;
  return false;
}

export function checkHeaders(f: Findings, headers: JsonObject, base: PathSegment[]): void {
  const seen = new Map<string, string>();
  for (const name of keysOf(headers)) {
    const path = [...base, name];
    const value = headers[name];
    if (!HEADER_NAME.test(name)) {
      error(
        f,
        path,
        "header name is not a valid HTTP token (letters, digits and !#$%&'*+-.^_`|~ only)",
        'rename the header, e.g. "X-Api-Key"',
      );
    }
    const lower = name.toLowerCase();
    const earlier = seen.get(lower);
    if (earlier !== undefined) {
      error(
        f,
        path,
        `header ${JSON.stringify(name)} repeats ${JSON.stringify(earlier)}; header names are case-insensitive`,
        'keep one of the two headers',
      );
    } else {
      seen.set(lower, name);
    }
    if (typeof value !== 'string') continue;
    const fromEnv = isTainted(f, path);
    if (/[\r\n\0]/.test(value)) {
      error(
        f,
        path,
        `header value contains a line break or NUL character${fromEnv ? ' (after substituting environment variables)' : ''}`,
        fromEnv
          ? "remove the line break from the environment variable's value; it is often a trailing newline"
          : 'remove the line break or NUL character from the value',
      );
    } else if (hasCharAbove(value, 0xff)) {
      error(
        f,
        path,
        `header value contains characters outside Latin-1, which HTTP headers cannot carry${fromEnv ? ' (after substituting environment variables)' : ''}`,
        'use only ASCII characters in header values',
      );
    }
  }
}

export function checkStdioStrings(f: Findings, picked: JsonObject, base: PathSegment[]): void {
  const nul = (value: unknown, path: PathSegment[]) => {
    if (typeof value === 'string' && value.includes('\0')) {
      error(f, path, 'contains a NUL character', 'remove the NUL character; processes cannot receive it');
    }
  };
  nul(picked.command, [...base, 'command']);
  nul(picked.cwd, [...base, 'cwd']);
  if (Array.isArray(picked.args)) {
    for (const [i, a] of picked.args.entries()) nul(a, [...base, 'args', i]);
  }
  if (isObject(picked.env)) {
    for (const key of keysOf(picked.env)) {
      const path = [...base, 'env', key];
      if (key === '' || key.includes('=') || key.includes('\0')) {
        error(
          f,
          path,
          'environment variable name must not be empty or contain "=" or NUL',
          'rename the variable, e.g. "API_KEY"',
        );
      }
      nul(picked.env[key], path);
    }
  }
}

/** The default time a person has to answer an approval. */
export const DEFAULT_APPROVAL_SECONDS = 120;
/** The default time a queued approval waits for an operator (#52): one day. */
export const DEFAULT_QUEUE_TTL_SECONDS = 86_400;

/** `risk`, already shape-checked: its globs in the order written. */
export function readRisk(raw: unknown): { pattern: string; class: DeclaredRisk }[] {
  if (!isObject(raw)) return [];
  return keysOf(raw).map((pattern) => ({ pattern, class: raw[pattern] as DeclaredRisk }));
}

/** `approval`, already shape-checked, in its full form. */
export function readApproval(raw: unknown): ApprovalSettings {
  const settings: ApprovalSettings = {
    preset: 'off',
    ask: [],
    deny: [],
    allow: [],
    timeoutSeconds: DEFAULT_APPROVAL_SECONDS,
    via: 'client',
    queueTtlSeconds: DEFAULT_QUEUE_TTL_SECONDS,
  };
  if (typeof raw === 'string') settings.preset = raw as ApprovalPreset;
  else if (Array.isArray(raw)) settings.ask = raw as string[];
  else if (isObject(raw)) Object.assign(settings, raw);
  return settings;
}

/**
 * The entries of `approval` lists: `risk:<class>` must name a class, and a bare class name is
 * refused, since it would read as a tool of that name (write `risk:destructive`).
 */
export function checkApproval(f: Findings, raw: unknown, base: PathSegment[]): void {
  const lists: [PathSegment[], unknown][] = Array.isArray(raw)
    ? [[base, raw]]
    : isObject(raw)
      ? (['ask', 'deny', 'allow'] as const).map((k) => [[...base, k], raw[k]])
      : [];
  // #52: the webhook of the approvals queue is an absolute http(s) URL without credentials.
  if (isObject(raw) && typeof raw.notify === 'string') checkUrl(f, raw.notify, [...base, 'notify']);
  const classes = [...RISK_CLASSES, 'undeclared'];
  for (const [path, list] of lists) {
    if (!Array.isArray(list)) continue;
    list.forEach((entry, i) => {
      if (typeof entry !== 'string') return;
      if (entry.startsWith(RISK_PATTERN_PREFIX)) {
        const name = entry.slice(RISK_PATTERN_PREFIX.length);
        if (!classes.includes(name)) {
          error(
            f,
            [...path, i],
            `names an unknown risk class${isTainted(f, [...path, i]) ? '' : ` ${JSON.stringify(name)}`}`,
            `write one of ${classes.map((c) => `risk:${c}`).join(', ')}`,
          );
        }
      } else if (isRiskClass(entry) || entry === 'undeclared') {
        error(
          f,
          [...path, i],
          `is the bare class name ${JSON.stringify(entry)}, which would match a tool of that name`,
          `write "risk:${entry}" to mean every ${entry} tool`,
        );
      }
    });
  }
}
