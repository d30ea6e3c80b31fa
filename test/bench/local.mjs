// npm run bench -- --only local: servers on demand (#53). The cold first call of a lazy stdio
// server (its process start, handshake, listing and drift check, then the call), without and with
// a sandbox, against the next call; and the resident memory of twenty configured servers with one
// running against all twenty running, the gateway and every process under it summed from /proc.
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { legacyInitialize } from './calls.mjs';
import { median, memoryMb, stop } from './processes.mjs';

/** Every process under `pid` (children, grandchildren…), from /proc. */
function descendants(pid) {
  const parent = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone
    }
  }
  const out = [];
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift();
    for (const [c, pp] of parent) {
      if (pp === p) {
        out.push(c);
        queue.push(c);
      }
    }
  }
  return out;
}

/** Resident memory of `pid` and every process under it, in MB. */
function treeRssMb(pid) {
  let sum = 0;
  for (const p of [pid, ...descendants(pid)]) {
    try {
      sum += memoryMb(p).rss;
    } catch {
      // gone
    }
  }
  return sum;
}

const ACCEPT = 'application/json, text/event-stream';

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

async function session(url) {
  const r = await post(url, legacyInitialize('local-bench'));
  const sid = r.headers.get('mcp-session-id');
  const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  return h;
}

async function states(url) {
  const r = await fetch(url.replace('/mcp', '/healthz'));
  const body = await r.json();
  return body.upstreams.map((u) => u.state);
}

async function until(check, what, ms = 60_000) {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`local bench: timed out waiting for ${what}`);
}

/**
 * @param {{ manifold: (config: object) => Promise<{ child: import('node:child_process').ChildProcess, pid: number, url: string }>, upstream: string, tmp: string, smoke: boolean }} o
 */
export async function localBench({ manifold, upstream, tmp, smoke }) {
  const dir = join(tmp, 'local');
  mkdirSync(dir, { recursive: true });
  const server = (n, extra = {}) => ({
    command: process.execPath,
    args: [upstream, '--stdio'],
    env: { TOOLS: '20', TOOL_PREFIX: `l${n}` },
    ...extra,
  });
  const runs = smoke ? 1 : 5;

  // Cold first call: a fresh gateway on a store that holds the server's catalog, so that the
  // server is listed without running, and the first tools/call starts it.
  const cold = [];
  const variants = [
    ['lazy, no sandbox', {}],
    ['lazy, sandbox with network off', { sandbox: { network: false } }],
  ];
  // A smoke run proves the section works, with one variant, at the least cost to the suite.
  for (const [label, extra] of smoke ? variants.slice(1) : variants) {
    const store = join(dir, `${cold.length}.db`);
    const config = {
      mcpServers: { l0: server(0, { start: 'lazy', ...extra }) },
      gateway: { store: { path: store }, serverDataDir: join(dir, 'servers') },
    };
    // The first gateway on this store lists it once and stores its verified catalog.
    const first = await manifold(config);
    await until(async () => (await states(first.url)).every((s) => s === 'idle'), 'the first listing');
    await stop(first.child);
    const firstMs = [];
    const nextMs = [];
    for (let i = 0; i < runs; i++) {
      const g = await manifold(config);
      await until(async () => (await states(g.url)).every((s) => s === 'idle'), 'the stored catalog');
      const h = await session(g.url);
      const call = (id) => ({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'l0__echo', arguments: { message: 'hi' } },
      });
      let t = performance.now();
      const r = await post(g.url, call(2), h);
      firstMs.push(performance.now() - t);
      if (r.status !== 200 || !r.text.includes('hi'))
        throw new Error(`local bench: cold call failed: ${r.text.slice(0, 300)}`);
      t = performance.now();
      await post(g.url, call(3), h);
      nextMs.push(performance.now() - t);
      await stop(g.child);
    }
    cold.push({ label, firstMs: Math.round(median(firstMs)), nextMs: Math.round(median(nextMs) * 10) / 10 });
  }

  // Memory: twenty configured, one running, against twenty running.
  const n = smoke ? 3 : 20;
  const names = Array.from({ length: n }, (_, i) => `m${i}`);
  const store = join(dir, 'memory.db');
  const lazy = {
    mcpServers: Object.fromEntries(names.map((name, i) => [name, server(100 + i, { start: 'lazy' })])),
    gateway: { store: { path: store } },
  };
  const primed = await manifold(lazy);
  await until(async () => (await states(primed.url)).every((s) => s === 'idle'), 'the first listings');
  await stop(primed.child);
  const settle = () => new Promise((r) => setTimeout(r, smoke ? 200 : 1500));

  const one = await manifold(lazy);
  await until(async () => (await states(one.url)).every((s) => s === 'idle'), 'the stored catalogs');
  const h = await session(one.url);
  await post(
    one.url,
    {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'm0__echo', arguments: { message: 'hi' } },
    },
    h,
  );
  await settle();
  const oneRunning = { processes: descendants(one.pid).length, rssMb: Math.round(treeRssMb(one.pid)) };
  await stop(one.child);

  const all = await manifold({
    ...lazy,
    mcpServers: Object.fromEntries(names.map((name, i) => [name, server(100 + i)])),
  });
  await until(async () => (await states(all.url)).every((s) => s === 'ready'), 'every server to be ready');
  await settle();
  const allRunning = { processes: descendants(all.pid).length, rssMb: Math.round(treeRssMb(all.pid)) };
  await stop(all.child);

  const rows = [
    ...cold.map((c) => [
      `cold first call of a lazy server (${c.label})`,
      `${c.firstMs} ms`,
      `next call ${c.nextMs} ms`,
    ]),
    [
      `${n} configured, 1 running (lazy)`,
      `${oneRunning.rssMb} MB`,
      `${oneRunning.processes} processes under the gateway`,
    ],
    [
      `${n} configured, ${n} running (eager)`,
      `${allRunning.rssMb} MB`,
      `${allRunning.processes} processes under the gateway`,
    ],
  ];
  return {
    data: { cold, memory: { servers: n, oneRunning, allRunning } },
    tables: [
      {
        title: `Local servers on demand (medians of ${runs} fresh gateways; memory: the gateway and every process under it, resident)`,
        head: ['Measure', 'Value', 'Beside it'],
        rows,
      },
    ],
    notes: [
      `local: the cold first call includes the process start, the handshake, the listing and its drift check; ${n} lazy servers with one used kept ${oneRunning.rssMb} MB resident against ${allRunning.rssMb} MB for all ${n} running.`,
    ],
  };
}
