import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { startWorker } from '../helpers/workerd.js';
import { gatewayScenarios, type StartGateway } from '../shared/scenarios.js';

const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/**
 * The Worker bundle in real workerd (Miniflare): the config is the MANIFOLD_CONFIG binding, the
 * JWKS the MANIFOLD_JWKS variable (named by `auth.jwksFile`), state the Durable Object's SQLite
 * storage under `persist`.
 */
const startWorkers: StartGateway = async ({ config, persist, jwks }) => {
  let dir = persist;
  if (dir === undefined) {
    dir = mkdtempSync(join(tmpdir(), 'manifold-do-'));
    made.push(dir);
  }
  const raw = structuredClone(config) as { gateway?: Record<string, unknown> };
  // workerd prints the Worker's log lines on stdout: errors only, unless asked for.
  if (!process.env.MANIFOLD_TEST_LOG) raw.gateway = { logLevel: 'error', ...raw.gateway };
  const vars: Record<string, string> = {};
  if (jwks) {
    raw.gateway = {
      ...raw.gateway,
      auth: { ...(raw.gateway?.auth as Record<string, unknown>), jwksFile: 'MANIFOLD_JWKS' },
    };
    vars.MANIFOLD_JWKS = JSON.stringify(jwks);
  }
  const worker = await startWorker({ config: raw, vars, persist: dir });
  const healthz = worker.url.replace(/\/mcp$/, '/healthz');
  return {
    url: worker.url,
    persist: worker.persist,
    stop: () => worker.stop(),
    health: async () => (await fetch(healthz)).json(),
  };
};

gatewayScenarios('workers', startWorkers);
