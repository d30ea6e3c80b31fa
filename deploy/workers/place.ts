/**
 * One place of the Workers deployment (#15) that runs the core: the isolate, an upstream object,
 * a tenant object, or the single object of `MANIFOLD_ROUTE=object`. Each builds the same `Gateway`
 * and HTTP edge from the same config; they differ in which servers they hold, where their state
 * lives and how they open upstreams.
 */
import type { CallLimiterFactory } from '../../src/auth/shared-limit.js';
import type { Config } from '../../src/config/types.js';
import { Gateway } from '../../src/gateway/gateway.js';
import { textExporter } from '../../src/observe/metrics.js';
import { type AppOptions, createApp } from '../../src/server/http/app.js';
import type { StateStore } from '../../src/store/state.js';
import type { UpstreamAuth } from '../../src/upstream/oauth/auth-fetch.js';
import type { SessionOpener } from '../../src/upstream/session.js';
import { type Booted, type Env, INTERNAL, INTERNAL_ORIGIN } from './boot.js';
import type { SeenOrigin } from './oauth.js';
import { workersPlatform } from './platform.js';
import { VERSION } from './version.js';

export interface Place {
  gateway: Gateway;
  app: { fetch: (request: Request) => Response | Promise<Response> };
}

export function buildPlace(
  booted: Booted,
  options: {
    config?: Config;
    store?: StateStore;
    secret?: Uint8Array;
    openSession?: SessionOpener;
    /** Counts tenants' calls: the tenant objects' leases (tenant-limit.ts); the local bucket when absent. */
    callLimiter?: CallLimiterFactory;
    /** Protected upstreams' credentials (#19): the owner's managers, or remote ones (oauth.ts). */
    upstreamAuth?: ReadonlyMap<string, UpstreamAuth>;
    /** The origin this place's clients use: the base of the approval link (#52) without advertiseUrl. */
    origin?: SeenOrigin;
    app?: AppOptions;
  },
): Place {
  const config = options.config ?? booted.config;
  const seen = options.origin;
  const gateway = new Gateway({
    config,
    platform: workersPlatform(booted.log, config.gateway, booted.env),
    version: VERSION,
    secrets: booted.secrets,
    ...(options.store ? { store: options.store } : {}),
    ...(options.secret ? { cursorSecret: options.secret } : {}),
    ...(options.openSession ? { openSession: options.openSession } : {}),
    ...(options.callLimiter ? { callLimiter: options.callLimiter } : {}),
    ...(options.upstreamAuth?.size ? { upstreamAuth: options.upstreamAuth } : {}),
    ...(seen ? { clientOrigin: () => seen.current } : {}),
  });
  // Host names on Workers are the route's; check them only when the config lists some. No
  // prom-client here (it needs Node): the metrics are written by the core's own text exporter.
  const app = createApp(gateway, {
    checkHost: config.gateway.hostnames.length > 0,
    ...(config.gateway.metricsPath ? { metrics: textExporter() } : {}),
    ...options.app,
  });
  return { gateway, app };
}

/** The object that keeps the deployment's sealing key (a tenant-class object of its own name). */
export const KEY_OBJECT = 'manifold:deployment-key';

/**
 * The one key under every cursor, MRTR request state and task id, so that each isolate and object
 * accepts what another sealed: `gateway.cursorSecret` when configured, else a random key made once
 * and kept in a Durable Object, read once per isolate or object.
 */
export async function deploymentSecret(env: Env, config: Config): Promise<Uint8Array> {
  if (config.gateway.cursorSecret) return new TextEncoder().encode(config.gateway.cursorSecret);
  const stub = env.TENANTS.get(env.TENANTS.idFromName(KEY_OBJECT));
  const res = await stub.fetch(`${INTERNAL_ORIGIN}${INTERNAL}key`);
  if (!res.ok) throw new Error(`the deployment key object answered ${res.status}`);
  const { key } = (await res.json()) as { key: string };
  return Uint8Array.from(atob(key), (c) => c.charCodeAt(0));
}

/** The key object's side: made at the first request, then kept in its storage. */
export async function keptSecret(storage: DurableObjectStorage): Promise<Response> {
  let key = await storage.get<string>('deployment-key');
  if (key === undefined) {
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    key = btoa(String.fromCharCode(...bytes));
    await storage.put('deployment-key', key);
  }
  return Response.json({ key });
}
