#!/usr/bin/env node
// Instructions per tools/call, by client era, counted by valgrind's callgrind (#18). Not part of
// `npm run bench` or of the tests: it needs valgrind (Debian's `valgrind`) and takes minutes, as
// the gateway runs some 50 times slower under it. CPU time on this VM moves by a fifth from one
// second to the next; an instruction count does not, so this settles what the paired bench can
// only bound (docs/design.md, "Fourteenth round of #18").
//
// The built gateway (`npm run build` first) runs under callgrind with JWT auth, the audit line
// and SQLite drift on, in front of the bench's fast upstream over stdio, as the bench's S2 and
// S3. After a warm-up, segments of `--calls` requests run in `--order`, each counted alone
// (callgrind_control zeroes the counters before a segment and dumps them after):
//   L  a 2025-11-25 session's call (S2)
//   M  a 2026-07-28 call (S3)
//   H  L's call with M's Mcp-Method and Mcp-Name headers added
// Printed per segment and per kind: instructions per call on the main thread (JavaScript,
// the parser, the scavenger) and on the others (concurrent compilation and marking, which come in
// bursts). All traffic goes to 127.0.0.1; every loop is bounded.
//   --calls N        requests per segment (default 2000)
//   --warm N         requests of each kind before counting (default 4000)
//   --order LMLMLM   the segments, in order
//   --concurrency N  requests in flight at once (default 1; the paired bench runs 16)
//   --keep           keep the dumps (callgrind_annotate reads them) and say where they are
//   --perf-map       the gateway writes /tmp/perf-<pid>.map, to name its compiled functions
//   --cli PATH       the built CLI to run (default dist/manifold.js). A copy of an earlier
//                    dist/ counts that build against this one; keep it inside the checkout, where
//                    its packages are found, in .manifold/ (which git and the linter skip)
//   --upstream http  the fast upstream as a 2025-11-25 HTTP server (B2's and B4's setup) instead of
//                    over stdio (S2's and S3's); it runs outside valgrind
//   --processes N    gateway processes, one after another (default 1). V8 makes different
//                    inlining and tiering choices in each, which moves the count 3-5%; with
//                    several, the last lines give each kind's median over the processes (of each
//                    process's least segment) and each process's ratio to L: the era comparison
//                    is judged there, not in one process
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { Pool } from 'undici';
import { ACCEPT, legacyInitialize, modernCall } from './calls.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1];
};
const CALLS = Number(option('calls', 2000));
const WARM = Number(option('warm', 4000));
const ORDER = option('order', 'LMLMLM');
const CONCURRENCY = Number(option('concurrency', 1));
const PROCESSES = Number(option('processes', 1));
const CLI = resolve(option('cli', join(ROOT, 'dist/manifold.js')));
const KEEP = args.includes('--keep');
const UPSTREAM = option('upstream', 'stdio');
if (UPSTREAM !== 'stdio' && UPSTREAM !== 'http') throw new Error('--upstream: stdio or http');
if (!/^[LMH]+$/.test(ORDER)) throw new Error('--order: letters L, M and H only');
if (!(CALLS > 0 && WARM >= 0 && CONCURRENCY > 0 && Number.isInteger(PROCESSES) && PROCESSES > 0))
  throw new Error('--calls, --warm, --concurrency, --processes: numbers');
try {
  execFileSync('valgrind', ['--version']);
} catch {
  throw new Error('valgrind is not installed (apt-get install valgrind)');
}

const tmp = mkdtempSync(join(tmpdir(), 'manifold-instructions-'));
const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
const jwk = { ...(await exportJWK(publicKey)), kid: 'k', alg: 'ES256', use: 'sig' };
writeFileSync(join(tmp, 'jwks.json'), JSON.stringify({ keys: [jwk] }));
const token = await new SignJWT({ scope: 'tools:* prompts:* resources:*' })
  .setProtectedHeader({ alg: 'ES256', kid: 'k' })
  .setIssuer('https://bench.issuer')
  .setAudience('manifold-bench')
  .setSubject('bench-tenant')
  .setIssuedAt()
  .setExpirationTime('2h')
  .sign(privateKey);
/**
 * `--upstream http`: the bench's fast upstream as a 2025-11-25 streamable-HTTP server on loopback
 * (B2's and B4's), started outside valgrind; stdio otherwise (S2's and S3's).
 */
let upstreamHttp;
let upstreamPort;
if (UPSTREAM === 'http') {
  upstreamHttp = spawn(process.execPath, [join(ROOT, 'test/bench/fast-upstream.mjs')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  upstreamPort = await new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error('the HTTP upstream printed no port within 30 s')), 30_000);
    upstreamHttp.stdout.once('data', (d) => {
      clearTimeout(timer);
      res(Number(String(d).trim().split('\n')[0]));
    });
  });
}
const config = {
  mcpServers: {
    sfast:
      UPSTREAM === 'http'
        ? { url: `http://127.0.0.1:${upstreamPort}/mcp` }
        : { command: process.execPath, args: [join(ROOT, 'test/bench/fast-upstream.mjs'), '--stdio'] },
  },
  gateway: {
    ...(UPSTREAM === 'http' ? { allowedHosts: [`127.0.0.1:${upstreamPort}`] } : {}),
    store: { path: join(tmp, 'state.db') },
    auth: { issuer: 'https://bench.issuer', audience: 'manifold-bench', jwksFile: join(tmp, 'jwks.json') },
  },
};
writeFileSync(join(tmp, 'config.json'), JSON.stringify(config));

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
/** The gateway running now, killed on exit whatever happens. */
let gateway;
const pids = [];
process.on('exit', () => {
  gateway?.kill('SIGKILL');
  upstreamHttp?.kill('SIGKILL');
  if (KEEP)
    console.log(`dumps: ${tmp} (gateway pids ${pids.join(', ')}; dump cg<process>.<segment>-<thread>)`);
  else rmSync(tmp, { recursive: true, force: true });
});

/** One gateway process: warm-up, then the segments; each kind's least main-thread count per call. */
async function measure(n) {
  gateway = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--separate-threads=yes',
      `--callgrind-out-file=${join(tmp, `cg${n}`)}`,
      process.execPath,
      ...(args.includes('--perf-map') ? ['--perf-basic-prof'] : []),
      CLI,
      'serve',
      '--config',
      join(tmp, 'config.json'),
      '--port',
      '0',
      '--log-level',
      'info',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  pids.push(gateway.pid);
  const port = await new Promise((res, rej) => {
    let seen = '';
    const timer = setTimeout(() => rej(new Error(`no port after 300 s:\n${seen.slice(-2000)}`)), 300_000);
    const onData = (d) => {
      seen += d;
      const m = seen.match(/"gateway\.listening"[^\n]*"url":"http:\/\/[^:/]+:(\d+)/);
      if (m) {
        clearTimeout(timer);
        for (const s of [gateway.stdout, gateway.stderr]) {
          s.removeAllListeners('data');
          s.resume();
        }
        res(Number(m[1]));
      }
    };
    gateway.stdout.on('data', onData);
    gateway.stderr.on('data', onData);
    gateway.once('exit', (code) => rej(new Error(`the gateway exited (${code}):\n${seen.slice(-2000)}`)));
  });

  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY, pipelining: 1 });
  async function post(headers, body) {
    const r = await pool.request({ method: 'POST', path: '/mcp', headers, body });
    return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
  }
  const base = {
    'content-type': 'application/json',
    accept: ACCEPT,
    authorization: `Bearer ${token}`,
  };
  const opened = await post(base, JSON.stringify(legacyInitialize()));
  const session = {
    ...base,
    'mcp-session-id': opened.headers['mcp-session-id'],
    'mcp-protocol-version': '2025-11-25',
  };
  await post(session, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  const name = 'sfast__echo';
  const legacyBody = JSON.stringify({
    jsonrpc: '2.0',
    id: 7,
    method: 'tools/call',
    params: { name, arguments: { message: 'hello' } },
  });
  const modern = modernCall(name);
  const modernHeaders = { 'mcp-method': 'tools/call', 'mcp-name': name };
  const kinds = {
    L: [session, legacyBody],
    M: [modern.headers(token), modern.body],
    H: [{ ...session, ...modernHeaders }, legacyBody],
  };
  // The upstream is spawned after the port opens: wait (bounded) until its tool is listed.
  for (let i = 0; ; i++) {
    const r = await post(session, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }));
    if (r.text.includes(name)) break;
    if (i === 600) throw new Error(`${name} was never listed: ${r.text.slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  for (const kind of new Set(ORDER)) {
    const r = await post(...kinds[kind]);
    if (r.status !== 200 || !r.text.includes('hello'))
      throw new Error(`${kind}: ${r.status} ${r.text.slice(0, 300)}`);
  }
  /** `n` requests of `kind`, `CONCURRENCY` at a time. */
  const run = (kind, n) =>
    Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, lane) => {
        for (let i = lane; i < n; i += CONCURRENCY) await post(...kinds[kind]);
      }),
    );
  for (const kind of new Set(ORDER)) await run(kind, WARM);

  /** Instructions by thread in dump `part` (one file per thread: cg.<part>-<thread>). */
  function counted(part) {
    const threads = [];
    for (const file of readdirSync(tmp)) {
      const m = file.match(/^cg(\d+)\.(\d+)-(\d+)$/);
      if (!m || Number(m[1]) !== n || Number(m[2]) !== part) continue;
      const text = readFileSync(join(tmp, file), 'utf8');
      const total = text.match(/^(?:summary|totals): (\d+)/m);
      if (!total) throw new Error(`${file}: no summary line (is the dump complete?)`);
      threads.push({ thread: Number(m[3]), instructions: Number(total[1]) });
    }
    if (threads.length === 0) throw new Error(`no dump ${n}.${part} in ${tmp}`);
    threads.sort((a, b) => a.thread - b.thread);
    const main = threads[0].instructions;
    return { main, others: threads.slice(1).reduce((s, t) => s + t.instructions, 0) };
  }

  const perKind = {};
  let part = 0;
  for (const kind of ORDER) {
    execFileSync('callgrind_control', ['--zero', String(gateway.pid)], { stdio: 'ignore' });
    await run(kind, CALLS);
    execFileSync('callgrind_control', ['--dump', String(gateway.pid)], { stdio: 'ignore' });
    part++;
    const c = counted(part);
    const row = { main: c.main / CALLS, others: c.others / CALLS };
    perKind[kind] ??= [];
    perKind[kind].push(row);
    console.log(
      `${PROCESSES > 1 ? `process ${n} ` : ''}${kind} segment ${part}: ${Math.round(row.main)} main-thread + ${Math.round(row.others)} other instructions per call`,
    );
  }
  // A burst of V8's background work only adds to a segment's count, so each kind's least segment
  // is its own cost in this process; the median is printed beside it.
  const least = {};
  for (const [kind, rows] of Object.entries(perKind)) {
    least[kind] = Math.min(...rows.map((r) => r.main));
    console.log(
      `${PROCESSES > 1 ? `process ${n} ` : ''}${kind}: least ${Math.round(least[kind])}, median ${Math.round(median(rows.map((r) => r.main)))} main-thread, median ${Math.round(median(rows.map((r) => r.others)))} other (${rows.length} segments of ${CALLS}, concurrency ${CONCURRENCY})`,
    );
  }
  await pool.close();
  gateway.kill('SIGKILL');
  await new Promise((r) =>
    gateway.exitCode !== null || gateway.signalCode !== null ? r() : gateway.once('exit', r),
  );
  return least;
}

const results = [];
for (let n = 1; n <= PROCESSES; n++) results.push(await measure(n));
if (PROCESSES > 1) {
  const kinds = Object.keys(results[0]);
  for (const kind of kinds) {
    const each = results.map((r) => r[kind]);
    const ratio =
      kind === 'L' || !kinds.includes('L')
        ? ''
        : `, ${kind}/L per process ${results.map((r) => `${((r[kind] / r.L) * 100).toFixed(1)}%`).join(' ')}, median ${(median(results.map((r) => r[kind] / r.L)) * 100).toFixed(1)}%`;
    console.log(
      `${kind} over ${PROCESSES} processes: median ${Math.round(median(each))} main-thread, each process's least (${each.map(Math.round).join(' ')})${ratio}`,
    );
  }
}
process.exit(0);
