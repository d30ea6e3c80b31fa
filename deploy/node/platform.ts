import { GATEWAY_DEFAULTS } from '../../src/config/schema.js';
import type { GatewayConfig } from '../../src/config/types.js';
import { createJsonLogger, type Logger, type LogLevel } from '../../src/log.js';
import type { Platform } from '../../src/platform.js';
import type { NodeEgressOptions } from './egress.js';
import { connectStdio } from './stdio.js';

export function nodeLogger(level: LogLevel, redact: readonly string[] = []): Logger {
  return createJsonLogger({ level, redact, write: batchedStderr() });
}

/**
 * Writes to stderr are synchronous for pipes and files on Linux: one write per audit line costs
 * more than the rest of a relayed call. Lines are batched and written once per turn of the event
 * loop, and whatever is pending is written before the process exits.
 */
function batchedStderr(): (line: string) => void {
  let pending: string[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const text = `${pending.join('\n')}\n`;
    pending = [];
    process.stderr.write(text);
  };
  process.once('exit', flush);
  return (line) => {
    pending.push(line);
    if (pending.length >= 256) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
}

/**
 * The egress fetch, with undici (a megabyte of JavaScript) loaded on the first request rather than
 * before the gateway listens (#18, start time): a deployment of stdio servers without remote JWKS
 * never loads it. After the first request, one branch per call.
 */
function lazyEgressFetch(options: NodeEgressOptions): typeof fetch {
  let impl: typeof fetch | undefined;
  let loading: Promise<typeof fetch> | undefined;
  return ((input: RequestInfo | URL, init?: RequestInit) => {
    if (impl) return impl(input, init);
    loading ??= import('./egress.js').then((m) => {
      impl = m.nodeEgressFetch(options);
      return impl;
    });
    return loading.then((f) => f(input, init));
  }) as typeof fetch;
}

/**
 * The Node runtime behind the core: an egress-guarded fetch (allowlist, connect-time address check,
 * redirects by hand, body cap), child processes for stdio, stderr logs.
 */
export function nodePlatform(log: Logger, gateway: GatewayConfig): Platform {
  return {
    fetch: lazyEgressFetch({
      // The loader's defaults, so a GatewayConfig built by hand without these stays guarded.
      allowedHosts: gateway.allowedHosts ?? GATEWAY_DEFAULTS.allowedHosts,
      maxUpstreamBodyBytes: gateway.maxUpstreamBodyBytes ?? GATEWAY_DEFAULTS.maxUpstreamBodyBytes,
      log,
    }),
    connectStdio: (spec, stdioLog) =>
      connectStdio(spec, stdioLog, gateway.maxUpstreamBodyBytes ?? GATEWAY_DEFAULTS.maxUpstreamBodyBytes),
    runtime: 'node',
    now: () => Date.now(),
    log,
  };
}
