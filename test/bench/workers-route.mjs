#!/usr/bin/env node
// The Workers layout of #15 against the single object it replaced: modern tools/call to a modern
// upstream (fast-upstream.mjs with MODERN=1: hand-rolled, so the gateway's cost shows) through the Worker in real workerd
// (Miniflare), at concurrency 8, once with the isolate path (default) and once with
// MANIFOLD_ROUTE=object. Everything runs on this machine, so the numbers compare the two paths'
// costs (an object hop, one object's serial event loop), not a real deployment's network.
//   node test/bench/workers-route.mjs [--seconds N]   (needs `npm run build:workers` first)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Miniflare } from 'miniflare';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const SECONDS = args.includes('--seconds') ? Number(args[args.indexOf('--seconds') + 1]) : 5;
const CONCURRENCY = 8;
const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
};

async function upstream() {
  const child = spawn(process.execPath, [join(ROOT, 'test/bench/fast-upstream.mjs')], {
    env: { ...process.env, MODERN: '1' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const port = await new Promise((res, rej) => {
    child.stdout.once('data', (d) => res(Number(String(d).trim())));
    child.once('exit', (code) => rej(new Error(`fast upstream exited (${code})`)));
  });
  return { child, port };
}

async function worker(port, route, persist) {
  const mf = new Miniflare({
    modules: true,
    scriptPath: join(ROOT, 'dist-workers/worker.js'),
    compatibilityDate: '2026-04-01',
    durableObjects: {
      MANIFOLD: { className: 'ManifoldGateway', useSQLite: true },
      UPSTREAMS: { className: 'ManifoldUpstream', useSQLite: true },
      TENANTS: { className: 'ManifoldTenant', useSQLite: true },
    },
    durableObjectsPersist: persist,
    bindings: {
      MANIFOLD_CONFIG: JSON.stringify({
        mcpServers: { fast: { url: `http://127.0.0.1:${port}/mcp` } },
        gateway: { allowedHosts: [`127.0.0.1:${port}`], auth: false, logLevel: 'error' },
      }),
      ...(route === 'object' ? { MANIFOLD_ROUTE: 'object' } : {}),
    },
    host: '127.0.0.1',
    port: 0,
  });
  return { mf, url: new URL('/mcp', await mf.ready).toString() };
}

let id = 0;
async function call(url) {
  const params = { name: 'fast__echo', arguments: { message: 'hi' }, _meta: META };
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'fast__echo',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params }),
  });
  const text = await res.text();
  if (res.status !== 200 || !text.includes('hi'))
    throw new Error(`bad answer ${res.status}: ${text.slice(0, 200)}`);
}

async function load(url) {
  for (let i = 0; i < 50; i++) await call(url); // warm: snapshots read, JIT settled
  const latencies = [];
  const until = Date.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) {
        const t0 = performance.now();
        await call(url);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const q = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))].toFixed(2);
  return {
    calls: latencies.length,
    perSecond: Math.round(latencies.length / SECONDS),
    p50: q(0.5),
    p99: q(0.99),
  };
}

const ref = await upstream();
const rows = [];
try {
  for (const route of ['isolate', 'object']) {
    const persist = mkdtempSync(join(tmpdir(), 'manifold-bench-do-'));
    const w = await worker(ref.port, route, persist);
    try {
      rows.push({ route, ...(await load(w.url)) });
    } finally {
      await w.mf.dispose();
      rmSync(persist, { recursive: true, force: true });
    }
  }
} finally {
  ref.child.kill();
}
console.log(`| Route | calls/s (c=${CONCURRENCY}) | p50 ms | p99 ms |\n| --- | --- | --- | --- |`);
for (const r of rows) console.log(`| ${r.route} | ${r.perSecond} | ${r.p50} | ${r.p99} |`);
