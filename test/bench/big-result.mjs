// A tools/call whose result is one 20 MiB text block, through the floors (S1 over stdio, B1 over
// HTTP) and through the gateway, over stdio and streamable HTTP (run.mjs's `big` section).
//
// - Floors and gateway with the caps raised above the result: wall time of the client's POST
//   until the whole answer is read, and the proxy's peak RSS (VmHWM). Targets: time and peak RSS
//   each at most 2x the floor's. A fresh proxy per run (VmHWM is per process), a small call first
//   so that startup is not counted, the median of RUNS runs.
// - Gateway with the default caps: the call is refused or truncated, with memory bounded.
// - Beside the targets, not judged: the same gateway and floors with a 2026-07-28 client.
// Clients are 2025-11-25 sessions; auth and the store are off: this measures the result path, not
// the rest of a call. All traffic goes to 127.0.0.1; every wait is bounded.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { legacyInitialize } from './calls.mjs';
import { cpuMs, median, memoryMb, resetPeak, start, stop } from './processes.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HERE = join(ROOT, 'test/bench');
const UPSTREAM = join(HERE, 'fast-upstream.mjs');
const MiB = 1048576;
/** The raised caps: above a 20 MiB result (and its JSON escaping), on every cap on the path. */
const RAISED = 64 * MiB;
const ACCEPT = 'application/json, text/event-stream';
/** The defaults of maxResultBytes and maxUpstreamBodyBytes (src/config/defaults.ts). */
const DEFAULT_RESULT_BYTES = 65_536;
const DEFAULT_BODY_BYTES = 8 * MiB;
const DEFAULT_BOUND = 8;
const DEFAULT_BOUND_MB = (DEFAULT_BOUND * DEFAULT_BODY_BYTES) / MiB;
const CALL_TIMEOUT_MS = 120_000;
const log = (...m) => process.stderr.write(`[big-result] ${m.join(' ')}\n`);

async function post(url, body, headers) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
  });
  return { status: r.status, headers: r.headers, bytes: new Uint8Array(await r.arrayBuffer()) };
}

const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'big-result', version: '1' },
};

/** A client of one endpoint: a 2025-11-25 session, or (modern) 2026-07-28 requests without one. */
async function client(url, modern) {
  if (modern) {
    return (id, name, args) =>
      post(
        url,
        { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: MODERN_META } },
        { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': name },
      );
  }
  const init = await post(url, legacyInitialize('big-result'));
  if (init.status !== 200)
    throw new Error(`initialize: HTTP ${init.status} ${Buffer.from(init.bytes).toString().slice(0, 300)}`);
  const sid = init.headers.get('mcp-session-id');
  const headers = { ...(sid ? { 'mcp-session-id': sid } : {}), 'mcp-protocol-version': '2025-11-25' };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  return (id, name, args) =>
    post(url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }, headers);
}

/** The JSON-RPC message of an answer body (JSON, or the last message of an SSE stream). */
function answerOf(bytes) {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  if (text.startsWith('{')) return JSON.parse(text);
  const data = text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim())
    .filter(Boolean);
  return JSON.parse(data.at(-1));
}

/** What became of the big call: passed whole, truncated, refused (isError) or an error. */
function outcomeOf(status, bytes, expectChars) {
  let m;
  try {
    m = answerOf(bytes);
  } catch (e) {
    return { outcome: 'unreadable', detail: `HTTP ${status}: ${String(e).slice(0, 200)}` };
  }
  if (m.error)
    return { outcome: 'error', detail: `${m.error.code}: ${String(m.error.message).slice(0, 200)}` };
  const r = m.result ?? {};
  const content = Array.isArray(r.content) ? r.content : [];
  const chars = content.reduce((n, b) => n + (typeof b?.text === 'string' ? b.text.length : 0), 0);
  if (r.isError) return { outcome: 'refused', detail: String(content[0]?.text ?? '').slice(0, 200) };
  if (r._meta?.['manifold/truncated']) {
    const marker = String(content.at(-1)?.text ?? '').match(/\[… truncated: \d+ of \d+ bytes\]$/)?.[0];
    return { outcome: 'truncated', detail: `${chars} characters kept${marker ? `, ${marker}` : ''}` };
  }
  if (content.length === 1 && chars === expectChars)
    return { outcome: 'whole', detail: `${chars} characters` };
  return { outcome: 'wrong', detail: `${content.length} blocks, ${chars} characters` };
}

const round = (x, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

export async function bigResultBench({ cli, smoke = false } = {}) {
  const CLI = resolve(cli ?? join(ROOT, 'dist/manifold.js'));
  const BYTES = smoke ? 2 * MiB : 20 * MiB;
  const RUNS = smoke ? 1 : 3;
  const tmp = mkdtempSync(join(tmpdir(), 'manifold-big-'));
  const upEnv = { BIG_BYTES: String(BYTES) };
  const stdioUpstream = { command: process.execPath, args: [UPSTREAM, '--stdio'], env: upEnv };

  /** One fresh proxy, one warm-up call, one timed big call; the proxy is stopped after. */
  async function measure(what, launch, { tool, modern = false }) {
    const p = await launch();
    try {
      const call = await client(p.url, modern);
      const warm = await call(2, tool.replace(/big$/, 'echo'), { message: 'warm-up' });
      if (warm.status !== 200 || !Buffer.from(warm.bytes).toString().includes('warm-up'))
        throw new Error(
          `${what}: warm-up failed: HTTP ${warm.status} ${Buffer.from(warm.bytes).toString().slice(0, 300)}`,
        );
      // Startup's own transient peak (module compilation) is not the call's: where the kernel
      // allows (Linux >= 4.0), VmHWM is reset to the current RSS before the timed call.
      const reset = resetPeak(p.pid);
      const before = memoryMb(p.pid);
      const cpu0 = cpuMs(p.pid);
      const t0 = performance.now();
      const r = await call(3, tool, {});
      const ms = performance.now() - t0;
      const cpu = cpuMs(p.pid) - cpu0;
      const after = memoryMb(p.pid);
      const o = outcomeOf(r.status, r.bytes, BYTES);
      const row = {
        ms: round(ms),
        peakMb: round(after.hwm),
        baseMb: round(before.hwm),
        peakReset: reset,
        cpuMs: cpu,
        responseBytes: r.bytes.byteLength,
        ...o,
      };
      log(what, JSON.stringify(row));
      return row;
    } finally {
      await stop(p.child);
    }
  }

  async function gateway(mcpServers, gatewayConfig) {
    const path = join(tmp, `cfg-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(path, JSON.stringify({ mcpServers, gateway: { store: false, ...gatewayConfig } }));
    const g = start(
      process.execPath,
      [CLI, 'serve', '--config', path, '--port', '0', '--log-level', 'info'],
      {
        portFrom: 'log',
      },
    );
    const port = await g.port;
    g.quiet();
    return { child: g.child, pid: g.pid, url: `http://127.0.0.1:${port}/mcp` };
  }
  const proxy = async (file, env) => {
    const p = start(process.execPath, [join(HERE, file)], { env });
    const port = await p.port;
    p.quiet();
    return { child: p.child, pid: p.pid, url: `http://127.0.0.1:${port}/mcp` };
  };

  let up;
  try {
    // The HTTP upstream is shared by every HTTP run: its memory is not what is measured.
    up = start(process.execPath, [UPSTREAM], { env: upEnv });
    const upPort = await up.port;
    const upUrl = `http://127.0.0.1:${upPort}/mcp`;
    const allowedHosts = [`127.0.0.1:${upPort}`];
    const raised = { maxResultBytes: RAISED, maxUpstreamBodyBytes: RAISED };

    const launchers = {
      stdio: {
        floor: () =>
          proxy('stdio-passthrough.mjs', {
            CHILD: JSON.stringify([stdioUpstream.command, ...stdioUpstream.args]),
            ...upEnv,
          }),
        gateway: (caps) => gateway({ up: stdioUpstream }, caps),
      },
      http: {
        floor: () => proxy('passthrough-proxy.mjs', { TARGET: upUrl }),
        gateway: (caps) => gateway({ up: { url: upUrl } }, { allowedHosts, ...caps }),
      },
    };

    const result = {
      date: new Date().toISOString(),
      smoke,
      resultBytes: BYTES,
      runs: RUNS,
      auth: 'off',
      store: 'off',
      raisedCaps: raised,
      rule: `caps raised: time and peak RSS (VmHWM) each <= 2 x the floor's; default caps: refused or truncated, peak RSS growth <= ${DEFAULT_BOUND_MB} MB (${DEFAULT_BOUND} x maxUpstreamBodyBytes)`,
    };
    for (const path of ['stdio', 'http']) {
      const l = launchers[path];
      const floorRuns = [];
      const gatewayRuns = [];
      // Alternating, so that a slow minute of this VM does not land on one side only.
      for (let i = 0; i < RUNS; i++) {
        floorRuns.push(await measure(`${path} floor #${i + 1}`, l.floor, { tool: 'big' }));
        gatewayRuns.push(
          await measure(`${path} gateway #${i + 1}`, () => l.gateway(raised), { tool: 'up__big' }),
        );
      }
      const bad = [...floorRuns, ...gatewayRuns].find((r) => r.outcome !== 'whole');
      const floorMs = median(floorRuns.map((r) => r.ms));
      const floorPeakMb = median(floorRuns.map((r) => r.peakMb));
      const gatewayMs = median(gatewayRuns.map((r) => r.ms));
      const gatewayPeakMb = median(gatewayRuns.map((r) => r.peakMb));
      const timeRatio = round(gatewayMs / floorMs, 2);
      const memRatio = round(gatewayPeakMb / floorPeakMb, 2);
      result[path] = {
        floorMs,
        floorPeakMb,
        gatewayMs,
        gatewayPeakMb,
        timeRatio,
        memRatio,
        // VmHWM after the warm-up call, and the peak's growth over it during the big call.
        floorBaseMb: median(floorRuns.map((r) => r.baseMb)),
        gatewayBaseMb: median(gatewayRuns.map((r) => r.baseMb)),
        floorGrowthMb: median(floorRuns.map((r) => round(r.peakMb - r.baseMb))),
        gatewayGrowthMb: median(gatewayRuns.map((r) => round(r.peakMb - r.baseMb))),
        peakReset: [...floorRuns, ...gatewayRuns].every((r) => r.peakReset),
        floorCpuMs: median(floorRuns.map((r) => r.cpuMs)),
        gatewayCpuMs: median(gatewayRuns.map((r) => r.cpuMs)),
        ...(bad ? { failure: `${bad.outcome}: ${bad.detail}` } : {}),
        pass: !bad && timeRatio <= 2 && memRatio <= 2,
      };
    }
    // Bonus: a 2026-07-28 client (no session) through the same gateway, against the same floors.
    result.modern = {};
    for (const path of ['stdio', 'http']) {
      const runs = [];
      for (let i = 0; i < RUNS; i++)
        runs.push(
          await measure(`${path} gateway, modern client #${i + 1}`, () => launchers[path].gateway(raised), {
            tool: 'up__big',
            modern: true,
          }),
        );
      const bad = runs.find((r) => r.outcome !== 'whole');
      const gatewayMs = median(runs.map((r) => r.ms));
      const gatewayPeakMb = median(runs.map((r) => r.peakMb));
      const timeRatio = round(gatewayMs / result[path].floorMs, 2);
      const memRatio = round(gatewayPeakMb / result[path].floorPeakMb, 2);
      result.modern[path] = {
        gatewayMs,
        gatewayPeakMb,
        timeRatio,
        memRatio,
        ...(bad ? { failure: `${bad.outcome}: ${bad.detail}` } : {}),
        pass: !bad && timeRatio <= 2 && memRatio <= 2,
      };
    }
    // Default caps (maxResultBytes 64 KiB, maxUpstreamBodyBytes 8 MiB): refused or truncated, the
    // answer within the result cap, and the memory it took bounded by the caps, not the result:
    // at most DEFAULT_BOUND times maxUpstreamBodyBytes over the warm process. (A result read
    // whole takes about five copies of itself at the peak: over 100 MB for 20 MiB.)
    result.defaultCaps = {};
    for (const path of ['stdio', 'http']) {
      const r = await measure(`${path} gateway, default caps`, () => launchers[path].gateway({}), {
        tool: 'up__big',
      });
      const growthMb = round(r.peakMb - r.baseMb);
      result.defaultCaps[path] = {
        outcome: r.outcome,
        detail: r.detail,
        ms: r.ms,
        peakMb: r.peakMb,
        growthMb,
        boundMb: DEFAULT_BOUND_MB,
        responseBytes: r.responseBytes,
        pass:
          ['refused', 'truncated', 'error'].includes(r.outcome) &&
          r.responseBytes <= DEFAULT_RESULT_BYTES + 1024 &&
          growthMb <= DEFAULT_BOUND_MB,
      };
    }
    // The judged targets; the 2026-07-28 client runs are reported beside them (result.modern).
    result.pass =
      result.stdio.pass && result.http.pass && result.defaultCaps.stdio.pass && result.defaultCaps.http.pass;
    // A smoke run (2 MiB, one run) checks that the bench works: next to the processes' own ~50-100
    // MB, 2 MiB says nothing about the ratios.
    result.judged = !smoke;
    return result;
  } finally {
    if (up) await stop(up.child);
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** run.mjs's target rows. */
export function bigResultTargets(r) {
  const mib = `${round(r.resultBytes / MiB, 0)} MiB`;
  const path = (k) => {
    const x = r[k];
    const m = r.modern[k];
    return {
      id: `big-result-${k}`,
      rule: `a ${mib} result over ${k === 'stdio' ? 'stdio (vs S1)' : 'HTTP (vs B1)'}, caps raised: time and peak RSS each ≤ 2× the floor's`,
      measured: `gateway ${x.gatewayMs} ms / ${x.gatewayPeakMb} MB, floor ${x.floorMs} ms / ${x.floorPeakMb} MB: ${x.timeRatio}×, ${x.memRatio}× (median of ${r.runs}; a 2026-07-28 client ${m.timeRatio}×, ${m.memRatio}×)${x.failure ? `; ${x.failure}` : ''}`,
      pass: x.pass,
    };
  };
  const d = r.defaultCaps;
  return [
    path('stdio'),
    path('http'),
    {
      id: 'big-result-default-caps',
      rule: `a ${mib} result, default caps: refused (an error or isError) or truncated, peak RSS growth ≤ ${d.stdio.boundMb} MB`,
      measured: `stdio ${d.stdio.outcome}, +${d.stdio.growthMb} MB; HTTP ${d.http.outcome}, +${d.http.growthMb} MB`,
      pass: d.stdio.pass && d.http.pass,
    },
  ];
}
