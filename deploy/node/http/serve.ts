import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Tracer } from '@opentelemetry/api';
import type { Config } from '../../../src/config/types.js';
import { describeError } from '../../../src/errors.js';
import { Gateway } from '../../../src/gateway/gateway.js';
import type { Logger } from '../../../src/lib/log.js';
import type { MetricsExporter } from '../../../src/observe/metrics.js';
import { createHttp } from '../../../src/server/http/app.js';
import { MemoryCredentialStore } from '../../../src/store/credentials.js';
import { MemoryStateStore } from '../../../src/store/state.js';
import type { BackoffOptions } from '../../../src/upstream/backoff.js';
import { createUpstreamAuths, defaultRedirectUri } from '../../../src/upstream/oauth/registry.js';
import { nodePlatform } from '../runtime/platform.js';
import { openConfiguredStore } from '../store/open.js';
import { httpLane } from './lane.js';

export interface RunningGateway {
  gateway: Gateway;
  server: Server;
  url: string;
  /** Stop accepting, drain in-flight calls within the grace period, close upstreams and children. */
  stop(): Promise<void>;
}

export interface StartOptions {
  config: Config;
  /** Interpolated ${VAR} values (never stored, redacted from logs). */
  secrets?: readonly string[];
  trustPollMs?: number;
  log: Logger;
  version: string;
  backoff?: BackoffOptions;
  /** Wait for the first round of upstream connections before resolving. */
  waitReady?: boolean;
  /** Spans for requests and upstream calls (tracing.ts builds one); absent: tracing is off. */
  tracer?: Tracer;
}

/**
 * prom-client takes longer to load than the rest of the start: it is loaded by the first scrape.
 * Its event loop lag and GC metrics count from then on; CPU and memory are the process's own
 * totals either way (metrics.ts credits the CPU spent before).
 */
function lazyPromExporter(): MetricsExporter {
  let loading: Promise<MetricsExporter> | undefined;
  return {
    render(families) {
      loading ??= import('../runtime/metrics.js').then((m) => m.promExporter());
      return loading.then((exporter) => exporter.render(families));
    },
  };
}

/** The gateway a Node host serves, with the store it opened (closed by the gateway's close). */
export interface NodeGateway {
  gateway: Gateway;
  store: Awaited<ReturnType<typeof openConfiguredStore>>;
}

/**
 * The gateway on Node, not yet serving: its store opened (and migrated), its platform, upstream
 * OAuth. `bound` tells the OAuth redirect where the listener is (none for `manifold stdio`).
 */
export async function createNodeGateway(
  options: StartOptions,
  bound: () => { host: string; port: number } | undefined = () => undefined,
): Promise<NodeGateway> {
  const { config, log } = options;
  // Drift baselines and the catalog cache: opened (and migrated) before anything is served.
  const store = await openConfiguredStore(config.gateway.store, log);
  const platform = options.tracer
    ? { ...nodePlatform(log, config.gateway), tracer: options.tracer }
    : nodePlatform(log, config.gateway);
  // Protected upstreams (#19): their credentials live beside the rest of the state.
  const state = store ?? new MemoryStateStore();
  // The caller's list is the one its logger redacts (cli/main.ts): a re-read secret joins it.
  const secrets = (options.secrets ?? []) as string[];
  const upstreamAuth = await createUpstreamAuths(config, {
    platform,
    credentials: store?.credentials ?? memoryCredentials(config, log),
    claims: state,
    redirectUri: () => defaultRedirectUri(config, bound()),
    addSecret: (v) => {
      if (!secrets.includes(v) && Object.isExtensible(secrets)) secrets.push(v);
    },
  });
  const gateway = new Gateway({
    config,
    store: state,
    ...(upstreamAuth.size > 0 ? { upstreamAuth } : {}),
    // Postgres: every instance spends from one count per tenant; otherwise the local bucket.
    ...(store?.callLimiter ? { callLimiter: store.callLimiter } : {}),
    secrets,
    ...(options.trustPollMs ? { trustPollMs: options.trustPollMs } : {}),
    platform,
    version: options.version,
    ...(config.gateway.cursorSecret
      ? { cursorSecret: new TextEncoder().encode(config.gateway.cursorSecret) }
      : {}),
    ...(options.backoff ? { backoff: options.backoff } : {}),
  });
  // A store that can push a re-trust (Postgres) makes it seen at once; the poll stays the backstop.
  store?.watchTrust?.(() => void gateway.pollTrust());
  return { gateway, store };
}

/** Starts the gateway on Node: the HTTP listener first, then upstream discovery in parallel. */
export async function startGateway(options: StartOptions): Promise<RunningGateway> {
  const { config, log } = options;
  let bound: { host: string; port: number } | undefined;
  const { gateway, store } = await createNodeGateway(options, () => bound);
  // On Postgres a legacy session works on any instance (#15); elsewhere it stays where it was opened.
  const sessions = store?.sessionStore?.(config.gateway.sessionIdleSeconds * 1000);
  // On Postgres each instance registers where it is reached: a held MRTR retry is forwarded there.
  const instances = store?.instances?.();
  const { app, mcp } = createHttp(gateway, {
    ...(config.gateway.metricsPath ? { metrics: lazyPromExporter() } : {}),
    ...(sessions ? { sessions } : {}),
    ...(instances ? { forward: instances } : {}),
  });
  // POST /mcp straight from node:http; the rest through Hono's adapter, loaded when first needed.
  const other = () => import('@hono/node-server').then((m) => m.getRequestListener(app.fetch));
  // Repeated headers joined with ", ", as Headers.get does (the lane reads `req.headers`): Node
  // would keep the first Authorization or Host alone, and two of either must stay ambiguous.
  const server = createServer({ joinDuplicateHeaders: true }, httpLane(mcp, other, log));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.gateway.port, config.gateway.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  bound = { host: addr.address, port: addr.port };
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}/mcp`;
  if (instances) {
    const advertised = config.gateway.advertiseUrl ?? derivedOrigin(addr);
    if (advertised) {
      // The database answered a moment ago (migrations); if it does not now, the heartbeat retries.
      await instances
        .register(advertised)
        .catch((e) => log.warn('instances.register_failed', { error: describeError(e).slice(0, 300) }));
    } else
      log.warn('instances.not_advertised', {
        message:
          'bound to a wildcard address and gateway.advertiseUrl is not set: retries of calls held here cannot be forwarded from the other instances',
      });
  }
  const { statusPath } = config.gateway;
  log.info('gateway.listening', {
    url,
    servers: config.servers.length,
    auth: Boolean(config.gateway.auth),
    ...(statusPath !== false ? { status: `http://${host}:${addr.port}${statusPath}` } : {}),
  });
  if (config.gateway.auth === false) {
    log.warn('gateway.auth_disabled', {
      message: `AUTHENTICATION IS OFF ("auth": false): anyone who can reach ${url} can list and call every tool`,
    });
  }
  const ready = gateway.start();
  if (options.waitReady) await ready.then(() => gateway.settled());

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      log.info('gateway.stopping', { graceMs: config.gateway.shutdownGraceMs });
      // Out of the registry first: no retry is forwarded to an instance that is going away.
      await instances?.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      await gateway.close();
      // Drained calls may still be writing their responses: let connections finish on their
      // own briefly before cutting whatever is left.
      await Promise.race([closed, new Promise((r) => setTimeout(r, 1000).unref())]);
      server.closeAllConnections();
      await closed;
      log.info('gateway.stopped');
    })();
    return stopping;
  };
  return { gateway, server, url, stop };
}

/** Without a configured store, tokens live in memory: a login does not survive a restart. */
function memoryCredentials(config: Config, log: Logger): MemoryCredentialStore {
  if (config.servers.some((s) => s.auth?.mode === 'gateway' || s.auth?.mode === 'user')) {
    log.warn('oauth.memory_store', {
      message: 'no gateway.store is configured: upstream OAuth tokens are kept in memory and lost at restart',
    });
  }
  return new MemoryCredentialStore();
}

/** This instance's origin as the others reach it: the bound address, unless it is a wildcard. */
function derivedOrigin(addr: AddressInfo): string | undefined {
  if (addr.address === '0.0.0.0' || addr.address === '::') return undefined;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `http://${host}:${addr.port}`;
}
