import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectModern, startReferenceHttp } from '../helpers/clients.js';
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
  let ref: Awaited<ReturnType<typeof startReferenceHttp>> | undefined;
  let worker: Awaited<ReturnType<typeof startWorker>> | undefined;
  afterAll(async () => {
    await worker?.stop();
    await ref?.stop();
  });

  it('GET / serves the page and /status.json the view, on the Worker', async () => {
    ref = await startReferenceHttp();
    const persist = mkdtempSync(join(tmpdir(), 'manifold-do-'));
    made.push(persist);
    worker = await startWorker({
      config: {
        mcpServers: { ref: { url: ref.url } },
        gateway: { allowedHosts: [`127.0.0.1:${ref.port}`], auth: false, logLevel: 'error' },
      },
      persist,
    });
    // The page is the isolate's (#15): a modern client's call to a modern upstream is served in
    // the isolate, so it is counted there (calls bridged to a legacy upstream are its object's).
    const client = await connectModern(worker.url, undefined, { name: 'status-workers' });
    await client.client.callTool({ name: 'ref__test_simple_text', arguments: {} });
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
        name: 'ref',
        state: 'ready',
        counts: expect.objectContaining({ tools: expect.any(Number) }),
      }),
    ]);
    expect(view.upstreams[0]!.counts.tools).toBeGreaterThan(0);
    expect(view.calls).toEqual([expect.objectContaining({ server: 'ref', total: 1 })]);
  });
});
