import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern, startReferenceHttp } from '../helpers/clients.js';
import { parsePromText } from '../helpers/prom-text.js';
import { type RunningWorker, startWorker } from '../helpers/workerd.js';

/**
 * The Worker has no prom-client: its /metrics is written by the core's text exporter, in real
 * workerd (Miniflare), in front of the reference fixture (a 2026-07-28 server) over streamable HTTP.
 */
describe('workers: GET /metrics', () => {
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  const workers: RunningWorker[] = [];
  const clients: AnyHandle[] = [];
  const config = (gateway: Record<string, unknown> = {}) => ({
    mcpServers: { d: { url: ref.url } },
    gateway: { allowedHosts: [`127.0.0.1:${ref.port}`], auth: false, logLevel: 'error', ...gateway },
  });

  beforeAll(async () => {
    ref = await startReferenceHttp();
  });
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    for (const w of workers) await w.stop().catch(() => {});
    await ref?.stop();
  });

  /**
   * /metrics is per isolate (#15): it counts what this isolate served (modern clients' calls to a
   * modern upstream); a legacy client's session and calls are its tenant object's.
   */
  it('counts the calls a modern client makes through the isolate, in the Prometheus text format', async () => {
    const worker = await startWorker({ config: config() });
    workers.push(worker);
    const legacy = await connectLegacy(worker.url);
    const modern = await connectModern(worker.url);
    clients.push(legacy, modern);
    await legacy.client.callTool({ name: 'd__test_simple_text', arguments: {} });
    await modern.client.callTool({ name: 'd__test_simple_text', arguments: {} });
    await modern.client.callTool({ name: 'd__test_simple_text', arguments: {} });
    await expect(modern.client.callTool({ name: 'd__missing', arguments: {} })).rejects.toThrow();
    const res = await fetch(new URL('/metrics', worker.url));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const m = parsePromText(await res.text());
    const alpha = { method: 'tools/call', server: 'd', tool: 'd__test_simple_text', verdict: 'allowed' };
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
    // The legacy client's session is in its tenant object, not in this isolate.
    expect(m.value('manifold_sessions')).toBe(0);
    // No prom-client in a Worker: the gateway's own families only.
    expect(m.families.has('manifold_process_cpu_seconds_total')).toBe(false);
  });

  it('metricsPath false: 404', async () => {
    const worker = await startWorker({ config: config({ metricsPath: false }) });
    workers.push(worker);
    expect((await fetch(new URL('/metrics', worker.url))).status).toBe(404);
  });
});
