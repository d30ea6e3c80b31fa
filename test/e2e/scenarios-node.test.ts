import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { loadConfigFile } from '../../deploy/node/cli/load.js';
import { startGateway } from '../../deploy/node/http/serve.js';
import { createJsonLogger } from '../../src/lib/log.js';
import { gatewayScenarios, type StartGateway } from '../shared/scenarios.js';

const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/**
 * The Node gateway in this process, started the way `manifold serve` starts it: the config goes
 * through a file and loadConfigFile (which reads jwksFile), state lives in SQLite under `persist`.
 */
const startNode: StartGateway = async ({ config, persist, jwks }) => {
  let dir = persist;
  if (dir === undefined) {
    dir = mkdtempSync(join(tmpdir(), 'manifold-node-'));
    made.push(dir);
  }
  const raw = structuredClone(config) as { gateway?: Record<string, unknown> };
  const gateway: Record<string, unknown> = { ...raw.gateway, store: { path: join(dir, 'state.db') } };
  // Scratch files (config, JWKS) go next to, not inside, the persisted directory's state.
  const scratch = mkdtempSync(join(tmpdir(), 'manifold-node-config-'));
  made.push(scratch);
  if (jwks) {
    const jwksFile = join(scratch, 'jwks.json');
    writeFileSync(jwksFile, JSON.stringify(jwks));
    gateway.auth = { ...(gateway.auth as Record<string, unknown>), jwksFile };
  }
  raw.gateway = gateway;
  const file = join(scratch, 'manifold.json');
  writeFileSync(file, JSON.stringify(raw));
  const loaded = loadConfigFile(file, process.env);
  loaded.config.gateway.port = 0;
  const log = createJsonLogger({
    level: 'warn',
    redact: loaded.secrets,
    write: (line) => {
      if (process.env.MANIFOLD_TEST_LOG) process.stderr.write(`${line}\n`);
    },
  });
  const running = await startGateway({
    config: loaded.config,
    secrets: loaded.secrets,
    log,
    version: 'test',
    // Like a Worker: reachable at once; tools/list waits for the first round (or the stored catalog).
    waitReady: false,
  });
  const healthz = running.url.replace(/\/mcp$/, '/healthz');
  return {
    url: running.url,
    persist: dir,
    stop: () => running.stop(),
    health: async () => (await fetch(healthz)).json(),
  };
};

gatewayScenarios('node', startNode);
