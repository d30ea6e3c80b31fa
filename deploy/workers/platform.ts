import type { GatewayConfig } from '../../src/config/types.js';
import { egressPolicy } from '../../src/guards/egress.js';
import { createJsonLogger, type Logger } from '../../src/log.js';
import type { Platform } from '../../src/platform.js';
import { guardedFetch } from '../../src/upstream/egress-fetch.js';

/** Workers allow six simultaneous outbound connections per invocation: connect in waves of six. */
export const WORKERS_FANOUT = 6;

export function workersLogger(level: GatewayConfig['logLevel'], redact: readonly string[]): Logger {
  return createJsonLogger({ level, redact, write: (line) => console.log(line) });
}

/**
 * The Workers runtime behind the core. Egress is the hostname allowlist and IP-literal checks
 * only: Workers have no DNS hook, so a public name that resolves privately is not caught here
 * (docs/security.md). There is no stdio: such servers get an `unsupported-transport` diagnostic.
 */
export function workersPlatform(log: Logger, gateway: GatewayConfig): Platform {
  return {
    fetch: guardedFetch(globalThis.fetch.bind(globalThis), {
      policy: egressPolicy({ allowedHosts: gateway.allowedHosts }),
      maxBodyBytes: gateway.maxUpstreamBodyBytes,
    }),
    runtime: 'workers',
    now: () => Date.now(),
    log,
    maxConcurrentConnects: WORKERS_FANOUT,
  };
}
