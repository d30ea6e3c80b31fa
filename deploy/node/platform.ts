import { GATEWAY_DEFAULTS } from '../../src/config/schema.js';
import type { GatewayConfig } from '../../src/config/types.js';
import { createJsonLogger, type Logger, type LogLevel } from '../../src/log.js';
import type { Platform } from '../../src/platform.js';
import { nodeEgressFetch } from './egress.js';
import { connectStdio } from './stdio.js';

export function nodeLogger(level: LogLevel, redact: readonly string[] = []): Logger {
  return createJsonLogger({ level, redact, write: (line) => process.stderr.write(`${line}\n`) });
}

/**
 * The Node runtime behind the core: an egress-guarded fetch (allowlist, connect-time address check,
 * redirects by hand, body cap), child processes for stdio, stderr logs.
 */
export function nodePlatform(log: Logger, gateway: GatewayConfig): Platform {
  return {
    fetch: nodeEgressFetch({
      // The loader's defaults, so a GatewayConfig built by hand without these stays guarded.
      allowedHosts: gateway.allowedHosts ?? GATEWAY_DEFAULTS.allowedHosts,
      maxUpstreamBodyBytes: gateway.maxUpstreamBodyBytes ?? GATEWAY_DEFAULTS.maxUpstreamBodyBytes,
      log,
    }),
    connectStdio,
    runtime: 'node',
    now: () => Date.now(),
    log,
  };
}
