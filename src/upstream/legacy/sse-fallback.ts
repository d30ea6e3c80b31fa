/**
 * Servers configured by `url` alone that refused the streamable-HTTP initialize (400, 404 or 405)
 * and answered over HTTP+SSE instead (transports, backwards compatibility). Keyed by the server's
 * config object: reconnects go straight to SSE, and status reports the transport in use.
 */
const overSse = new WeakSet<object>();

/** Refusals of a streamable-HTTP initialize that mean "try the HTTP+SSE transport". */
export const SSE_FALLBACK_STATUSES: ReadonlySet<number> = new Set([400, 404, 405]);

export function markOverSse(config: object): void {
  overSse.add(config);
}

export function reachedOverSse(config: object): boolean {
  return overSse.has(config);
}
