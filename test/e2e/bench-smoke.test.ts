import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { ensureRunner } from '../helpers/conformance.js';
import { ROOT } from '../helpers/harness.js';

// The bench keeps working: a smoke run (tiny durations) produces every section. Its numbers are
// not judged here; timing belongs to `npm run bench`.
it('npm run bench (smoke) runs every phase and writes JSON and Markdown results', () => {
  // The scale section starts a Postgres of its own from the binaries test/services.mjs installed.
  // The start-up section reports the CLI on test/tools' Node 24 as well.
  ensureRunner();
  const out = mkdtempSync(join(tmpdir(), 'manifold-bench-smoke-'));
  try {
    const r = spawnSync(process.execPath, [join(ROOT, 'test/bench/run.mjs'), '--smoke', '--out', out], {
      encoding: 'utf8',
      timeout: 240_000,
    });
    expect(r.status, r.stderr.slice(-3000)).toBe(0);
    const json = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8'));
    for (const k of ['B0', 'B1', 'B2', 'B3', 'B4', 'B5', 'B6', 'B7']) {
      expect(json.latencyC1[k].p50Us).toBeGreaterThan(0);
      expect(json.latencyC1[k].errors).toBe(0);
      expect(json.throughputC16[k].requests).toBeGreaterThan(0);
      expect(json.throughputC16[k].non2xx).toBe(0);
    }
    // B3 and B7 really reach a 2026-07-28 upstream, and B4 a legacy one.
    expect(json.upstreamEras).toEqual({ fast: 'legacy', fastm: 'modern', sfast: 'legacy' });
    // server-everything over stdio, through the gateway and directly.
    expect(json.stdioEverything.throughputC16.requests).toBeGreaterThan(0);
    expect(json.stdioEverything.throughputC16.non2xx).toBe(0);
    expect(json.stdioEverything.latencyC1.errors).toBe(0);
    expect(json.stdioEverything.directSdkClientP50Us).toBeGreaterThan(0);
    expect(json.toolsList.tools).toBe(1000);
    expect(json.context.withoutBudget.tools).toBe(900);
    expect(json.context.withBudget.bytes).toBeLessThan(json.context.withoutBudget.bytes);
    // Tool search: the search-mode listing holds the three meta-tools, and a search answers.
    expect(json.search[0]).toMatchObject({ tools: 1005, fullListed: 1005, searchListed: 3 });
    expect(json.search[0].searchP50Us).toBeGreaterThan(0);
    expect(json.search[0].searchListBytes).toBeLessThan(json.search[0].fullListBytes);
    expect(json.coldStart.gateway.map((g: { upstreams: number }) => g.upstreams)).toEqual([1, 10]);
    expect(json.memory.rssSeriesMb.length).toBe(11);
    // Measured on the heap after full collections in a gateway started for it.
    expect(json.memory.idleSessionBytes).toBeGreaterThan(0);
    expect(json.throughputC16.B2.rounds).toBe(1);
    expect(Object.keys(json.targets).sort()).toEqual([
      'addedLatency',
      'bigResult',
      'coldStart',
      'floorCpu',
      'floorLatency',
      'floorThroughput',
      'idleSessions',
      'memory',
      'modernCost',
      'modernStdio',
      'scaleCpu',
      'startup',
      'surfaceCost',
      'throughput',
      'toolsList',
      'toolsList5k',
    ]);
    expect(json.toolsList5k.tools).toBe(5000);
    expect(json.toolsList5k.cachedP50Us).toBeGreaterThan(0);
    // #18: the stdio floor and the gateway's stdio paths ran, with the machine's load recorded.
    for (const k of ['S1', 'S2', 'S3']) {
      expect(json.throughputC16[k].requests).toBeGreaterThan(0);
      expect(json.throughputC16[k].non2xx).toBe(0);
      expect(json.cpuPerCallUs[k]).toBeGreaterThan(0);
    }
    // #18: the paired rotation ran every path of both groups, without errors, and its ratios
    // (with their intervals) are what the floor and era targets read.
    expect(json.paired.stdio.names).toEqual(['S1', 'S2', 'S3']);
    expect(json.paired.http.names).toEqual(['B1', 'B2', 'B3', 'B4', 'B5', 'B6', 'B7']);
    for (const g of [json.paired.stdio, json.paired.http]) {
      expect(g.errors).toBe(0);
      expect(g.perRound).toHaveLength(1);
      // The hypervisor's share of the machine's CPU time in each round: a share, one per round.
      expect(g.stealShare).toHaveLength(1);
      expect(g.stealShare[0]).toBeGreaterThanOrEqual(0);
      expect(g.stealShare[0]).toBeLessThanOrEqual(1);
      for (const v of Object.values(g.cpuPerCallUs)) expect(v).toBeGreaterThan(0);
    }
    const s3 = json.targets.modernStdio.stdio;
    expect(s3.ratio).toBeCloseTo(json.paired.stdio.perRound[0][2] / json.paired.stdio.perRound[0][1], 1);
    // Each client-era pair has the same upstream: B4 vs B2 (legacy), B3 vs B7 (modern).
    const http = json.paired.http.perRound[0];
    const at = (k: string) => json.paired.http.names.indexOf(k);
    expect(json.targets.modernStdio.httpLegacyUpstream.ratio).toBeCloseTo(http[at('B4')] / http[at('B2')], 1);
    expect(json.targets.modernStdio.httpModernUpstream.ratio).toBeCloseTo(http[at('B3')] / http[at('B7')], 1);
    expect(json.targets.modernStdio.upstreamEra.ratio).toBeCloseTo(http[at('B7')] / http[at('B2')], 1);
    expect(json.targets.floorCpu.intervals.S2.low).toBeLessThanOrEqual(
      json.targets.floorCpu.intervals.S2.high,
    );
    expect(json.load.start).toHaveLength(3);
    expect(readFileSync(join(out, 'latest.md'), 'utf8')).toMatch(
      /Steal time .* per round: stdio up to \d+\.\d%/,
    );
    // #18: start to listening, the default and the JWT-auth config, against Node's own start.
    expect(json.startup.floorMs).toBeGreaterThan(0);
    expect(json.startup.configs.default.samplesMs).toHaveLength(3);
    expect(json.startup.configs.auth.medianMs).toBeGreaterThan(json.startup.floorMs);
    // On Node 24, with and without the module compile cache (reported, not judged).
    expect(json.startup.node24.withoutCacheMs).toBeGreaterThan(json.startup.floorMs);
    expect(json.startup.node24.withCacheMs).toBeGreaterThan(0);
    expect(readFileSync(join(out, 'latest.md'), 'utf8')).toContain('process start on Node 24');
    // #18: the big-result phase ran both transports and both cap settings.
    expect(json.bigResult.stdio.gatewayMs).toBeGreaterThan(0);
    expect(json.bigResult.http.floorPeakMb).toBeGreaterThan(0);
    expect(json.bigResult.defaultCaps.http.outcome).toBeTruthy();
    // The cold-start floor: the same children started together without the gateway.
    expect(json.coldStart.gateway[1].slowestTogetherMs).toBeGreaterThan(0);
    // #15: one and two Node instances on Postgres, and the Worker's two routes, all answered.
    for (const [section, phases] of [
      ['node', ['one', 'two']],
      ['workers', ['object', 'isolate']],
    ] as const) {
      for (const p of phases) {
        const m = json.scale[section][p];
        expect(m.requests).toBeGreaterThan(0);
        expect(m.errors + m.non2xx + m.timeouts).toBe(0);
        expect(m.cpuPerCallUs).toBeGreaterThan(0);
      }
      expect(json.scale[section].load.after).toHaveLength(3);
    }
    expect(json.scale.workers.durableObjects.length).toBeGreaterThan(0);
    for (const p of ['one', 'two'] as const) {
      expect(json.scale.node.sameRatePerInstance[p].requests).toBeGreaterThan(0);
      expect(json.scale.node.sameRatePerInstance[p].non2xx).toBe(0);
    }
    const md = readFileSync(join(out, 'latest.md'), 'utf8');
    expect(md).toContain('| S3 |');
    expect(md).toContain('| Node, two instances |');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}, 300_000);
