import type { MiddlewareHandler } from 'hono';
import { isLoopbackHost } from '../../config/bind.js';
import { bodyTooLarge, ManifoldError } from '../../errors.js';
import { readTextCapped } from '../../lib/read-capped.js';

function hostnameOf(hostHeader: string): string {
  const h = hostHeader.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  return colon === -1 ? h : h.slice(0, colon);
}

export interface OriginGuardOptions {
  /** Extra allowed origins (exact, e.g. https://app.example.com). Loopback origins always pass. */
  allowedOrigins: readonly string[];
  /** Extra allowed Host names. */
  hostnames: readonly string[];
  /** When true (gateway bound to loopback, or hostnames given), the Host header is checked. */
  checkHost: boolean;
  /**
   * Also accept a Host that is an IP literal (for /healthz: load balancers probe by address, and
   * a DNS-rebinding page can only ever send its own DNS name).
   */
  ipLiterals?: boolean;
}

/**
 * DNS-rebinding defence (spec: transports, security warning; SECURITY B3): a present Origin
 * that is not allowed is 403, and so is a Host the gateway does not serve. Throws; the edge
 * turns the error into its answer.
 *
 * @example const check = originCheck({ allowedOrigins: [], hostnames: [], checkHost: true }); check(c.req)
 */
export function originCheck(
  options: OriginGuardOptions,
): (request: { header(name: string): string | undefined }) => void {
  const origins = new Set(options.allowedOrigins.map((o) => o.toLowerCase().replace(/\/$/, '')));
  return function checkOriginAndHost(request) {
    const origin = request.header('origin');
    if (origin !== undefined && !originAllowed(origin, origins)) {
      throw new ManifoldError('ERR_ORIGIN', 'origin not allowed');
    }
    if (options.checkHost && !hostAllowed(request.header('host'), options.hostnames, options.ipLiterals)) {
      throw new ManifoldError('ERR_HOST', 'host not allowed');
    }
  };
}

/** `originCheck` as Hono middleware. */
export function originGuard(options: OriginGuardOptions): MiddlewareHandler {
  const check = originCheck(options);
  return async (c, next) => {
    check(c.req);
    await next();
  };
}

function isIpLiteral(host: string): boolean {
  return (
    /^\d{1,3}(?:\.\d{1,3}){3}$/.test(host) ||
    (host.startsWith('[') && host.endsWith(']')) ||
    host.includes(':')
  );
}

/** Whether a Host header names this gateway (loopback, a configured host name, or where asked an IP literal). */
export function hostAllowed(
  header: string | undefined,
  hostnames: readonly string[],
  ipLiterals = false,
): boolean {
  const raw = (header ?? '').trim().toLowerCase();
  // Two Host headers arrive joined ("a, b"): a request may carry only one (RFC 9112, 3.2), and
  // the name parsed from the first would let the second through unchecked.
  if (raw.includes(',')) return false;
  const host = hostnameOf(raw);
  if (isLoopbackHost(host) || (ipLiterals && isIpLiteral(host))) return true;
  // `hostnames` entries may carry a port (gw.example.com:8443) or not.
  return hostnames.some((h) => h.toLowerCase() === host || h.toLowerCase() === raw);
}

function originAllowed(origin: string, allowed: ReadonlySet<string>): boolean {
  const o = origin.toLowerCase();
  if (allowed.has(o)) return true;
  try {
    const u = new URL(o);
    return (u.protocol === 'http:' || u.protocol === 'https:') && isLoopbackHost(u.hostname);
  } catch {
    return false;
  }
}

/**
 * Reads the body with a hard cap: a declared length over the cap is refused before reading,
 * and a body that grows past it while streaming is cut off (SECURITY B2: 413 before parse).
 */
export async function readBodyCapped(request: Request, max: number): Promise<string> {
  const tooLarge = () => bodyTooLarge(max);
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > max) throw tooLarge();
  // A declared length within the cap bounds the body already (the HTTP parser enforces it), so
  // read it whole: on Node this skips the web-stream adapter entirely.
  if (declared !== null && /^[0-9]+$/.test(declared.trim())) return request.text();
  return readTextCapped(request.body, max, tooLarge);
}
