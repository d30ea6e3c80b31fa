/**
 * Checks on the values of a server entry: the url of a remote server, its headers, and the
 * strings handed to a local process. Messages never show a header value or an argument.
 */
import { error, type Findings, isTainted } from './findings.js';
import { isObject, type JsonObject, keysOf } from './json-parse.js';
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
