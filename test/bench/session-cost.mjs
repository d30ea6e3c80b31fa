#!/usr/bin/env node
// What one idle downstream session costs the gateway: the gateway runs in this process (started
// with --expose-gc), N sessions are opened over loopback HTTP, and the JS heap plus external
// memory is compared after full collections. RSS is far too coarse for this (it moves by tens of
// MB with the collector's heap sizing). Options as JSON in argv[2]: { config, token, sessions }.
// Prints one JSON line: { sessions, bytesPerSession, before, after }.
import { resolveJwksFile } from '../../dist/deploy/node/cli/load.js';
import { startGateway } from '../../dist/deploy/node/http/serve.js';
import { parseConfigObject } from '../../dist/src/config/load.js';
import { silentLogger } from '../../dist/src/lib/log.js';
import { legacyInitialize } from './calls.mjs';

if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc');
const o = JSON.parse(process.argv[2]);
const parsed = parseConfigObject(o.config, process.env);
if (!parsed.ok) throw new Error(`config: ${JSON.stringify(parsed.errors)}`);
const config = parsed.config;
const jwksIssue = resolveJwksFile(config);
if (jwksIssue) throw new Error(`config: ${jwksIssue.message}`);
config.gateway.port = 0;
const gw = await startGateway({ config, log: silentLogger, version: 'bench', waitReady: true });

const used = () => {
  for (let i = 0; i < 4; i++) globalThis.gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
};
const headers = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  authorization: `Bearer ${o.token}`,
};
const init = JSON.stringify(legacyInitialize());
let first;
const open = async () => {
  const r = await fetch(gw.url, { method: 'POST', headers, body: init });
  await r.text();
  const sid = r.headers.get('mcp-session-id');
  if (r.status !== 200 || !sid) throw new Error(`initialize: ${r.status}`);
  return sid;
};
/** A session still served (200), not evicted by a per-principal or per-tenant bound (404). */
const alive = async (sid) => {
  const r = await fetch(gw.url, {
    method: 'POST',
    headers: { ...headers, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }),
  });
  await r.text();
  return r.status === 200;
};
// Warm every path first, at the same concurrency (code, caches, and the 50 keep-alive
// connections on both sides, which would otherwise be counted as session cost), then measure.
for (let i = 0; i < 2; i++) await Promise.all(Array.from({ length: 50 }, open));
const before = used();
for (let i = 0; i < o.sessions; i += 50) {
  const sids = await Promise.all(Array.from({ length: Math.min(50, o.sessions - i) }, open));
  first ??= sids[0];
}
const after = used();
// Every session counted must still be open: otherwise the bytes are of fewer sessions.
if (!(await alive(first)))
  throw new Error('the first session was evicted: raise the session bounds in the config');
process.stdout.write(
  `${JSON.stringify({ sessions: o.sessions, bytesPerSession: Math.round((after - before) / o.sessions), before, after })}\n`,
);
await gw.stop();
process.exit(0);
