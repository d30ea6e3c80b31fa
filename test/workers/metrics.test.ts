import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern, DRIFT } from '../helpers/clients.js';
import { stopChild } from '../helpers/harness.js';
import { parsePromText } from '../helpers/prom-text.js';
import { type RunningWorker, startWorker } from '../helpers/workerd.js';

/**
 * The Worker has no prom-client: its /metrics is written by the core's text exporter, in real
 * workerd (Miniflare), in front of the drift fixture over streamable HTTP.
 */
describe('workers: GET /metrics', () => {
  let dir: string;
  let upstream: ChildProcess;
  let port: number;
  const workers: RunningWorker[] = [];
  const clients: AnyHandle[] = [];
  const config = (gateway: Record<string, unknown> = {}) => ({
    mcpServers: { d: { url: `http://127.0.0.1:${port}/mcp` } },
    gateway: { allowedHosts: [`127.0.0.1:${port}`], auth: false, logLevel: 'error', ...gateway },
  });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-metrics-workers-'));
    const toolsFile = join(dir, 'tools.json');
    writeFileSync(
      toolsFile,
      JSON.stringify([{ name: 'alpha', description: 'Alpha.', inputSchema: { type: 'object' } }]),
    );
    upstream = spawn(process.execPath, [DRIFT, '--http'], {
      env: { ...process.env, DRIFT_TOOLS_FILE: toolsFile },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    port = await new Promise<number>((res, rej) => {
      upstream.once('exit', (code) => rej(new Error(`drift server exited with ${code}`)));
      upstream.stdout?.once('data', (d) => res(Number(String(d).trim())));
    });
    upstream.stdout?.resume();
  });
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    for (const w of workers) await w.stop().catch(() => {});
    if (upstream) await stopChild(upstream);
    rmSync(dir, { recursive: true, force: true });
  });

  it('counts the calls of a legacy and a modern client, in the Prometheus text format', async () => {
    const worker = await startWorker({ config: config() });
    workers.push(worker);
    const legacy = await connectLegacy(worker.url);
    const modern = await connectModern(worker.url);
    clients.push(legacy, modern);
    await legacy.client.callTool({ name: 'd__alpha', arguments: {} });
    await modern.client.callTool({ name: 'd__alpha', arguments: {} });
    await expect(legacy.client.callTool({ name: 'd__missing', arguments: {} })).rejects.toThrow();
    const res = await fetch(new URL('/metrics', worker.url));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const m = parsePromText(await res.text());
    const alpha = { method: 'tools/call', server: 'd', tool: 'd__alpha', verdict: 'allowed' };
    expect(m.value('manifold_requests_total', alpha)).toBe(2);
    expect(
      m.value('manifold_requests_total', { ...alpha, server: '', tool: 'other', verdict: 'denied' }),
    ).toBe(1);
    expect(
      m.value('manifold_request_duration_seconds_count', {
        method: 'tools/call',
        server: 'd',
        verdict: 'allowed',
      }),
    ).toBe(2);
    expect(m.value('manifold_request_bytes_out_total', alpha)).toBeGreaterThan(0);
    expect(m.value('manifold_upstream_up', { server: 'd' })).toBe(1);
    expect(m.value('manifold_sessions')).toBe(1);
    // No prom-client in a Worker: the gateway's own families only.
    expect(m.families.has('manifold_process_cpu_seconds_total')).toBe(false);
  });

  it('metricsPath false: 404', async () => {
    const worker = await startWorker({ config: config({ metricsPath: false }) });
    workers.push(worker);
    expect((await fetch(new URL('/metrics', worker.url))).status).toBe(404);
  });
});
