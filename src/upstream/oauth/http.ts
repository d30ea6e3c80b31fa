/**
 * The protocol core's HTTP helpers: capped JSON bodies, and the text that may go into an
 * OAuthError message (a host, an OAuth error code), never a token or a URL with its query.
 */
import { ManifoldError } from '../../errors.js';
import { isObject } from '../../lib/json.js';
import { readTextCapped } from '../../lib/read-capped.js';
import { type Fetch, OAuthError, type OAuthRule } from './types.js';

/** Metadata documents and token responses are small; a larger body is refused unread. */
export const MAX_OAUTH_BODY = 256 * 1024;

const LOOPBACK_V4 = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** localhost, 127.0.0.0/8 or [::1] (URL.hostname form). */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase();
  return h === 'localhost' || h.endsWith('.localhost') || LOOPBACK_V4.test(h) || h === '[::1]';
}

/** The host of a URL for messages and logs; never the path or query. */
export function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'an invalid URL';
  }
}

/** An OAuth error code (RFC 6749 §5.2: %x20-21 / %x23-5B / %x5D-7E) safe to show, or undefined. */
export function errorCode(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const code = value.slice(0, 64);
  return /^[A-Za-z0-9_.-]+$/.test(code) ? code : undefined;
}

/** A JSON object body, or undefined when it is not one (or is too large). */
export async function readJsonObject(res: Response): Promise<Record<string, unknown> | undefined> {
  try {
    const text = await readTextCapped(res.body, MAX_OAUTH_BODY, () => new Error('too large'));
    const v: unknown = JSON.parse(text);
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** Drains a body we will not read, so the connection can be reused. */
export async function discard(res: Response): Promise<void> {
  await res.body?.cancel().catch(() => {});
}

/** fetch, with a network or egress failure turned into the rule's OAuthError. */
export async function request(
  f: Fetch,
  url: string,
  init: RequestInit,
  rule: OAuthRule,
  what: string,
): Promise<Response> {
  try {
    return await f(url, init);
  } catch (e) {
    // The operator's egress allowlist is the usual reason an AS cannot be reached: say so.
    const denied = e instanceof ManifoldError && e.code === 'ERR_EGRESS_DENIED';
    const why = denied ? 'is not allowed by the egress policy' : 'could not be reached';
    throw new OAuthError(rule, `${what} at ${hostOf(url)} ${why}`);
  }
}

export function stringArray(v: unknown): string[] | undefined {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : undefined;
}
