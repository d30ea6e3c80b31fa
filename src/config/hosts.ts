/**
 * The host-like entries of `gateway`: `allowedOrigins` (browser origins), `hostnames` (Host
 * headers the gateway answers to) and `allowedHosts` (the egress allowlist). Each check reports
 * its own error and returns the normalised entry, or undefined when it was rejected.
 */
import { error, type Findings, isTainted } from './findings.js';
import type { PathSegment } from './paths.js';

export function checkOrigin(f: Findings, origin: string, path: PathSegment[]): string | undefined {
  const fix = 'write an origin as scheme://host[:port], e.g. "https://app.example.com"';
  if (origin === '*' || origin === 'null') {
    error(
      f,
      path,
      `${JSON.stringify(origin)} is not supported as an allowed origin`,
      'list each origin, e.g. "https://app.example.com"',
    );
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    error(f, path, 'is not a valid origin', fix);
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    error(f, path, 'must be an http: or https: origin', fix);
    return undefined;
  }
  if (url.username !== '' || url.password !== '') {
    error(f, path, 'must not contain a username or password', fix);
    return undefined;
  }
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    const exact = isTainted(f, path) ? fix : `write ${JSON.stringify(url.origin)}`;
    error(f, path, 'must be an origin only, without a path, query or fragment', exact);
    return undefined;
  }
  return url.origin;
}

const HOSTNAME = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::[0-9]{1,5})?$/;

export function checkHostname(f: Findings, host: string, path: PathSegment[]): string | undefined {
  if (HOSTNAME.test(host)) return host.toLowerCase();
  let fix = 'write a host name such as "mcp.example.com", optionally with ":port"';
  if (host.includes('://') && !isTainted(f, path)) {
    try {
      fix = `write ${JSON.stringify(new URL(host).host)}`;
    } catch {
      // keep the generic fix
    }
  }
  error(f, path, 'must be a host name (as sent in the Host header), not a URL or pattern', fix);
  return undefined;
}

const ALLOWED_HOST_FIX = 'write the bare host name, e.g. "api.example.com" or "127.0.0.1:3001"';
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;
const HOST_AND_PORT = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+)(?::([0-9]{1,5}))?$/u;

/**
 * An egress allowlist entry: a host name, IPv4 or bracketed IPv6 literal, optionally with `:port`.
 * Normalised by the WHATWG URL parser: lowercase, IDN as punycode, IPv4 in dotted form.
 */
export function checkAllowedHost(f: Findings, entry: string, path: PathSegment[]): string | undefined {
  const tainted = isTainted(f, path);
  const reject = (message: string, fix = ALLOWED_HOST_FIX) => {
    error(f, path, message, fix);
    return undefined;
  };
  if (entry.trim() === '') return reject('must not be empty');
  if (SCHEME.test(entry)) {
    let fix = ALLOWED_HOST_FIX;
    if (!tainted) {
      try {
        const host = new URL(entry).host;
        if (host !== '') fix = `write ${JSON.stringify(host)}`;
      } catch {
        // keep the generic fix
      }
    }
    return reject('must be a bare host name, not a URL: remove the scheme', fix);
  }
  if (entry.includes('@')) return reject('must not contain a username or "@"');
  if (entry.includes('*')) {
    return reject(
      'wildcards are not supported; each host is matched exactly',
      'list each host name on its own, e.g. "api.example.com"',
    );
  }
  if (/[/?#\\]/.test(entry)) return reject('must be a bare host name, without a path, query or fragment');
  const match = HOST_AND_PORT.exec(entry);
  if (!match && !entry.includes('[') && (entry.match(/:/g)?.length ?? 0) > 1) {
    return reject(
      'an IPv6 address must be written in brackets',
      'write it as "[::1]", or with a port as "[::1]:8080"',
    );
  }
  if (!match) return reject('is not a valid host name, optionally followed by ":port"');
  const port = match[2];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) {
    return reject(`port must be from 1 to 65535, got ${port}`);
  }
  let hostname: string;
  try {
    hostname = new URL(`http://${match[1]}`).hostname;
  } catch {
    return reject('is not a valid host name, optionally followed by ":port"');
  }
  if (hostname === '') return reject('is not a valid host name, optionally followed by ":port"');
  return port === undefined ? hostname : `${hostname}:${Number(port)}`;
}
