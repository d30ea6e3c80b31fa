import type { GatewayConfig } from '../../src/config/types.js';
import { egressPolicy } from '../../src/guards/egress/policy.js';
import { createJsonLogger, type Logger } from '../../src/lib/log.js';
import type { Platform } from '../../src/platform.js';
import { guardedFetch } from '../../src/upstream/wire/egress-fetch.js';

/** Workers allow six simultaneous outbound connections per invocation: connect in waves of six. */
export const WORKERS_FANOUT = 6;

export function workersLogger(level: GatewayConfig['logLevel'], redact: readonly string[]): Logger {
  return createJsonLogger({ level, redact, write: (line) => console.log(line) });
}

/**
 * The Workers runtime behind the core. Egress is the hostname allowlist and IP-literal checks
 * only: Workers have no DNS hook, so a public name that resolves privately is not caught here
 * (docs/security.md). The direct caller posts with this fetch (no `postJson`: the runtime's own
 * fetch is cheap here). There is no stdio: such servers get an `unsupported-transport` diagnostic.
 */
export function workersPlatform(
  log: Logger,
  gateway: GatewayConfig,
  env?: Record<string, unknown>,
): Platform {
  return {
    fetch: guardedFetch(globalThis.fetch.bind(globalThis), {
      policy: egressPolicy({ allowedHosts: gateway.allowedHosts }),
      maxBodyBytes: gateway.maxUpstreamBodyBytes,
    }),
    runtime: 'workers',
    sseEventsTwice: true,
    now: () => Date.now(),
    log,
    maxConcurrentConnects: WORKERS_FANOUT,
    codeEngine: () => import('./code-engine.js').then((m) => m.default),
    // A `${VAR}` again, for a static server's 401 (#19): the binding as this isolate sees it, which
    // `wrangler secret put` (a new deployment) updates.
    ...(env ? { readSecret: (name: string) => bindingText(env, name) } : {}),
  };
}

/** A string binding (a secret or a variable); anything else (a namespace, a service) is no secret. */
export function bindingText(env: Record<string, unknown>, name: string): string | undefined {
  const value = Object.hasOwn(env, name) ? env[name] : undefined;
  return typeof value === 'string' ? value : undefined;
}
