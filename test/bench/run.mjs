#!/usr/bin/env node
// npm run bench: the performance targets of #48, judged on ratios measured in one run on this
// machine, and the other figures worth watching beside them. Prints its tables on stdout (progress
// on stderr). All traffic goes to 127.0.0.1; every load is bounded in count and time.
//   --only a,b    run only these sections (SECTIONS below); the default is all of them
//   --smoke       tiny loads: proves that the bench works (test/e2e/bench-smoke.test.ts); not judged
//   --json FILE   also write the results as JSON
//   --out DIR     also write DIR/bench.json and DIR/bench.md (what was printed)
//   BENCH_GATEWAY_EXTRA='{"...":...}'  gateway settings merged into the measured gateways' config,
//                 to compare a change of setting in one run against another
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { bigResultBench, bigResultTargets } from './big-result.mjs';
import { ACCEPT, legacyInitialize, modernCall, modernMeta } from './calls.mjs';
import { localBench } from './local.mjs';
import {
  cpuMs,
  cpuUs,
  loadAverage,
  median,
  memoryMb,
  speedProbeUs,
  start,
  stop,
  stopAll,
} from './processes.mjs';
import { scaleNodeBench, scaleRows, scaleWorkersBench } from './scale.mjs';
import { startupBench } from './startup.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HERE = join(ROOT, 'test/bench');
const CLI = join(ROOT, 'dist/manifold.js');
const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const UPSTREAM = join(HERE, 'fast-upstream.mjs');

const SECTIONS = {
  calls: 'tools/call on every path: latency at c=1, throughput at c=16, CPU per call paired with the floors',
  memory: 'resident memory over many calls, and what an idle legacy session costs',
  scale: 'one Node instance against two on one Postgres; the Worker in Miniflare, object against isolate',
  list: 'cached tools/list of 1,000 tools, and of 5,000 with auth on (the first per principal, then cached)',
  context: 'the bytes of a 900-tool listing with and without the disclosure budget',
  search: 'search mode: manifold__search_tools over 1,000 and 10,000 tools',
  code: 'code mode: sandbox start, a 10-call program against 10 direct calls, context bytes by mode',
  everything: 'server-everything over stdio, through the gateway and from an SDK client directly',
  cold: 'discovery of 10 and 30 stdio upstreams against the same children started without the gateway',
  startup: 'process start to listening',
  big: 'a 20 MiB result, caps raised and default',
  policy:
    'tools/call with 20 policy rules and the secrets and pii guardrails on both phases, paired with none',
  local:
    'servers on demand: the cold first call of a lazy server, and 20 configured with 1 running against 20 running',
};

const args = process.argv.slice(2);
const option = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const smoke = args.includes('--smoke');
const only = option('--only')?.split(',').filter(Boolean) ?? Object.keys(SECTIONS);
const unknown = only.filter((s) => !(s in SECTIONS));
if (unknown.length > 0) {
  process.stderr.write(`--only: no section ${unknown.join(', ')}; the sections:\n`);
  for (const [name, what] of Object.entries(SECTIONS)) process.stderr.write(`  ${name.padEnd(10)} ${what}\n`);
  process.exit(2);
}
const jsonFile = option('--json');
const outDir = option('--out');
const extra = JSON.parse(process.env.BENCH_GATEWAY_EXTRA || '{}');

const D = smoke ? 0.5 : 5; // seconds of load per path in each phase
/** Latency and throughput alternate in rounds: this VM's speed drifts by a third over minutes. */
const ROUNDS = smoke ? 1 : 5;
/** The paired CPU phase: rounds, and calls per path in each (a stdio path runs twice as fast). */
const PAIRED_ROUNDS = smoke ? 1 : 24;
const PAIRED_AMOUNT = smoke ? { stdio: 300, http: 300 } : { stdio: 30_000, http: 15_000 };
const MEMORY_CALLS = smoke ? 2000 : 100_000;
const IDLE_SESSIONS = smoke ? 200 : 10_000;

const tmp = mkdtempSync(join(tmpdir(), 'manifold-bench-'));
const log = (...m) => process.stderr.write(`[bench] ${m.join(' ')}\n`);

/** Runs a script of this folder in its own process, within `limitMs`; resolves with its JSON line. */
function script(file, options, limitMs, nodeArgs = []) {
  const { child } = start(process.execPath, [...nodeArgs, join(HERE, file), JSON.stringify(options)]);
  child.stderr.pipe(process.stderr);
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
  return new Promise((res, rej) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) res(JSON.parse(out));
      else rej(new Error(`${file} exited ${code}`));
    }),
  );
}
const load = (o) => script('load.mjs', { minSamples: 20, ...o }, ((o.duration ?? 30) + 120) * 1000);
const rotate = (o) => script('rotate.mjs', o, 900_000);

async function rpc(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

/** Opens a 2025-11-25 session; the headers of its later requests. */
async function openSession(url, headers = {}) {
  const r = await rpc(url, legacyInitialize(), headers);
  if (r.status !== 200) throw new Error(`initialize ${r.status}: ${r.text.slice(0, 200)}`);
  const sid = r.headers.get('mcp-session-id');
  const h = { ...headers, ...(sid ? { 'mcp-session-id': sid } : {}), 'mcp-protocol-version': '2025-11-25' };
  await rpc(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  return { 'content-type': 'application/json', accept: ACCEPT, ...h };
}

/** `manifold serve` (the built CLI) on `config`, on a free port. */
async function manifold(config) {
  const path = join(tmp, `cfg-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(config));
  const g = start(process.execPath, [CLI, 'serve', '--config', path, '--port', '0', '--log-level', 'info'], {
    portFrom: 'log',
  });
  const port = await g.port;
  return { ...g, port, url: `http://127.0.0.1:${port}/mcp` };
}

/** A fast upstream (fast-upstream.mjs) over HTTP; its MCP URL. */
async function upstream(env = {}) {
  const u = start(process.execPath, [UPSTREAM], { env });
  const port = await u.port;
  return { ...u, port, url: `http://127.0.0.1:${port}/mcp`, host: `127.0.0.1:${port}` };
}

const callOf = (name, id = 7) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name, arguments: { message: 'hello' } },
  });
const listBody = JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/list', params: {} });

/** The bench's token issuer (ES256, a JWKS file) and the `gateway.auth` that trusts it. */
let issuer;
async function benchIssuer() {
  if (issuer) return issuer;
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench', alg: 'ES256', use: 'sig' };
  writeFileSync(join(tmp, 'jwks.json'), JSON.stringify({ keys: [jwk] }));
  const auth = {
    issuer: 'https://bench.issuer',
    audience: 'manifold-bench',
    jwksFile: join(tmp, 'jwks.json'),
  };
  /** A 2-hour token with this scope, for this subject. */
  const mint = (scope, subject) =>
    new SignJWT({ scope })
      .setProtectedHeader({ alg: 'ES256', kid: 'bench' })
      .setIssuer(auth.issuer)
      .setAudience(auth.audience)
      .setSubject(subject)
      .setIssuedAt()
      .setExpirationTime('2h')
      .sign(privateKey);
  issuer = { auth, jwk, mint };
  return issuer;
}

/**
 * What the calls, memory and scale sections share, started once: the fast upstreams (2025-11-25
 * and 2026-07-28, HTTP; and one over stdio), the floors (B1, S1), and the measured gateway (JWT
 * auth from a JWKS file, SQLite drift, the audit line) with every path's request.
 */
let shared;
async function core() {
  if (shared) return shared;
  const up = await upstream();
  const upModern = await upstream({ MODERN: '1' });
  const b1 = start(process.execPath, [join(HERE, 'passthrough-proxy.mjs')], { env: { TARGET: up.url } });
  const b1Url = `http://127.0.0.1:${await b1.port}/mcp`;
  const stdioChild = [process.execPath, UPSTREAM, '--stdio'];
  const s1 = start(process.execPath, [join(HERE, 'stdio-passthrough.mjs')], {
    env: { CHILD: JSON.stringify(stdioChild) },
  });
  const s1Url = `http://127.0.0.1:${await s1.port}/mcp`;

  const { auth, jwk, mint } = await benchIssuer();
  const token = await mint('tools:* prompts:* resources:*', 'bench-tenant');
  const config = {
    mcpServers: {
      fast: { url: up.url },
      fastm: { url: upModern.url },
      sfast: { command: stdioChild[0], args: stdioChild.slice(1) },
    },
    gateway: {
      allowedHosts: [up.host, upModern.host],
      store: { path: join(tmp, 'state.db') },
      auth,
      ...extra,
    },
  };
  const gw = await manifold(config);
  const session = await openSession(gw.url, { authorization: `Bearer ${token}` });
  const b3 = modernCall('fastm__echo');
  const b4 = modernCall('fast__echo');
  const s3 = modernCall('sfast__echo');
  const body = (method, params, id) => JSON.stringify({ jsonrpc: '2.0', id, method, params });
  const paths = {
    B0: { url: up.url, headers: await openSession(up.url), body: callOf('echo'), pid: up.pid },
    B1: { url: b1Url, headers: await openSession(b1Url), body: callOf('echo'), pid: b1.pid },
    B2: { url: gw.url, headers: session, body: callOf('fast__echo'), pid: gw.pid },
    B3: { url: gw.url, headers: b3.headers(token), body: b3.body, pid: gw.pid },
    B4: { url: gw.url, headers: b4.headers(token), body: b4.body, pid: gw.pid },
    B5: {
      url: gw.url,
      headers: session,
      body: body('prompts/get', { name: 'fast__greet', arguments: { who: 'bench' } }, 9),
      pid: gw.pid,
    },
    B6: {
      url: gw.url,
      headers: session,
      body: body('resources/read', { uri: 'bench://doc' }, 10),
      pid: gw.pid,
    },
    B7: { url: gw.url, headers: session, body: callOf('fastm__echo'), pid: gw.pid },
    S1: { url: s1Url, headers: await openSession(s1Url), body: callOf('echo'), pid: s1.pid },
    S2: { url: gw.url, headers: session, body: callOf('sfast__echo'), pid: gw.pid },
    S3: { url: gw.url, headers: s3.headers(token), body: s3.body, pid: gw.pid },
  };
  // Every path answers as it should before anything is timed.
  for (const [name, p] of Object.entries(paths)) {
    const r = await rpc(p.url, JSON.parse(p.body), p.headers);
    const needle = { B5: 'hello bench', B6: '"text":"hello"' }[name] ?? 'hello';
    if (r.status !== 200 || !r.text.includes(needle))
      throw new Error(`${name} did not answer: ${r.status} ${r.text.slice(0, 300)}`);
    if (['B3', 'B4', 'S3'].includes(name) && !r.text.includes('"resultType":"complete"'))
      throw new Error(`${name} is not a 2026-07-28 answer: ${r.text.slice(0, 300)}`);
  }
  const admin = await mint('manifold:admin', 'bench-admin');
  const health = await (
    await fetch(gw.url.replace(/\/mcp$/, '/healthz'), { headers: { authorization: `Bearer ${admin}` } })
  ).json();
  const eras = Object.fromEntries((health.upstreams ?? []).map((u) => [u.name, u.era]));
  if (eras.fastm !== 'modern' || eras.fast !== 'legacy')
    throw new Error(`the bench upstreams' eras are not as meant: ${JSON.stringify(eras)}`);
  gw.quiet();
  shared = { up, upModern, b1, s1, gw, config, auth, jwk, token, mint, paths, eras, b3 };
  return shared;
}

const pct = (x) => `${(x * 100).toFixed(0)}%`;
/** A paired ratio with its 95% interval. */
const span = (v) => `${pct(v.ratio)} (${pct(v.low)}–${pct(v.high)})`;

/**
 * The median of per-round ratios, and a 95% interval for it from the order statistics (at least
 * 95% coverage whatever the noise's shape). This VM's noise comes in bursts that hit a few
 * segments hard: a median is not moved by them, a mean is.
 */
function medianInterval(ratios) {
  const r = [...ratios].sort((x, y) => x - y);
  const n = r.length;
  const middle = n % 2 ? r[(n - 1) / 2] : Math.sqrt(r[n / 2 - 1] * r[n / 2]);
  // The largest k with P(Binomial(n, 1/2) < k) <= 2.5%: [r(k), r(n + 1 - k)] covers the median.
  let k = 0;
  for (let below = 0, term = 0.5 ** n; below + term <= 0.025; k++) {
    below += term;
    term = (term * (n - k)) / (k + 1);
  }
  k = Math.max(1, k);
  return { ratio: middle, low: r[k - 1], high: r[n - k] };
}

/** `a`'s CPU per call over `b`'s in one paired group, round by round (medianInterval). */
function paired(group, a, b) {
  const i = group.names.indexOf(a);
  const j = group.names.indexOf(b);
  return medianInterval(group.perRound.map((row) => row[i] / row[j]));
}

const PATHS = {
  B0: 'client straight to the HTTP upstream (2025-11-25)',
  B1: 'the HTTP floor: a 30-line pass-through proxy (node:http + undici)',
  B2: 'gateway: 2025-11-25 session client -> 2025-11-25 HTTP upstream',
  B3: 'gateway: 2026-07-28 client -> 2026-07-28 HTTP upstream',
  B4: 'gateway: 2026-07-28 client -> 2025-11-25 HTTP upstream',
  B5: "gateway: B2's session, prompts/get",
  B6: "gateway: B2's session, resources/read",
  B7: 'gateway: 2025-11-25 session client -> 2026-07-28 HTTP upstream',
  S1: 'the stdio floor: node:http to one JSON line on the same stdio upstream',
  S2: 'gateway: 2025-11-25 session client -> stdio upstream',
  S3: 'gateway: 2026-07-28 client -> stdio upstream',
};

/** tools/call on every path; #48's CPU, era, latency and throughput targets. */
async function callsSection() {
  const { paths } = await core();
  for (const p of Object.values(paths))
    await load({ mode: 'throughput', ...p, connections: 4, duration: smoke ? 0.3 : 2 });
  const latency = Object.fromEntries(
    Object.keys(paths).map((k) => [k, { samples: [], requests: 0, errors: 0 }]),
  );
  const throughput = Object.fromEntries(
    Object.keys(paths).map((k) => [
      k,
      { requests: 0, durationS: 0, errors: 0, non2xx: 0, timeouts: 0, cpuMs: 0 },
    ]),
  );
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, p] of Object.entries(paths)) {
      log('latency', name, `round ${round + 1}/${ROUNDS}`);
      const r = await load({ mode: 'latency', ...p, duration: D / ROUNDS, warmup: 20, samples: true });
      latency[name].samples.push(...r.samples);
      latency[name].requests += r.requests;
      latency[name].errors += r.errors;
    }
    for (const [name, p] of Object.entries(paths)) {
      log('throughput', name, `round ${round + 1}/${ROUNDS}`);
      const cpu0 = cpuMs(p.pid);
      const r = await load({ mode: 'throughput', ...p, connections: 16, duration: D / ROUNDS });
      const a = throughput[name];
      a.cpuMs += cpuMs(p.pid) - cpu0;
      for (const k of ['requests', 'durationS', 'errors', 'non2xx', 'timeouts']) a[k] += r[k];
    }
  }
  const rows = {};
  for (const name of Object.keys(paths)) {
    const s = latency[name].samples.sort((a, b) => a - b);
    const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
    const t = throughput[name];
    rows[name] = {
      p50Us: Math.round(at(0.5)),
      p99Us: Math.round(at(0.99)),
      latencyRequests: latency[name].requests,
      latencyErrors: latency[name].errors,
      rps: Math.round(t.requests / t.durationS),
      requests: t.requests,
      errors: t.errors + t.timeouts,
      non2xx: t.non2xx,
      // Round robin, over the throughput phases; the targets read the paired phase below.
      cpuPerCallUs: Math.round((t.cpuMs * 1000) / Math.max(1, t.requests)),
    };
  }
  const groups = {};
  for (const [group, names] of [
    ['stdio', ['S1', 'S2', 'S3']],
    ['http', ['B1', 'B2', 'B3', 'B4', 'B7']],
  ]) {
    log('paired', group);
    const r = await rotate({
      targets: names.map((k) => paths[k]),
      rounds: PAIRED_ROUNDS,
      amount: PAIRED_AMOUNT[group],
      connections: 16,
    });
    groups[group] = {
      names,
      rounds: PAIRED_ROUNDS,
      callsPerSegment: PAIRED_AMOUNT[group],
      errors: r.errors,
      perRound: r.usPerCall.map((row) => row.map((v) => +v.toFixed(1))),
      stealShare: r.stealShare.map((v) => +v.toFixed(4)),
    };
    names.forEach((k, i) => {
      rows[k].pairedCpuPerCallUs = +(
        r.usPerCall.reduce((a, row) => a + row[i], 0) / r.usPerCall.length
      ).toFixed(1);
    });
  }
  const cpu = {
    S2: paired(groups.stdio, 'S2', 'S1'),
    S3: paired(groups.stdio, 'S3', 'S1'),
    B2: paired(groups.http, 'B2', 'B1'),
    B3: paired(groups.http, 'B3', 'B1'),
  };
  const era = {
    S3: paired(groups.stdio, 'S3', 'S2'),
    B4: paired(groups.http, 'B4', 'B2'),
    B3: paired(groups.http, 'B3', 'B7'),
  };
  const added = { B1: rows.B1.p50Us - rows.B0.p50Us, B2: rows.B2.p50Us - rows.B0.p50Us };
  const rps = { B2: rows.B2.rps / rows.B1.rps, S2: rows.S2.rps / rows.S1.rps };
  const within = (r) => r.ratio >= 0.95 && r.ratio <= 1.05;
  const maxSteal = Math.max(0, ...groups.stdio.stealShare, ...groups.http.stealShare);
  return {
    data: {
      paths: rows,
      paired: groups,
      cpuToFloor: cpu,
      modernToLegacy: era,
      addedP50Us: added,
      rpsToFloor: rps,
    },
    tables: [
      {
        title:
          'tools/call by path (CPU per call: the process that serves the path, paired phase where there is one)',
        head: ['Path', 'What', 'p50 c=1 (µs)', 'p99 c=1 (µs)', 'rps c=16', 'CPU per call (µs)'],
        rows: Object.entries(rows).map(([k, r]) => [
          k,
          PATHS[k],
          r.p50Us,
          r.p99Us,
          r.rps,
          r.pairedCpuPerCallUs ?? r.cpuPerCallUs,
        ]),
      },
    ],
    targets: [
      {
        id: 'cpu-stdio',
        rule: 'gateway CPU per tools/call, JWT auth and audit on, stdio upstream: ≤ 1.4× the floor (S2, S3 vs S1; aim 1.3×)',
        measured: `S2 ${span(cpu.S2)}, S3 ${span(cpu.S3)}`,
        pass: cpu.S2.ratio <= 1.4 && cpu.S3.ratio <= 1.4,
      },
      {
        id: 'cpu-http',
        rule: 'gateway CPU per tools/call, JWT auth and audit on, HTTP upstream: ≤ 1.4× the floor (B2, B3 vs B1; aim 1.3×)',
        measured: `B2 ${span(cpu.B2)}, B3 ${span(cpu.B3)}`,
        pass: cpu.B2.ratio <= 1.4 && cpu.B3.ratio <= 1.4,
      },
      {
        id: 'modern-vs-legacy',
        rule: "a 2026-07-28 client's call within 5% of a 2025-11-25 one's to the same upstream (S3 vs S2, B4 vs B2, B3 vs B7)",
        measured: `S3 ${span(era.S3)} of S2, B4 ${span(era.B4)} of B2, B3 ${span(era.B3)} of B7`,
        pass: within(era.S3) && within(era.B4) && within(era.B3),
      },
      {
        id: 'latency-c1',
        rule: 'added p50 latency at c=1: (B2 − B0) ≤ 1.5× the floor’s (B1 − B0)',
        measured: `B2 +${added.B2} µs, B1 +${added.B1} µs: ${pct(added.B2 / added.B1)}`,
        pass: added.B2 <= 1.5 * added.B1,
      },
      {
        id: 'throughput-c16',
        rule: 'throughput at c=16 ≥ 80% of the floor’s (B2 vs B1, S2 vs S1)',
        measured: `B2 ${pct(rps.B2)}, S2 ${pct(rps.S2)}`,
        pass: rps.B2 >= 0.8 && rps.S2 >= 0.8,
      },
    ],
    notes: [
      `CPU ratios: the median of ${PAIRED_ROUNDS} rounds of the paths in rotation (rotate.mjs), 95% interval in brackets; the hypervisor took up to ${(maxSteal * 100).toFixed(1)}% of the machine in a round.`,
      `Also: prompts/get (B5) ${pct(rows.B5.cpuPerCallUs / rows.B2.cpuPerCallUs)} and resources/read (B6) ${pct(rows.B6.cpuPerCallUs / rows.B2.cpuPerCallUs)} of B2's CPU per call (round robin).`,
    ],
  };
}

/** RSS over many calls (reported), and the idle-session target. */
async function memorySection() {
  const { gw, paths, config, token } = await core();
  // RSS moves with the collector's heap sizing: calls in chunks, the lowest of several readings
  // after each; a leak raises the floor of every later reading, GC slack does not.
  const settled = async () => {
    let low = Number.POSITIVE_INFINITY;
    for (let i = 0; i < (smoke ? 2 : 6); i++) {
      await new Promise((r) => setTimeout(r, 300));
      low = Math.min(low, memoryMb(gw.pid).rss);
    }
    return low;
  };
  const chunk = () => load({ mode: 'throughput', ...paths.B2, connections: 16, amount: MEMORY_CALLS / 10 });
  for (let i = 0; i < 3; i++) await chunk();
  const series = [await settled()];
  for (let i = 0; i < 10; i++) {
    await chunk();
    series.push(await settled());
  }
  const growthMb = +(Math.min(...series.slice(-3)) - Math.min(...series.slice(0, 3))).toFixed(1);
  // Idle sessions: the heap (plus external) after full collections, in a gateway started for it.
  const many = IDLE_SESSIONS + 200;
  const cost = await script(
    'session-cost.mjs',
    {
      config: {
        ...config,
        gateway: {
          ...config.gateway,
          store: { path: join(tmp, 'sessions.db') },
          // One principal opens them all: the per-principal and per-tenant bounds would evict.
          maxSessions: many,
          maxSessionsPerPrincipal: many,
          maxSessionsPerTenant: many,
        },
      },
      token,
      sessions: IDLE_SESSIONS,
    },
    600_000,
    ['--expose-gc'],
  );
  const tenThousandMb = +((cost.bytesPerSession * 10_000) / 1048576).toFixed(1);
  return {
    data: {
      calls: MEMORY_CALLS,
      rssSeriesMb: series.map((x) => +x.toFixed(1)),
      growthMb,
      idleSessions: IDLE_SESSIONS,
      idleSessionBytes: cost.bytesPerSession,
      tenThousandIdleMb: tenThousandMb,
    },
    targets: [
      {
        id: 'idle-sessions',
        rule: '10,000 idle legacy sessions < 20 MB (heap and external memory after GC)',
        measured: `${tenThousandMb} MB (${cost.bytesPerSession} B each, ${IDLE_SESSIONS} open at once)`,
        pass: tenThousandMb < 20,
      },
    ],
    notes: [
      `RSS over ${MEMORY_CALLS} B2 calls: ${growthMb >= 0 ? '+' : ''}${growthMb} MB (settled after each tenth: ${series.map((x) => x.toFixed(0)).join(', ')} MB).`,
    ],
  };
}

/** #15's scale figures, reported: Node on Postgres, one instance and two; the Worker's routes. */
async function scaleSection() {
  const { upModern, auth, jwk, b3, token } = await core();
  const helpers = { manifold, load, cpuMs, stop, rpc, log, loadAverage };
  const input = {
    upstreamUrl: upModern.url,
    allowedHost: upModern.host,
    auth,
    call: { body: b3.body, headers: b3.headers(token) },
    rounds: smoke ? 1 : 10,
    sameRateRounds: smoke ? 1 : 5,
    smoke,
    extra,
  };
  const data = {
    node: await scaleNodeBench(helpers, input),
    workers: await scaleWorkersBench(helpers, { ...input, root: ROOT, jwks: { keys: [jwk] } }),
  };
  return { data, tables: [scaleRows(data)] };
}

/** Fast upstreams of `tools` tools each, `n` of them; stopped by `close`. */
async function upstreams(n, env) {
  const ups = [];
  for (let i = 0; i < n; i++) ups.push(await upstream({ ...env, TOOL_PREFIX: `t${i}` }));
  return {
    servers: Object.fromEntries(ups.map((u, i) => [`s${i}`, { url: u.url }])),
    hosts: ups.map((u) => u.host),
    close: async () => {
      for (const u of ups) await stop(u.child);
    },
  };
}

/** Cached tools/list: 1,000 tools; 5,000 with auth on, the first listing per principal too. */
async function listSection() {
  const big = { store: false, catalog: { maxTools: 1_000_000 } };
  const thousand = await upstreams(10, { TOOLS: '100' });
  // The full listing is what this measures: no switch to search mode.
  const many = await manifold({
    mcpServers: thousand.servers,
    gateway: { ...big, allowedHosts: thousand.hosts, pageSize: 1000 },
  });
  const headers = await openSession(many.url);
  const tools = JSON.parse((await rpc(many.url, JSON.parse(listBody), headers)).text).result.tools.length;
  const cached = await load({ mode: 'latency', url: many.url, headers, body: listBody, duration: D });
  await stop(many.child);
  await thousand.close();

  const fiveK = await upstreams(10, { TOOLS: '500' });
  const { auth, mint } = await benchIssuer();
  const g = await manifold({
    mcpServers: fiveK.servers,
    gateway: { ...big, allowedHosts: fiveK.hosts, pageSize: 5000, auth },
  });
  const body = JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/list', params: { _meta: modernMeta } });
  const headersOf = (t, method = 'tools/list') => ({
    'content-type': 'application/json',
    accept: ACCEPT,
    authorization: `Bearer ${t}`,
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': method,
  });
  // The first listing waits for discovery: a principal of its own takes it, not a timed one.
  await rpc(g.url, JSON.parse(body), headersOf(await mint('tools:*', 'lister-warm-up')));
  const firsts = [];
  let listed = 0;
  let timedHeaders;
  for (let i = 0; i < (smoke ? 3 : 20); i++) {
    // A grant set of its own (one more pattern, matching nothing): principals with the same
    // grants share one view, so each timed listing cuts and serializes a view of its own.
    const t = await mint(`tools:* tools:none-${i}__*`, `lister-${i}`);
    // Its token verified before the timed request: the first listing is the view's cost.
    await rpc(
      g.url,
      { jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: modernMeta } },
      headersOf(t, 'server/discover'),
    );
    const t0 = performance.now();
    const r = await rpc(g.url, JSON.parse(body), headersOf(t));
    firsts.push(performance.now() - t0);
    listed = JSON.parse(r.text).result.tools.length;
    timedHeaders ??= headersOf(t);
  }
  firsts.sort((a, b) => a - b);
  const cached5k = await load({
    mode: 'latency',
    url: g.url,
    headers: timedHeaders,
    body,
    duration: D,
    warmup: 5,
  });
  await stop(g.child);
  await fiveK.close();
  const first = { p50: +firsts[firsts.length >> 1].toFixed(1), max: +firsts.at(-1).toFixed(1) };
  return {
    data: {
      thousand: { tools, ...cached },
      fiveThousand: { tools: listed, cachedP50Us: cached5k.p50Us, firstPerPrincipalMs: first },
    },
    targets: [
      {
        id: 'tools-list',
        rule: 'cached tools/list of 1,000 tools over 10 upstreams: p50 ≤ 2 ms',
        measured: `${tools} tools, p50 ${Math.round(cached.p50Us)} µs`,
        pass: tools === 1000 && cached.p50Us <= 2000,
      },
      {
        id: 'tools-list-5k',
        rule: 'tools/list of 5,000 tools over 10 upstreams, auth on: p50 < 5 ms cached, the first per principal < 50 ms',
        measured: `${listed} tools, cached p50 ${Math.round(cached5k.p50Us)} µs; first ${first.p50} ms (p50), ${first.max} ms (max)`,
        pass: listed === 5000 && cached5k.p50Us < 5000 && first.max < 50,
      },
    ],
  };
}

/** A 900-tool catalog's listing, with and without the disclosure budget (reported). */
async function contextSection() {
  const big = await upstream({ TOOLS: '900', BIG: '1' });
  const data = {};
  for (const [label, budget] of [
    ['withBudget', 20_000],
    ['withoutBudget', 'off'],
  ]) {
    const g = await manifold({
      mcpServers: { big: { url: big.url, budgetTokens: budget } },
      gateway: { allowedHosts: [big.host], store: false, pageSize: 1000, catalog: { maxTools: 1_000_000 } },
    });
    const text = (await rpc(g.url, JSON.parse(listBody), await openSession(g.url))).text;
    data[label] = { bytes: Buffer.byteLength(text), tools: JSON.parse(text).result.tools.length };
    await stop(g.child);
  }
  await stop(big.child);
  const smaller = 1 - data.withBudget.bytes / data.withoutBudget.bytes;
  return {
    data,
    notes: [
      `Context: a ${data.withoutBudget.tools}-tool listing is ${data.withBudget.bytes} bytes with the default disclosure budget, ${data.withoutBudget.bytes} without (${pct(smaller)} smaller).`,
    ],
  };
}

/** Search mode over 1,000 and 10,000 tools (reported). */
async function searchSection() {
  const SEARCH = join(ROOT, 'test/fixtures/search-catalog.mjs');
  const QUERIES = [
    'open a new github issue',
    'merge a pull request',
    'search source code',
    'export invoice',
    'audit the ledger',
    'sync shipment records',
    'approve a vendor quote',
    'count orders',
  ];
  const rows = [];
  for (const total of smoke ? [1000] : [1000, 10_000]) {
    const servers = { github: { command: process.execPath, args: [SEARCH], env: { SEARCH_SET: 'github' } } };
    for (const prefix of ['bill', 'inv', 'crm', 'ops'])
      servers[prefix] = {
        command: process.execPath,
        args: [SEARCH],
        env: { FILLER: String(Math.floor(total / 4)), FILLER_PREFIX: prefix },
      };
    const row = { tools: total + 5 };
    for (const mode of ['full', 'search']) {
      const g = await manifold({
        mcpServers: servers,
        gateway: {
          store: false,
          pageSize: 10_000,
          maxToolsPerServer: 10_000,
          catalog: { mode, maxTools: 1_000_000 },
        },
      });
      const h = await openSession(g.url);
      const listed = (await rpc(g.url, JSON.parse(listBody), h)).text;
      row[`${mode}ListBytes`] = Buffer.byteLength(listed);
      row[`${mode}Listed`] = JSON.parse(listed).result.tools.length;
      if (mode === 'search') {
        const ask = (i) =>
          rpc(
            g.url,
            {
              jsonrpc: '2.0',
              id: 100 + i,
              method: 'tools/call',
              params: { name: 'manifold__search_tools', arguments: { query: QUERIES[i % QUERIES.length] } },
            },
            h,
          );
        const t0 = performance.now();
        const first = await ask(0);
        row.firstSearchMs = Math.round(performance.now() - t0);
        if (!first.text.includes('"tools"')) throw new Error(`search failed: ${first.text.slice(0, 300)}`);
        const times = [];
        for (let i = 1; i <= (smoke ? 20 : 400); i++) {
          const t = performance.now();
          await ask(i);
          times.push((performance.now() - t) * 1000);
        }
        times.sort((a, b) => a - b);
        row.searchP50Us = Math.round(times[times.length >> 1]);
        row.searchP99Us = Math.round(times[Math.floor(times.length * 0.99)]);
      }
      await stop(g.child);
    }
    rows.push(row);
  }
  return {
    data: rows,
    tables: [
      {
        title:
          'Search mode: one manifold__search_tools call over a legacy session, after the first (which builds the index)',
        head: [
          'Tools',
          'search p50 (µs)',
          'search p99 (µs)',
          'first search (ms)',
          'tools/list bytes, full',
          'tools/list bytes, search',
        ],
        rows: rows.map((r) => [
          r.tools,
          r.searchP50Us,
          r.searchP99Us,
          r.firstSearchMs,
          `${r.fullListBytes} (${r.fullListed} tools)`,
          `${r.searchListBytes} (${r.searchListed} tools)`,
        ]),
      },
    ],
  };
}

/**
 * Code mode (#50): what a run costs to start (a program that returns at once, against one direct
 * call), the gateway CPU of a program making 10 calls against 10 direct calls from the same client
 * (target: at most 1.2× once the start is taken off), and the bytes a model reads to finish a
 * three-step task in each catalog mode.
 */
async function codeSection() {
  const up = await upstream();
  const g = await manifold({
    mcpServers: { fast: { url: up.url } },
    gateway: { allowedHosts: [up.host], store: false, catalog: { mode: 'code' }, ...extra },
  });
  const h = await openSession(g.url);
  let id = 1000;
  const call = async (name, args) => {
    const r = await rpc(
      g.url,
      { jsonrpc: '2.0', id: id++, method: 'tools/call', params: { name, arguments: args } },
      h,
    );
    if (r.status !== 200 || r.text.includes('"isError":true'))
      throw new Error(`${name}: ${r.text.slice(0, 300)}`);
    return r.text;
  };
  const run = (code) => call('manifold__run_code', { code });
  const TEN = 'for (let i = 0; i < 10; i++) await tools.fast__echo({ message: "hello" }); return 1;';
  for (let i = 0; i < (smoke ? 5 : 50); i++) {
    await run(TEN);
    await call('fast__echo', { message: 'hello' });
  }
  // Latency of a run that returns at once, against one direct call: the difference is the start.
  const times = { start: [], direct: [] };
  for (let i = 0; i < (smoke ? 20 : 500); i++) {
    let t = performance.now();
    await run('return 1;');
    times.start.push((performance.now() - t) * 1000);
    t = performance.now();
    await call('fast__echo', { message: 'hello' });
    times.direct.push((performance.now() - t) * 1000);
  }
  const q = (xs, p) =>
    Math.round([...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]);
  // Gateway CPU in paired rounds: programs of 10 calls, 10 times as many direct calls, and as many
  // programs that return at once (the start, taken off the programs). Each round runs the three
  // back to back, in an order that rotates from round to round, and gives one ratio; the target
  // reads their median with its 95% interval, as the calls section's CPU rows do: the phases'
  // summed ticks swung by more than the target's margin from one run to the next.
  const ROUNDS_CODE = smoke ? 2 : 24;
  const PROGRAMS = smoke ? 5 : 100;
  const work = {
    program: () => run(TEN),
    direct: async () => {
      for (let i = 0; i < 10; i++) await call('fast__echo', { message: 'hello' });
    },
    start: () => run('return 1;'),
  };
  const kinds = Object.keys(work);
  const spentUs = { program: 0, direct: 0, start: 0 };
  const ratios = [];
  for (let r = 0; r < ROUNDS_CODE; r++) {
    const round = {};
    for (let p = 0; p < kinds.length; p++) {
      const key = kinds[(r + p) % kinds.length];
      const before = cpuUs(g.child.pid);
      for (let i = 0; i < PROGRAMS; i++) await work[key]();
      round[key] = cpuUs(g.child.pid) - before;
      spentUs[key] += round[key];
    }
    ratios.push((round.program - round.start) / round.direct);
  }
  await stop(g.child);
  await stop(up.child);
  const programs = ROUNDS_CODE * PROGRAMS;
  const perCall = {
    direct: spentUs.direct / (programs * 10),
    program: spentUs.program / (programs * 10),
    start: spentUs.start / programs,
  };
  const { ratio, low, high } = medianInterval(ratios);
  const context = await codeContext();
  return {
    data: {
      times: {
        startP50Us: q(times.start, 0.5),
        startP99Us: q(times.start, 0.99),
        directP50Us: q(times.direct, 0.5),
      },
      spentUs,
      perCall,
      ratio,
      interval: [low, high],
      ratios,
      context,
    },
    tables: [
      {
        title:
          'Code mode: a run that returns at once against one direct call (2025-11-25 session, HTTP upstream)',
        head: ['', 'p50 (µs)', 'p99 (µs)'],
        rows: [
          ['manifold__run_code "return 1"', q(times.start, 0.5), q(times.start, 0.99)],
          ['tools/call fast__echo', q(times.direct, 0.5), q(times.direct, 0.99)],
        ],
      },
      {
        title: 'Code mode: gateway CPU, a program making 10 calls against 10 direct calls',
        head: ['', 'gateway CPU per call (µs)'],
        rows: [
          ['direct tools/call', perCall.direct.toFixed(0)],
          ['a call from a program (start included)', perCall.program.toFixed(0)],
          ['the start of one run', perCall.start.toFixed(0)],
        ],
      },
      {
        title: 'Context: bytes a model reads to finish a three-step task (listing, searches, results)',
        head: ['Catalog', 'full', 'search', 'code'],
        rows: context.map((c) => [c.catalog, c.full, c.search, c.code]),
      },
    ],
    targets: [
      {
        id: 'code-10-calls',
        rule: 'code mode: 10 calls from one program cost at most 1.2× the gateway CPU of 10 direct calls, plus the start',
        measured: `${ratio.toFixed(2)}× (${low.toFixed(2)}–${high.toFixed(2)})`,
        pass: ratio <= 1.2,
      },
    ],
  };
}

/**
 * The context bytes of one three-step task (list the open pull requests, merge the first, tell a
 * Slack channel) in full, search and code mode, over the five realistic servers of the search
 * fixture, and over the same five among 10,000 generated tools. Counted as a model reads them: the
 * tools/list result, each search answer, each tool result (in code mode, the run's one result).
 */
async function codeContext() {
  const SEARCH = join(ROOT, 'test/fixtures/search-catalog.mjs');
  const five = {};
  for (const set of ['github', 'fs', 'slack', 'calendar', 'db'])
    five[set] = { command: process.execPath, args: [SEARCH], env: { SEARCH_SET: set } };
  const big = { ...five };
  for (const prefix of ['bill', 'inv', 'crm', 'ops'])
    big[prefix] = {
      command: process.execPath,
      args: [SEARCH],
      env: { FILLER: '2500', FILLER_PREFIX: prefix },
    };
  const steps = [
    ['github__list_pull_requests', { owner: 'acme', repo: 'web', state: 'open' }, 'list open pull requests'],
    ['github__merge_pull_request', { owner: 'acme', repo: 'web', pullNumber: 42 }, 'merge a pull request'],
    ['slack__post_message', { channel: 'releases', text: 'Merged #42' }, 'send a message to a slack channel'],
  ];
  const program = `
    const prs = await tools.github__list_pull_requests({ owner: 'acme', repo: 'web', state: 'open' });
    await tools.github__merge_pull_request({ owner: 'acme', repo: 'web', pullNumber: 42 });
    await tools.slack__post_message({ channel: 'releases', text: 'Merged #42' });
    return { merged: 42, seen: prs.content.length };`;
  const rows = [];
  // A smoke run proves the measurement with the small catalog only: the big one takes a minute.
  const catalogs = [['five servers', five]];
  if (!smoke) catalogs.push(['five servers among 10,000 generated tools', big]);
  for (const [label, servers] of catalogs) {
    const row = { catalog: '' };
    for (const mode of ['full', 'search', 'code']) {
      const g = await manifold({
        mcpServers: servers,
        gateway: {
          store: false,
          pageSize: 10_000,
          maxToolsPerServer: 10_000,
          catalog: { mode, maxTools: mode === 'full' ? 1_000_000 : 128 },
        },
      });
      const h = await openSession(g.url);
      // Every page of the listing, as a client reads it.
      const tools = [];
      let bytes = 0;
      let cursor;
      do {
        const page = JSON.parse(
          (
            await rpc(
              g.url,
              { jsonrpc: '2.0', id: 8, method: 'tools/list', params: cursor ? { cursor } : {} },
              h,
            )
          ).text,
        ).result;
        bytes += Buffer.byteLength(JSON.stringify(page));
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      let n = 1;
      const ask = async (name, args) => {
        const r = await rpc(
          g.url,
          { jsonrpc: '2.0', id: n++, method: 'tools/call', params: { name, arguments: args } },
          h,
        );
        return Buffer.byteLength(JSON.stringify(JSON.parse(r.text).result));
      };
      // A model that has every declaration in the run tool's description needs no search.
      const declared =
        mode === 'code' &&
        tools.some(
          (t) => t.name === 'manifold__run_code' && t.description.includes('github__merge_pull_request'),
        );
      if (mode !== 'full' && !declared)
        for (const [, , query] of steps) bytes += await ask('manifold__search_tools', { query, limit: 3 });
      if (mode === 'code') bytes += await ask('manifold__run_code', { code: program });
      else for (const [name, args] of steps) bytes += await ask(name, args);
      row.catalog = `${label} (${servers === five ? 17 : 10_017} tools)`;
      row[mode] = bytes;
      await stop(g.child);
    }
    rows.push(row);
  }
  return rows;
}

/** server-everything's echo over stdio, through the gateway and from its own SDK client (reported). */
async function everythingSection() {
  const ev = await manifold({
    mcpServers: { everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] } },
    gateway: { store: false },
  });
  const target = { url: ev.url, headers: await openSession(ev.url), body: callOf('everything__echo', 9) };
  const check = await rpc(target.url, JSON.parse(target.body), target.headers);
  if (!check.text.includes('hello')) throw new Error(`stdio echo failed: ${check.text.slice(0, 300)}`);
  ev.quiet();
  const latency = await load({ mode: 'latency', ...target, duration: D });
  const cpu0 = cpuMs(ev.pid);
  const throughput = await load({ mode: 'throughput', ...target, connections: 16, duration: D });
  const cpuPerCallUs = Math.round(((cpuMs(ev.pid) - cpu0) * 1000) / Math.max(1, throughput.requests));
  await stop(ev.child);
  const direct = new Client({ name: 'bench', version: '1' });
  await direct.connect(new StdioClientTransport({ command: process.execPath, args: [EVERYTHING, 'stdio'] }));
  const samples = [];
  for (const until = performance.now() + D * 1000; performance.now() < until || samples.length < 20; ) {
    const t0 = performance.now();
    await direct.callTool({ name: 'echo', arguments: { message: 'hello' } });
    samples.push((performance.now() - t0) * 1000);
  }
  await direct.close();
  samples.sort((a, b) => a - b);
  const directP50Us = Math.round(samples[samples.length >> 1]);
  return {
    data: { latency, throughput, cpuPerCallUs, directSdkClientP50Us: directP50Us },
    notes: [
      `server-everything over stdio: echo through the gateway p50 ${Math.round(latency.p50Us)} µs at c=1 (its own SDK client: ${directP50Us} µs), ${Math.round(throughput.rps)} rps at c=16, ${cpuPerCallUs} µs gateway CPU per call.`,
    ],
  };
}

/** What the gateway gives its stdio children (deploy/node/runtime/child-env.ts). */
const childEnv = () =>
  Object.fromEntries(
    ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER']
      .filter((k) => process.env[k] !== undefined)
      .map((k) => [k, process.env[k]]),
  );

/**
 * n stdio upstreams spawned at once, directly, each asked initialize and tools/list: the slowest
 * one's time, the floor a gateway in front of the same n is held to (on two cores, thirty Node
 * processes starting together take longer than one alone, with or without a gateway).
 */
function directStdioColdMs(n) {
  const t0 = performance.now();
  const one = (i) =>
    new Promise((res, rej) => {
      // The gateway's children's environment, not this process's: NODE_EXTRA_CA_CERTS alone adds
      // tens of ms to each Node start.
      const child = spawn(process.execPath, [UPSTREAM, '--stdio'], {
        env: { ...childEnv(), TOOLS: '20', TOOL_PREFIX: `c${i}` },
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        rej(new Error('a directly spawned stdio upstream did not answer within 30 s'));
      }, 30_000);
      let buf = '';
      child.stdout.on('data', (d) => {
        buf += d;
        if (!buf.includes('"id":2')) return;
        clearTimeout(timer);
        res(performance.now() - t0);
        child.kill();
      });
      child.once('error', rej);
      child.stdin.write(`${JSON.stringify(legacyInitialize('cold'))}\n`);
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} })}\n`);
    });
  return Promise.all(Array.from({ length: n }, (_, i) => one(i))).then((ms) => Math.round(Math.max(...ms)));
}

/** Waits for a line of `g`'s output holding `needle`. */
async function lineOf(g, needle) {
  for (const until = Date.now() + 30_000; Date.now() < until; ) {
    const line = g.lines.find((l) => l.includes(needle));
    if (line) return line;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no ${needle} in 30 s`);
}

/** Discovery of n stdio upstreams, from the gateway's own log, against the direct floor. */
async function coldSection() {
  const counts = smoke ? [1, 10] : [1, 10, 30];
  const floors = {};
  for (const n of counts) {
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await directStdioColdMs(n));
    floors[n] = runs.sort((a, b) => a - b)[1];
  }
  const rows = [];
  for (const n of counts) {
    const g = await manifold({
      mcpServers: Object.fromEntries(
        Array.from({ length: n }, (_, i) => [
          `c${i}`,
          {
            command: process.execPath,
            args: [UPSTREAM, '--stdio'],
            env: { TOOLS: '20', TOOL_PREFIX: `c${i}` },
          },
        ]),
      ),
      gateway: { store: false },
    });
    const catalog = JSON.parse(await lineOf(g, '"gateway.catalog"'));
    const listening = JSON.parse(await lineOf(g, '"gateway.listening"'));
    rows.push({
      upstreams: n,
      discoveryMs: Date.parse(catalog.time) - Date.parse(listening.time),
      slowestTogetherMs: floors[n],
    });
    await stop(g.child);
  }
  const target = (n, slack) => {
    const r = rows.find((x) => x.upstreams === n);
    return {
      id: `cold-start-${n}`,
      rule: `discovery of ${n} stdio upstreams ≤ the slowest of ${n} started together without the gateway + ${slack} ms`,
      measured: `${r.discoveryMs} ms (the slowest of ${n} together: ${r.slowestTogetherMs} ms)`,
      pass: r.discoveryMs <= r.slowestTogetherMs + slack,
    };
  };
  return { data: rows, targets: [target(10, 200), ...(smoke ? [] : [target(30, 300)])] };
}

async function startupSection() {
  const data = await startupBench({ cli: CLI, runs: smoke ? 3 : 11 });
  return {
    data,
    targets: [
      {
        id: 'startup',
        rule: 'process start to listening < 200 ms (median), the default config and a JWT-auth config',
        measured: `default ${data.configs.default.medianMs} ms, JWT auth ${data.configs.auth.medianMs} ms (Node alone printing a line: ${data.floorMs} ms)`,
        pass: data.pass,
      },
    ],
  };
}

async function bigSection() {
  const data = await bigResultBench({ cli: CLI, smoke });
  return { data, targets: bigResultTargets(data) };
}

const RUN = {
  calls: callsSection,
  memory: memorySection,
  scale: scaleSection,
  list: listSection,
  context: contextSection,
  search: searchSection,
  code: codeSection,
  everything: everythingSection,
  cold: coldSection,
  startup: startupSection,
  big: bigSection,
  policy: policySection,
  local: () => localBench({ manifold, upstream: UPSTREAM, tmp, smoke }),
};

/**
 * The rules of the policy section: twenty of the kinds the docs show (per tenant, per tool, per
 * risk, per claim; five read the arguments, so they run on every call), none of which holds for
 * the bench's echo call, so every one of them is evaluated.
 */
function benchRules() {
  const rules = [];
  for (let i = 0; i < 5; i++)
    rules.push({
      when: `principal.tenant == 'tenant-${i}' && tool.server == 'other'`,
      effect: 'deny',
      reason: `t${i}`,
    });
  for (let i = 0; i < 5; i++)
    rules.push({
      when: `tool.upstreamName == 'delete_${i}' || tool.risk == 'destructive'`,
      effect: 'deny',
      reason: `d${i}`,
    });
  for (let i = 0; i < 5; i++)
    rules.push({
      when: `'role-${i}' in principal.scopes && tool.server == 'admin'`,
      effect: 'ask',
      reason: `s${i}`,
    });
  for (let i = 0; i < 5; i++)
    rules.push({
      when: `tool.name == 'fast__echo' && args.message.startsWith('forbidden-${i}')`,
      effect: 'deny',
      reason: `a${i}`,
    });
  return rules;
}

/** #51: the CPU a policy of 20 rules and the secrets and pii guardrails on both phases add to a call. */
async function policySection() {
  const up = await upstream();
  const { auth, mint } = await benchIssuer();
  const token = await mint('tools:*', 'bench-policy');
  const base = {
    mcpServers: { fast: { url: up.url } },
    gateway: { allowedHosts: [up.host], store: false, auth, ...extra },
  };
  const guarded = structuredClone(base);
  guarded.gateway.policy = { rules: benchRules() };
  guarded.gateway.guardrails = [{ type: 'secrets' }, { type: 'pii' }];
  const plain = await manifold(base);
  const ruled = await manifold(guarded);
  const targets = [];
  for (const g of [plain, ruled]) {
    const headers = await openSession(g.url, { authorization: `Bearer ${token}` });
    const r = await rpc(g.url, JSON.parse(callOf('fast__echo')), headers);
    if (r.status !== 200 || !r.text.includes('hello'))
      throw new Error(`policy bench: ${r.status} ${r.text.slice(0, 200)}`);
    targets.push({ url: g.url, headers, body: callOf('fast__echo'), pid: g.pid });
    g.quiet();
  }
  // The guarded gateway really runs its policy: a secret is refused.
  const probe = JSON.parse(callOf('fast__echo'));
  probe.params.arguments.message = 'key AKIAZ3MSKVNNGW4GTQ3X';
  const refused = await rpc(ruled.url, probe, targets[1].headers);
  if (!refused.text.includes('aws-access-token'))
    throw new Error(`policy bench: no guardrail: ${refused.text.slice(0, 200)}`);
  const r = await rotate({
    targets,
    rounds: PAIRED_ROUNDS,
    amount: PAIRED_AMOUNT.http,
    connections: 16,
  });
  await Promise.all([stop(plain.child), stop(ruled.child), stop(up.child)]);
  const n = r.usPerCall.length;
  const added = median(r.usPerCall.map((row) => row[1] - row[0]));
  const mean = (i) => r.usPerCall.reduce((a, row) => a + row[i], 0) / n;
  return {
    data: { usPerCall: r.usPerCall, medianAddedUs: added, errors: r.errors },
    tables: [
      {
        title: 'tools/call with policy (20 rules, secrets and pii on both phases) against none, paired',
        head: ['Gateway', 'CPU per call (µs)'],
        rows: [
          ['no policy', mean(0).toFixed(1)],
          ['20 rules + secrets + pii', mean(1).toFixed(1)],
          ['added (median of rounds)', added.toFixed(1)],
        ],
      },
    ],
    targets: [
      {
        id: 'policy-cpu',
        rule: '20 rules and the secrets and pii guardrails on both phases add ≤ 15 µs of gateway CPU per tools/call',
        measured: `+${added.toFixed(1)} µs (median of ${n} paired rounds)`,
        pass: added <= 15,
      },
    ],
  };
}

/** A Markdown table. */
function table({ title, head, rows }) {
  return [
    `${title}\n`,
    `| ${head.join(' | ')} |`,
    `| ${head.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    '',
  ].join('\n');
}

/** The speed probe's line: runs are comparable when their probes are, and the host held still in this one. */
function speedLine({ start, end }) {
  const drift = Math.abs(end - start) / start;
  const warning = drift > 0.1 ? ' The host changed speed during the run: read its ratios with care.' : '';
  return `Speed probe (processes.mjs; lower is faster): ${start.toFixed(0)} µs at the start, ${end.toFixed(0)} µs at the end.${warning}\n`;
}

function report(results) {
  const m = results.machine;
  const parts = [
    `# npm run bench${smoke ? ' --smoke (loads too short to judge: nothing is)' : ''}\n`,
    `${results.date}; ${m.cpus} × ${m.model}; Node ${m.node}; load average ${results.loadAverage.start.join(', ')} at the start, ${results.loadAverage.end.join(', ')} at the end. Sections: ${Object.keys(results.sections).join(', ')}.\n`,
    speedLine(results.speedProbeUs),
  ];
  const targets = Object.values(results.sections).flatMap((s) => s.targets ?? []);
  for (const s of Object.values(results.sections)) for (const t of s.tables ?? []) parts.push(table(t));
  if (targets.length > 0) {
    parts.push(
      table({
        title: 'Targets (#48), each a ratio or bound within this run',
        head: ['Target', 'Measured', 'Met'],
        rows: targets.map((t) => [t.rule, t.measured, smoke ? '—' : t.pass ? 'yes' : '**no**']),
      }),
    );
  }
  const notes = Object.values(results.sections).flatMap((s) => s.notes ?? []);
  if (notes.length > 0) parts.push(`${notes.map((n) => `- ${n}`).join('\n')}\n`);
  if (targets.length > 0 && !smoke) {
    const missed = targets.filter((t) => !t.pass).map((t) => t.id);
    parts.push(
      missed.length === 0
        ? `All ${targets.length} targets met.\n`
        : `${targets.length - missed.length} of ${targets.length} targets met; missed: ${missed.join(', ')}.\n`,
    );
  }
  return parts.join('\n');
}

async function main() {
  const results = {
    date: new Date().toISOString(),
    smoke,
    machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version },
    loadAverage: { start: loadAverage() },
    speedProbeUs: { start: await speedProbeUs() },
    sections: {},
  };
  for (const name of Object.keys(SECTIONS).filter((s) => only.includes(s))) {
    log(`section ${name}: ${SECTIONS[name]}`);
    results.sections[name] = await RUN[name]();
  }
  results.loadAverage.end = loadAverage();
  results.speedProbeUs.end = await speedProbeUs();
  const text = report(results);
  process.stdout.write(text);
  const json = `${JSON.stringify(results, null, 2)}\n`;
  if (jsonFile) writeFileSync(resolve(jsonFile), json);
  if (outDir) {
    mkdirSync(resolve(outDir), { recursive: true });
    writeFileSync(join(resolve(outDir), 'bench.json'), json);
    writeFileSync(join(resolve(outDir), 'bench.md'), text);
  }
}

try {
  await main();
} finally {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
}
