import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { buildWorkerBundle, workerOptions } from '../bench/scale.mjs';
import { ROOT } from './harness.js';

export const WORKER_BUNDLE = join(ROOT, 'dist-workers/worker.js');

/** The Worker bundle (`npm run build:workers`, built unless a minute old; see `buildWorkerBundle`). */
export function buildWorker(): string {
  return buildWorkerBundle(ROOT, 60_000);
}

/**
 * The deployment's own compatibility date, flags and Durable Object bindings (wrangler.jsonc), so
 * the tests run the Worker as it is deployed: `enable_request_signal` among the flags is what lets
 * a client's close abort the incoming request's signal (cancellation, docs/deploy-workers.md).
 */
const DEPLOYED = workerOptions(join(ROOT, 'deploy/workers/wrangler.jsonc'));

export type ObjectBinding = 'UPSTREAMS' | 'TENANTS' | 'MANIFOLD';

export interface RunningWorker {
  url: string;
  persist: string;
  /** Requests an object has received (not counting this read), by binding and name (#15 layout). */
  objectRequests(binding: ObjectBinding, name: string): Promise<number>;
  /** The same, by path. */
  objectPaths(binding: ObjectBinding, name: string): Promise<Record<string, number>>;
  /** A request straight to one object, as the Worker would send it (internal routes included). */
  objectFetch(
    binding: ObjectBinding,
    name: string,
    path: string,
    headers?: Record<string, string>,
  ): Promise<{ status: number; json(): Promise<unknown> }>;
  stop(): Promise<void>;
}

/**
 * The Worker in real workerd (Miniflare), with its Durable Object persisted under `persist`, so
 * a second start with the same directory is a restart of the same deployment.
 */
export async function startWorker(options: {
  config: unknown;
  vars?: Record<string, string>;
  persist?: string;
  /**
   * An ES module Worker placed in front of the gateway (its `url` then reaches this one), with a
   * service binding GATEWAY to the gateway Worker: a caller that can cancel its request to the
   * gateway, as Cloudflare's edge does when a client goes away (test/workers/cancel.test.ts).
   */
  front?: string;
}): Promise<RunningWorker> {
  const persist = options.persist ?? mkdtempSync(join(tmpdir(), 'manifold-do-'));
  const gateway = {
    name: 'manifold',
    modules: true,
    scriptPath: buildWorker(),
    compatibilityDate: DEPLOYED.compatibilityDate,
    compatibilityFlags: DEPLOYED.compatibilityFlags,
    durableObjects: DEPLOYED.durableObjects,
    modulesRules: DEPLOYED.modulesRules,
    bindings: { MANIFOLD_CONFIG: JSON.stringify(options.config), ...options.vars },
  };
  const front = options.front && {
    name: 'front',
    modules: true,
    script: options.front,
    compatibilityDate: DEPLOYED.compatibilityDate,
    serviceBindings: { GATEWAY: 'manifold' },
  };
  // The first Worker is the one Miniflare's URL reaches.
  const mf = new Miniflare({
    workers: front ? [front, gateway] : [gateway],
    durableObjectsPersist: persist,
    host: '127.0.0.1',
    port: 0,
  });
  const base = await mf.ready;
  const counts = async (binding: ObjectBinding, name: string) => {
    const ns = await mf.getDurableObjectNamespace(binding, 'manifold');
    const res = await ns.get(ns.idFromName(name)).fetch('https://manifold.internal/__manifold/requests');
    return (await res.json()) as { requests: number; paths: Record<string, number> };
  };
  return {
    url: new URL('/mcp', base).toString(),
    persist,
    async objectRequests(binding, name) {
      return (await counts(binding, name)).requests;
    },
    async objectPaths(binding, name) {
      return (await counts(binding, name)).paths;
    },
    async objectFetch(binding, name, path, headers = {}) {
      const ns = await mf.getDurableObjectNamespace(binding, 'manifold');
      return ns.get(ns.idFromName(name)).fetch(`https://manifold.internal${path}`, { headers });
    },
    stop: () => mf.dispose(),
  };
}
