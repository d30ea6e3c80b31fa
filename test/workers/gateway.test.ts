import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, describe, expect, it } from 'vitest';
import { type Spawned, startEverythingHttp } from '../helpers/harness.js';
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

/**
 * The status page (#16) from the same `src/` in real workerd: the page, its script and the JSON
 * view, with a call made through the Worker counted in the view's recent calls.
 */
describe('workers: status page', () => {
  let everything: Spawned | undefined;
  let worker: Awaited<ReturnType<typeof startWorker>> | undefined;
  afterAll(async () => {
    await worker?.stop();
    await everything?.stop();
  });

  it('GET / serves the page and /status.json the view, on the Worker', async () => {
    everything = await startEverythingHttp('streamableHttp');
    const persist = mkdtempSync(join(tmpdir(), 'manifold-do-'));
    made.push(persist);
    worker = await startWorker({
      config: {
        mcpServers: { everything: { url: everything.url } },
        gateway: { allowedHosts: [`127.0.0.1:${everything.port}`], auth: false, logLevel: 'error' },
      },
      persist,
    });
    const client = new Client({ name: 'status-workers', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(worker.url)));
    await client.callTool({ name: 'everything__echo', arguments: { message: 'hi' } });
    await client.close();
    const base = worker.url.replace(/\/mcp$/, '');
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await page.text()).toContain('<script src="/status.js" defer></script>');
    expect((await fetch(`${base}/status.js`)).status).toBe(200);
    const view = (await (await fetch(`${base}/status.json`)).json()) as {
      upstreams: { name: string; state: string; counts: { tools: number } }[];
      calls: { server: string; total: number }[];
    };
    expect(view.upstreams).toEqual([
      expect.objectContaining({
        name: 'everything',
        state: 'ready',
        counts: expect.objectContaining({ tools: expect.any(Number) }),
      }),
    ]);
    expect(view.upstreams[0]!.counts.tools).toBeGreaterThan(0);
    expect(view.calls).toEqual([expect.objectContaining({ server: 'everything', total: 1 })]);
  });
});
