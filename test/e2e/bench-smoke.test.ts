import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { run } from '../helpers/dist.js';
import { ROOT } from '../helpers/harness.js';

// biome-ignore lint/suspicious/noExplicitAny: the bench's JSON, read field by field
type Obj = Record<string, any>;

// The bench keeps working: a smoke run (tiny loads) runs every section and prints every target.
// Its numbers are not judged here; timing belongs to `npm run bench`.
it('npm run bench (smoke) runs every section, prints its tables, and writes JSON only where asked', async () => {
  // The scale section starts a Postgres of its own from the binaries test/services.mjs installed.
  const dir = mkdtempSync(join(tmpdir(), 'manifold-bench-smoke-'));
  try {
    const json = join(dir, 'bench.json');
    const r = await run(process.execPath, [join(ROOT, 'test/bench/run.mjs'), '--smoke', '--json', json], {
      // The local section (#53) starts a few gateways more; a loaded machine needs the margin.
      timeoutMs: 380_000,
    });
    expect(r.status, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(readFileSync(json, 'utf8')) as Obj;
    const s = out.sections as Obj;
    expect(Object.keys(s)).toEqual([
      'calls',
      'memory',
      'scale',
      'list',
      'context',
      'search',
      'code',
      'everything',
      'cold',
      'startup',
      'big',
      'policy',
      'local',
    ]);

    // Every path answered, without errors, in every phase; the paired groups ran every path.
    const paths = s.calls.data.paths as Obj;
    expect(Object.keys(paths)).toEqual(['B0', 'B1', 'B2', 'B3', 'B4', 'B5', 'B6', 'B7', 'S1', 'S2', 'S3']);
    for (const [k, p] of Object.entries(paths)) {
      expect(p.p50Us, k).toBeGreaterThan(0);
      expect(p.latencyErrors, k).toBe(0);
      expect(p.requests, k).toBeGreaterThan(0);
      expect(p.errors + p.non2xx, k).toBe(0);
      expect(p.cpuPerCallUs, k).toBeGreaterThanOrEqual(0);
    }
    const paired = s.calls.data.paired as Obj;
    expect(paired.stdio.names).toEqual(['S1', 'S2', 'S3']);
    expect(paired.http.names).toEqual(['B1', 'B2', 'B3', 'B4', 'B7']);
    for (const g of [paired.stdio, paired.http]) {
      expect(g.errors).toBe(0);
      expect(g.perRound).toHaveLength(1);
      for (const v of g.perRound[0]) expect(v).toBeGreaterThan(0);
    }
    // Each era comparison has one upstream on both sides: S3/S2 stdio, B4/B2 legacy, B3/B7 modern.
    const at = (k: string) => paired.http.names.indexOf(k);
    const row = paired.http.perRound[0];
    expect(s.calls.data.modernToLegacy.B3.ratio).toBeCloseTo(row[at('B3')] / row[at('B7')], 1);
    expect(s.calls.data.modernToLegacy.B4.ratio).toBeCloseTo(row[at('B4')] / row[at('B2')], 1);

    expect(s.memory.data.rssSeriesMb).toHaveLength(11);
    expect(s.memory.data.idleSessionBytes).toBeGreaterThan(0);
    for (const [section, phases] of [
      ['node', ['one', 'two']],
      ['workers', ['object', 'isolate']],
    ] as const) {
      for (const p of phases) {
        const m = s.scale.data[section][p];
        expect(m.requests).toBeGreaterThan(0);
        expect(m.errors + m.non2xx + m.timeouts).toBe(0);
      }
    }
    expect(s.list.data.thousand.tools).toBe(1000);
    expect(s.list.data.fiveThousand.tools).toBe(5000);
    expect(s.context.data.withBudget.bytes).toBeLessThan(s.context.data.withoutBudget.bytes);
    expect(s.search.data[0]).toMatchObject({ tools: 1005, fullListed: 1005, searchListed: 3 });
    expect(s.code.data.perCall.direct).toBeGreaterThan(0);
    // One ratio per paired round, and the median inside its interval.
    expect(s.code.data.ratios).toHaveLength(2);
    expect(s.code.data.interval[0]).toBeLessThanOrEqual(s.code.data.ratio);
    expect(s.code.data.interval[1]).toBeGreaterThanOrEqual(s.code.data.ratio);
    expect(s.code.data.context).toEqual([
      {
        catalog: 'five servers (17 tools)',
        full: expect.any(Number),
        search: expect.any(Number),
        code: expect.any(Number),
      },
    ]);
    expect(s.everything.data.throughput.non2xx).toBe(0);
    expect(s.everything.data.directSdkClientP50Us).toBeGreaterThan(0);
    expect(s.cold.data.map((c: Obj) => c.upstreams)).toEqual([1, 10]);
    expect(s.startup.data.configs.auth.medianMs).toBeGreaterThan(s.startup.data.floorMs);
    expect(s.big.data.stdio.gatewayMs).toBeGreaterThan(0);
    expect(['refused', 'truncated']).toContain(s.big.data.defaultCaps.http.outcome);
    // #51: both gateways answered every call, paired.
    expect(s.policy.data.errors).toBe(0);
    expect(s.policy.data.usPerCall[0]).toHaveLength(2);
    // Servers on demand (#53): a cold first call with and without a sandbox; one running of five.
    expect(s.local.data.cold.map((c: Obj) => c.firstMs > 0)).toEqual([true]);
    expect(s.local.data.memory.oneRunning.rssMb).toBeLessThan(s.local.data.memory.allRunning.rssMb);

    // #48's targets, each printed (a smoke run judges none).
    const ids = Object.values(s).flatMap((x) => ((x as Obj).targets ?? []).map((t: Obj) => t.id));
    expect(ids).toEqual([
      'cpu-stdio',
      'cpu-http',
      'modern-vs-legacy',
      'latency-c1',
      'throughput-c16',
      'idle-sessions',
      'tools-list',
      'tools-list-5k',
      'code-10-calls',
      'cold-start-10',
      'startup',
      'big-result-stdio',
      'big-result-http',
      'big-result-default-caps',
      'policy-cpu',
    ]);
    expect(r.stdout).toContain('| Target | Measured | Met |');
    expect(r.stdout).toContain('| S3 | gateway: 2026-07-28 client -> stdio upstream |');
    expect(r.stdout).toContain('| Node, two instances |');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 400_000);

it('npm run bench --only runs the sections named, and refuses one that does not exist', async () => {
  const r = await run(process.execPath, [join(ROOT, 'test/bench/run.mjs'), '--smoke', '--only', 'startup']);
  expect(r.status, r.stderr.slice(-3000)).toBe(0);
  expect(r.stdout).toContain('Sections: startup.');
  // The speed probe runs at both ends, so two runs' ratios can be told comparable or not.
  const line =
    /Speed probe \(processes\.mjs; lower is faster\): (\d+) µs at the start, (\d+) µs at the end\./;
  const probe = line.exec(r.stdout);
  expect(probe, r.stdout.slice(0, 600)).not.toBeNull();
  expect(Number(probe![1])).toBeGreaterThan(0);
  expect(Number(probe![2])).toBeGreaterThan(0);
  expect(r.stdout).toContain('process start to listening < 200 ms');
  expect(r.stdout).not.toContain('| B2 |');
  const bad = await run(process.execPath, [join(ROOT, 'test/bench/run.mjs'), '--only', 'nope']);
  expect(bad.status).toBe(2);
  expect(bad.stderr).toContain('--only: no section nope');
}, 60_000);
