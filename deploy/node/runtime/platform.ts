import { GATEWAY_DEFAULTS } from '../../../src/config/defaults.js';
import type { GatewayConfig } from '../../../src/config/types.js';
import type { Logger } from '../../../src/lib/log.js';
import type { Platform } from '../../../src/platform.js';
import { nodeCodeEngine } from './code-engine.js';
import { nodeEgress } from './egress.js';
import { readNodeSecret } from './secrets.js';
import { connectStdio } from './stdio.js';

/**
 * The Node runtime behind the core: egress through undici with the connect-time address check
 * (egress.ts), child processes for stdio, stderr logs.
 */
export function nodePlatform(log: Logger, gateway: GatewayConfig): Platform {
  const { fetch, postJson } = nodeEgress({
    // The loader's defaults, so a GatewayConfig built by hand without these stays guarded.
    allowedHosts: gateway.allowedHosts ?? GATEWAY_DEFAULTS.allowedHosts,
    maxUpstreamBodyBytes: gateway.maxUpstreamBodyBytes ?? GATEWAY_DEFAULTS.maxUpstreamBodyBytes,
    log,
  });
  return {
    fetch,
    postJson,
    connectStdio: (spec, stdioLog) =>
      connectStdio(spec, stdioLog, gateway.maxUpstreamBodyBytes ?? GATEWAY_DEFAULTS.maxUpstreamBodyBytes),
    runtime: 'node',
    now: () => Date.now(),
    log,
    // A `${VAR}` again, for a static server's 401 (#19): `NAME_FILE` is read afresh each time.
    readSecret: (name) => readNodeSecret(name),
    codeEngine: nodeCodeEngine,
  };
}
