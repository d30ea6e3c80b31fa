import { DurableObject } from 'cloudflare:workers';
import { formatIssues, parseConfig } from '../../src/config/index.js';
import type { Config } from '../../src/config/types.js';
import { Gateway } from '../../src/gateway.js';
import { textExporter } from '../../src/metrics/text.js';
import { createApp } from '../../src/server/app.js';
import { durableObjectStore } from './do-store.js';
import { workersLogger, workersPlatform } from './platform.js';

export interface Env {
  MANIFOLD: DurableObjectNamespace<ManifoldGateway>;
  /** The same JSON config as Node's manifold.json (a secret or a variable). */
  MANIFOLD_CONFIG?: string;
  /** A JWK Set for gateway.auth, standing in for jwksFile (there is no file system). */
  MANIFOLD_JWKS?: string;
  [key: string]: unknown;
}

const VERSION = '0.1.0';

function configError(status: number, message: string): Response {
  return new Response(JSON.stringify({ error: message }), {
    status,
    headers: { 'content-type': 'application/json' },
  });
}

/**
 * The gateway lives in one Durable Object. Upstream connections (SDK clients with open streams)
 * outlive a single request, which a plain Worker isolate forbids but a Durable Object allows; and
 * every request of a session reaches the same object, wherever the Worker runs.
 */
export class ManifoldGateway extends DurableObject<Env> {
  private app: { fetch: (request: Request) => Response | Promise<Response> } | undefined;
  private failure: Response | undefined;

  private boot(): void {
    const vars: Record<string, string | undefined> = {};
    for (const [k, v] of Object.entries(this.env)) if (typeof v === 'string') vars[k] = v;
    const parsed = parseConfig(this.env.MANIFOLD_CONFIG ?? '', vars, 'MANIFOLD_CONFIG');
    if (!parsed.ok) {
      const text = formatIssues(parsed.errors, 'MANIFOLD_CONFIG');
      console.error(text);
      this.failure = configError(500, `invalid MANIFOLD_CONFIG:\n${text}`);
      return;
    }
    const config: Config = parsed.config;
    const log = workersLogger(config.gateway.logLevel, parsed.secrets);
    for (const w of parsed.warnings) log.warn('config.warning', { path: w.path, message: w.message });
    const auth = config.gateway.auth;
    if (auth === undefined) {
      // A Worker is on the public internet: the loopback-only default cannot apply here.
      this.failure = configError(
        500,
        'gateway.auth is required on Workers (or "auth": false to serve without authentication)',
      );
      return;
    }
    if (config.gateway.store && 'postgres' in config.gateway.store) {
      this.failure = configError(
        500,
        'gateway.store.postgres is for Node instances; on Workers the state lives in the Durable Object: remove "store" from MANIFOLD_CONFIG',
      );
      return;
    }
    if (auth && auth.jwksFile !== undefined) {
      if (!this.env.MANIFOLD_JWKS) {
        this.failure = configError(500, 'gateway.auth.jwksFile needs the MANIFOLD_JWKS variable on Workers');
        return;
      }
      auth.jwks = JSON.parse(this.env.MANIFOLD_JWKS) as { keys: Record<string, unknown>[] };
    }
    const gateway = new Gateway({
      config,
      platform: workersPlatform(log, config.gateway),
      version: VERSION,
      store: durableObjectStore(this.ctx.storage as never),
      secrets: parsed.secrets,
      ...(config.gateway.cursorSecret
        ? { cursorSecret: new TextEncoder().encode(config.gateway.cursorSecret) }
        : {}),
    });
    // Host names on Workers are the route's; check them only when the config lists some. No
    // prom-client here (it needs Node): the metrics are written by the core's own text exporter.
    this.app = createApp(gateway, {
      checkHost: config.gateway.hostnames.length > 0,
      ...(config.gateway.metricsPath ? { metrics: textExporter() } : {}),
    });
    void gateway.start();
  }

  override async fetch(request: Request): Promise<Response> {
    if (!this.app && !this.failure) {
      try {
        this.boot();
      } catch (e) {
        this.failure = configError(
          500,
          `gateway failed to start: ${e instanceof Error ? e.message : String(e)}`,
        );
      }
    }
    if (this.failure) return this.failure.clone();
    return this.app!.fetch(request);
  }
}

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    const stub = env.MANIFOLD.get(env.MANIFOLD.idFromName('gateway'));
    return stub.fetch(request);
  },
} satisfies ExportedHandler<Env>;
