/** The loopback rule: a gateway without `gateway.auth` may listen only on a loopback address. */
import type { Config, ConfigIssue } from './types.js';

/** 127.0.0.0/8, ::1 (any spelling, with or without brackets) and `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  if (h === 'localhost') return true;
  const v4 = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
  if (v4) return v4.slice(1).every((n) => Number(n) <= 255);
  if (!h.includes(':')) return false;
  const bare = h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
  try {
    return new URL(`http://[${bare}]/`).hostname === '[::1]';
  } catch {
    return false;
  }
}

export function bindIssue(): ConfigIssue {
  return {
    path: 'gateway.host',
    message:
      'is not a loopback address and gateway.auth is not set, so anyone who can reach the gateway could list and call every tool',
    fix: 'add gateway.auth, or set "auth": false to serve without authentication on a non-loopback address',
  };
}

/**
 * A gateway without `gateway.auth` may listen only on loopback. The loader checks the file; call
 * this again after anything (such as `--host`) changes `gateway.host`.
 */
export function checkBindSafety(config: Config): ConfigIssue | undefined {
  const { auth, host } = config.gateway;
  return auth === undefined && !isLoopbackHost(host) ? bindIssue() : undefined;
}
