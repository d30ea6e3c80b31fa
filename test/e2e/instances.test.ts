import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, freePort, ROOT, stopChild } from '../helpers/harness.js';
import { modernListen, modernRequest } from '../helpers/modern.js';

// Any instance serves any modern request: two gateway processes on one config and one store, with
// nothing shared between them but the store file and the cursor secret, and a client that
// alternates between them.
const CLI = resolve(ROOT, 'dist/manifold.js');
const REFERENCE = resolve(ROOT, 'test/fixtures/reference-server.mjs');
const DRIFT = resolve(ROOT, 'test/fixtures/drift-server.mjs');

/** Starts `args` and resolves with the first stdout line matching `ready`. */
function start(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((res, rej) => {
    let out = '';
    const onData = (c: Buffer) => {
      out += c.toString();
      const m = ready.exec(out);
      if (m) res({ child, match: m });
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => rej(new Error(`${args.join(' ')} exited (${code}): ${out.slice(-2000)}`)));
  });
}

async function listAll(urls: string[]): Promise<string[]> {
  const names: string[] = [];
  let cursor: string | undefined;
  let i = 0;
  do {
    const r = await modernRequest(urls[i++ % urls.length]!, 'tools/list', cursor ? { cursor } : {});
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // A catalog that changed between two pages invalidates the cursor: the listing starts again.
    if (r.body.error?.code === -32602 && cursor && /cursor/i.test(r.body.error.message)) return listAll(urls);
    expect(r.body.error, JSON.stringify(r.body)).toBeUndefined();
    names.push(...(r.body.result!.tools as { name: string }[]).map((t) => t.name));
    cursor = r.body.result!.nextCursor as string | undefined;
  } while (cursor && i < 100);
  return names;
}

describe('two gateway processes on one config and one store', () => {
  const children: ChildProcess[] = [];
  let a: string;
  let b: string;
  let toolsFile: string;
  const driftTools = (names: string[]) =>
    writeFileSync(
      toolsFile,
      JSON.stringify(names.map((name) => ({ name, description: name, inputSchema: { type: 'object' } }))),
    );

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mf-instances-'));
    toolsFile = join(dir, 'tools.json');
    driftTools(['keep', 'gone']);
    const extra = Array.from({ length: 12 }, (_, i) => `extra_${i}`).join(',');
    const ref = await start([REFERENCE, 'http', '0'], { REF_TOOLS_EXTRA: extra }, /listening (\d+)/);
    const drift = await start([DRIFT, '--http'], { DRIFT_TOOLS_FILE: toolsFile }, /^(\d+)\n/m);
    children.push(ref.child, drift.child);
    const refPort = ref.match[1]!;
    const driftPort = drift.match[1]!;
    const config = join(dir, 'manifold.json');
    writeFileSync(
      config,
      JSON.stringify({
        mcpServers: {
          ref: { url: `http://127.0.0.1:${refPort}/mcp` },
          d: { url: `http://127.0.0.1:${driftPort}/mcp` },
        },
        gateway: {
          pageSize: 7,
          allowedHosts: [`127.0.0.1:${refPort}`, `127.0.0.1:${driftPort}`],
          store: { path: join(dir, 'state.db') },
          cursorSecret: '${MANIFOLD_CURSOR_SECRET}',
          drift: { recheckSeconds: 1 },
        },
      }),
    );
    const env = { MANIFOLD_CURSOR_SECRET: 'a-secret-both-instances-share-0123456789' };
    const urls: string[] = [];
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      const gw = await start(
        [CLI, 'serve', '--config', config, '--port', String(port)],
        env,
        /"event":"gateway\.catalog"/,
      );
      children.push(gw.child);
      urls.push(`http://127.0.0.1:${port}/mcp`);
    }
    [a, b] = urls as [string, string];
  }, 60_000);

  afterAll(async () => {
    for (const c of children.reverse()) await stopChild(c);
  });

  it('a listing paged alternately on both instances is the listing of either one', async () => {
    const alternating = await listAll([a, b]);
    expect(alternating.length).toBeGreaterThan(14);
    expect(new Set(alternating).size).toBe(alternating.length);
    expect(await listAll([a])).toEqual(alternating);
    expect(await listAll([b])).toEqual(alternating);
    expect(alternating).toContain('d__keep');
    expect(alternating).toContain('ref__extra_11');
  });

  it('a cursor issued by one instance is accepted by the other; a tampered one is -32602 on both', async () => {
    const first = await modernRequest(a, 'tools/list');
    const cursor = first.body.result!.nextCursor as string;
    const next = await modernRequest(b, 'tools/list', { cursor });
    expect(next.status).toBe(200);
    expect((next.body.result!.tools as unknown[]).length).toBeGreaterThan(0);
    for (const url of [a, b]) {
      const bad = await modernRequest(url, 'tools/list', { cursor: `${cursor.slice(0, -2)}xx` });
      expect(bad.body.error!.code).toBe(-32602);
    }
  });

  it('calls go to either instance; listen on the first sees a verified change made upstream', async () => {
    const call = await modernRequest(b, 'tools/call', { name: 'ref__test_simple_text', arguments: {} });
    expect(JSON.stringify(call.body.result!.content)).toContain('simple text');
    const callA = await modernRequest(a, 'tools/call', { name: 'd__keep', arguments: {} });
    expect(JSON.stringify(callA.body.result!.content)).toContain('called keep');
    const listen = await modernListen(a, { toolsListChanged: true });
    try {
      await listen.next((m) => m.method === 'notifications/subscriptions/acknowledged');
      driftTools(['keep']);
      await listen.next((m) => m.method === 'notifications/tools/list_changed', 20_000);
      // Both instances verified the same change on their own.
      for (const url of [a, b]) {
        await eventually(
          async () => !(await listAll([url])).includes('d__gone'),
          `d__gone removed on ${url}`,
        );
      }
    } finally {
      listen.close();
    }
  });
});
