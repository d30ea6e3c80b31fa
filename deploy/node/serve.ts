import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { serve as honoServe, type ServerType } from '@hono/node-server';
import type { Config } from '../../src/config/types.js';
import { Gateway } from '../../src/gateway.js';
import type { Logger } from '../../src/log.js';
import { createApp } from '../../src/server/app.js';
import { type DisconnectHook, signalDisconnect } from '../../src/server/mcp.js';
import type { BackoffOptions } from '../../src/upstream/backoff.js';
import { nodePlatform } from './platform.js';
import { openSqliteStore } from './sqlite-store.js';

export interface RunningGateway {
  gateway: Gateway;
  server: ServerType;
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
}

/**
 * A client that goes away before its answer is complete, seen on the Node response itself: the
 * request's AbortSignal would do, but @hono/node-server makes one lazily per request, and an
 * AbortController costs more on Node 20 than the rest of a relayed call's bookkeeping.
 */
const nodeDisconnect: DisconnectHook = (c, listener) => {
  const res = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  if (!res) return signalDisconnect(c, listener);
  const onClose = () => {
    if (!res.writableFinished) listener();
  };
  res.once('close', onClose);
  return () => res.off('close', onClose);
};

/** Starts the gateway on Node: the HTTP listener first, then upstream discovery in parallel. */
export async function startGateway(options: StartOptions): Promise<RunningGateway> {
  const { config, log } = options;
  // Drift baselines and the catalog cache; a relative path is relative to the working directory.
  const store = config.gateway.store ? openSqliteStore(resolve(config.gateway.store.path)) : undefined;
  const gateway = new Gateway({
    config,
    ...(store ? { store } : {}),
    secrets: options.secrets ?? [],
    ...(options.trustPollMs ? { trustPollMs: options.trustPollMs } : {}),
    platform: nodePlatform(log, config.gateway),
    version: options.version,
    ...(config.gateway.cursorSecret
      ? { cursorSecret: new TextEncoder().encode(config.gateway.cursorSecret) }
      : {}),
    ...(options.backoff ? { backoff: options.backoff } : {}),
  });
  const app = createApp(gateway, { onDisconnect: nodeDisconnect });
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = honoServe({ fetch: app.fetch, port: config.gateway.port, hostname: config.gateway.host }, () =>
      resolve(s),
    );
    s.once('error', reject);
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}/mcp`;
  log.info('gateway.listening', { url, servers: config.servers.length, auth: Boolean(config.gateway.auth) });
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
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      await gateway.close();
      // Drained calls may still be writing their responses: let connections finish on their
      // own briefly before cutting whatever is left.
      await Promise.race([closed, new Promise((r) => setTimeout(r, 1000).unref())]);
      const s = server as ServerType & { closeAllConnections?: () => void };
      s.closeAllConnections?.();
      await closed;
      log.info('gateway.stopped');
    })();
    return stopping;
  };
  return { gateway, server, url, stop };
}
