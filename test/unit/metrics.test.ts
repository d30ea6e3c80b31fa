import { describe, expect, it } from 'vitest';
import { promExporter } from '../../deploy/node/runtime/metrics.js';
import { buildCatalog, type Catalog } from '../../src/aggregate/catalog.js';
import { parseConfigObject } from '../../src/config/load.js';
import type { MetricFamily } from '../../src/observe/metrics.js';
import { textExporter } from '../../src/observe/metrics.js';
import type { RequestRecord } from '../../src/observe/record.js';
import { RequestMetrics } from '../../src/observe/request-metrics.js';
import { parsePromText } from '../helpers/prom-text.js';

/** A real catalog of `count` tools from one configured server `gh` (gh__t0, gh__t1, …). */
function catalogOf(count: number): Catalog {
  const parsed = parseConfigObject({ mcpServers: { gh: { command: 'x' } } }, {});
  if (!parsed.ok) throw new Error('bad config');
  const tools = Array.from({ length: count }, (_, i) => ({
    name: `t${i}`,
    description: `tool ${i}`,
    inputSchema: { type: 'object' as const },
  }));
  return buildCatalog([{ server: parsed.config.servers[0]!, tools }], 1);
}

const call = (target: string | null, over: Partial<RequestRecord> = {}): RequestRecord => ({
  method: 'tools/call',
  tenant: 'acme',
  subject: 'alice',
  server: target?.startsWith('gh__') ? 'gh' : null,
  target,
  verdict: 'allowed',
  durationMs: 2,
  bytesIn: 10,
  bytesOut: 100,
  ...over,
});

const render = async (families: MetricFamily[]) =>
  parsePromText((await promExporter().render(families)).body);

describe('request metrics: label cardinality', () => {
  it('the tool label names only tools of the catalog, at most the cap; the rest count as "other"', async () => {
    const catalog = catalogOf(10);
    const m = new RequestMetrics(() => catalog, { tools: 3 });
    for (let i = 0; i < 10; i++) m.observe(call(`gh__t${i}`));
    for (const unknown of ['gh__nope', 'evil__x', 'a'.repeat(128)])
      m.observe(call(unknown, { server: null, verdict: 'denied' }));
    // Calls to names already labelled keep their label once the cap is reached.
    m.observe(call('gh__t1'));
    const scrape = await render(m.families());
    const tools = new Set(scrape.find('manifold_requests_total').map((s) => s.labels.tool));
    expect(tools).toEqual(new Set(['gh__t0', 'gh__t1', 'gh__t2', 'other']));
    expect(
      scrape.value('manifold_requests_total', {
        method: 'tools/call',
        server: 'gh',
        tool: 'gh__t1',
        verdict: 'allowed',
      }),
    ).toBe(2);
    // Seven catalog tools past the cap, and three names that are not in the catalog at all.
    expect(scrape.sum('manifold_requests_total', { tool: 'other', verdict: 'allowed' })).toBe(7);
    expect(
      scrape.value('manifold_requests_total', {
        method: 'tools/call',
        server: '',
        tool: 'other',
        verdict: 'denied',
      }),
    ).toBe(3);
    expect(scrape.sum('manifold_requests_total')).toBe(14);
    expect(scrape.sum('manifold_request_bytes_in_total')).toBe(140);
    expect(scrape.sum('manifold_request_bytes_out_total')).toBe(1400);
  });

  it('a tool that leaves the catalog is "other" from then on; methods other than tools/call carry no tool', async () => {
    let catalog = catalogOf(2);
    const m = new RequestMetrics(() => catalog);
    m.observe(call('gh__t1'));
    catalog = catalogOf(1);
    m.observe(call('gh__t1'));
    m.observe(call('file:///etc/passwd', { method: 'resources/read', server: 'gh' }));
    const scrape = await render(m.families());
    expect(
      scrape.value('manifold_requests_total', {
        method: 'tools/call',
        server: 'gh',
        tool: 'gh__t1',
        verdict: 'allowed',
      }),
    ).toBe(1);
    expect(
      scrape.value('manifold_requests_total', {
        method: 'tools/call',
        server: 'gh',
        tool: 'other',
        verdict: 'allowed',
      }),
    ).toBe(1);
    expect(
      scrape.find('manifold_requests_total', { method: 'resources/read' }).map((s) => s.labels.tool),
    ).toEqual(['']);
  });

  it('runs of one series and changes between them are each counted where they belong', async () => {
    let catalog = catalogOf(3);
    const m = new RequestMetrics(() => catalog, { tools: 2 });
    // Runs of the same call, broken by a change of each field in turn, with fresh strings as a
    // request's own are.
    const fresh = (s: string) => [...s].join('');
    const sequence: RequestRecord[] = [
      call(fresh('gh__t0')),
      call(fresh('gh__t0')),
      call(fresh('gh__t0'), { verdict: 'denied' }),
      call(fresh('gh__t0')),
      call(fresh('gh__t1')),
      call(fresh('gh__t1'), { method: 'prompts/get' }),
      call(fresh('gh__t1')),
      // past the cap of two tool names: "other", as often as it comes
      call(fresh('gh__t2')),
      call(fresh('gh__t2')),
      call(fresh('gh__t0'), { server: null }),
    ];
    for (const r of sequence) m.observe(r);
    catalog = catalogOf(1);
    // The same call as the last one but under the new catalog, where gh__t0 stays and gh__t1 is gone.
    m.observe(call(fresh('gh__t0'), { server: null }));
    m.observe(call(fresh('gh__t1')));
    const scrape = await render(m.families());
    const count = (labels: Record<string, string>) => scrape.value('manifold_requests_total', labels);
    expect(count({ method: 'tools/call', server: 'gh', tool: 'gh__t0', verdict: 'allowed' })).toBe(3);
    expect(count({ method: 'tools/call', server: 'gh', tool: 'gh__t0', verdict: 'denied' })).toBe(1);
    expect(count({ method: 'tools/call', server: 'gh', tool: 'gh__t1', verdict: 'allowed' })).toBe(2);
    expect(count({ method: 'prompts/get', server: 'gh', tool: '', verdict: 'allowed' })).toBe(1);
    expect(count({ method: 'tools/call', server: 'gh', tool: 'other', verdict: 'allowed' })).toBe(3);
    expect(count({ method: 'tools/call', server: '', tool: 'gh__t0', verdict: 'allowed' })).toBe(2);
    expect(scrape.sum('manifold_requests_total')).toBe(12);
    expect(scrape.sum('manifold_request_bytes_out_total')).toBe(1200);
  });

  it('rate-limit refusals are counted per tenant, at most the cap of tenants, names clipped', async () => {
    const m = new RequestMetrics(() => catalogOf(1), { tenants: 2 });
    const limited = (tenant: string) =>
      m.observe(call('gh__t0', { tenant, verdict: 'denied', reason: 'ERR_RATE_LIMITED', bytesOut: 0 }));
    const long = `t${'x'.repeat(200)}`;
    limited('a"b\\c\nd');
    limited(long);
    limited('c');
    limited('d');
    limited(long);
    // A refusal for another reason is not a rate-limit refusal.
    m.observe(call('gh__t0', { verdict: 'denied', reason: 'ERR_TOOL_UNKNOWN' }));
    const scrape = await render(m.families());
    const byTenant = Object.fromEntries(
      scrape.find('manifold_rate_limited_total').map((s) => [s.labels.tenant, s.value]),
    );
    expect(byTenant).toEqual({ 'a"b\\c\nd': 1, [long.slice(0, 64)]: 2, other: 2 });
  });
});

describe('request metrics: latency histogram', () => {
  it('buckets in seconds from 1 ms to 60 s, cumulative, with the sum and count', async () => {
    const m = new RequestMetrics(() => catalogOf(1));
    for (const durationMs of [0, 1, 3, 700, 70_000]) m.observe(call('gh__t0', { durationMs }));
    const scrape = await render(m.families());
    const labels = { method: 'tools/call', server: 'gh', verdict: 'allowed' };
    const bucket = (le: string) =>
      scrape.value('manifold_request_duration_seconds_bucket', { ...labels, le });
    expect(bucket('0.001')).toBe(2);
    expect(bucket('0.0025')).toBe(2);
    expect(bucket('0.005')).toBe(3);
    expect(bucket('1')).toBe(4);
    expect(bucket('60')).toBe(4);
    expect(bucket('+Inf')).toBe(5);
    expect(scrape.value('manifold_request_duration_seconds_count', labels)).toBe(5);
    expect(scrape.value('manifold_request_duration_seconds_sum', labels)).toBeCloseTo(70.704, 6);
    expect(scrape.families.get('manifold_request_duration_seconds')?.type).toBe('histogram');
  });
});

describe('the Node exporter (prom-client)', () => {
  it("adds prom-client's default metrics with the manifold_ prefix, in the Prometheus text format", async () => {
    const exposition = await promExporter().render([]);
    expect(exposition.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    const scrape = parsePromText(exposition.body);
    expect(scrape.families.get('manifold_process_cpu_seconds_total')?.type).toBe('counter');
    expect(scrape.families.get('manifold_nodejs_eventloop_lag_seconds')?.type).toBe('gauge');
    expect(scrape.value('manifold_process_resident_memory_bytes')).toBeGreaterThan(0);
    // Loaded by the first scrape, it still reports the CPU this process spent before it.
    const spent = process.cpuUsage();
    expect(scrape.value('manifold_process_cpu_seconds_total')).toBeGreaterThanOrEqual(
      (spent.user + spent.system) / 1e6 - 0.5,
    );
  });

  it('the test parser refuses what a scraper would refuse', () => {
    const head = '# HELP m_total x\n# TYPE m_total counter\n';
    expect(() => parsePromText(`${head}m_total 1\n`)).not.toThrow();
    for (const bad of [
      `${head}m_total{a="1"} one\n`,
      `${head}m_total{a=1} 1\n`,
      `${head}m_total{a="1"} 1\nm_total{a="1"} 2\n`,
      'n_total 1\n',
      `${head}m_total 1`,
      `${head}m total 1\n`,
      '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
    ]) {
      expect(() => parsePromText(bad), JSON.stringify(bad)).toThrow();
    }
  });
});

describe('the core text exporter (the Worker)', () => {
  it('writes the same families and samples as prom-client, escapes included', async () => {
    const m = new RequestMetrics(() => catalogOf(3));
    m.observe(call('gh__t0', { durationMs: 7 }));
    m.observe(call('gh__t1', { verdict: 'error', durationMs: 70_000 }));
    m.observe(call('gh__t2', { tenant: 'we"ird\\ten\nant', verdict: 'denied', reason: 'ERR_RATE_LIMITED' }));
    const families = [
      ...m.families(),
      {
        name: 'manifold_odd_help',
        help: 'a \\ b\nc',
        type: 'gauge' as const,
        samples: [{ name: 'manifold_odd_help', labels: {}, value: Number.NaN }],
      },
    ];
    const ours = await textExporter().render(families);
    expect(ours.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    const a = parsePromText(ours.body);
    const b = parsePromText((await promExporter().render(families)).body);
    const mine = (s: { name: string }) => !/^manifold_(process|nodejs)_/.test(s.name);
    expect(a.samples).toEqual(b.samples.filter(mine));
    expect([...a.families]).toEqual([...b.families].filter(([name]) => mine({ name })));
    expect(a.value('manifold_rate_limited_total', { tenant: 'we"ird\\ten\nant' })).toBe(1);
    // Byte for byte, the gateway's part of prom-client's output (which writes NaN as "Nan").
    const body = (await promExporter().render(families)).body;
    expect(body.includes(ours.body.replace('NaN', 'Nan'))).toBe(true);
  });
});
