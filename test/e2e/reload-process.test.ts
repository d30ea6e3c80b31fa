import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type AnyHandle,
  connectLegacy,
  connectModern,
  type LegacyHandle,
  type ModernHandle,
} from '../helpers/clients.js';
import { EVERYTHING, eventually, FIXTURE, freePort, ROOT } from '../helpers/harness.js';

// Issue #16's "reload under load with no dropped call": the built CLI as a user runs it, two
// clients calling in a loop while the config file is rewritten (added, removed and changed
// servers), then SIGHUP for one more change, then a config with errors that must be refused.
const CLI = resolve(ROOT, 'dist/manifold.js');
const SECRET = 'reload-secret-value-7f3a9c';

interface Log {
  event?: string;
  [k: string]: unknown;
}

function startCli(config: string): { child: ChildProcess; logs: Log[]; stderr: string[] } {
  const child = spawn(process.execPath, [CLI, 'serve', '--config', config, '--log-format', 'json'], {
    cwd: ROOT,
    env: { ...process.env, RELOAD_SECRET: SECRET },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const logs: Log[] = [];
  const stderr: string[] = [];
  let buf = '';
  child.stderr?.on('data', (d: Buffer) => {
    buf += d.toString('utf8');
    let nl = buf.indexOf('\n');
    while (nl !== -1) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      stderr.push(line);
      if (line.startsWith('{')) logs.push(JSON.parse(line) as Log);
      nl = buf.indexOf('\n');
    }
  });
  return { child, logs, stderr };
}

const fixture = (env: Record<string, string> = {}) => ({ command: process.execPath, args: [FIXTURE], env });
const ev = { command: process.execPath, args: [EVERYTHING, 'stdio'] };

async function names(h: AnyHandle): Promise<string[]> {
  return (await h.client.listTools()).tools.map((t) => t.name);
}

describe('reload under load (the CLI, SIGHUP and the watched file)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'manifold-reload-'));
  const file = join(dir, 'manifold.json');
  let proc: ReturnType<typeof startCli> | undefined;
  let legacy: LegacyHandle | undefined;
  let modern: ModernHandle | undefined;

  afterAll(async () => {
    await legacy?.close().catch(() => {});
    await modern?.close().catch(() => {});
    if (proc && proc.child.exitCode === null) {
      const exited = new Promise((r) => proc!.child.once('exit', r));
      proc.child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('applies added, removed and changed servers with no failed call, keeps sessions and children, refuses a bad config whole', async () => {
    const port = await freePort();
    const gateway = { port, store: false };
    const write = (servers: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      writeFileSync(
        file,
        JSON.stringify({ mcpServers: servers, gateway: { ...gateway, ...extra } }, null, 2),
      );
    write({ ev, fx: fixture(), gone: fixture(), chg: fixture() });
    proc = startCli(file);
    const p = proc;
    const reloaded = () => p.logs.filter((l) => l.event === 'config.reloaded');
    await eventually(
      () => p.logs.some((l) => l.event === 'gateway.listening'),
      'the gateway listens',
      20_000,
    );
    const url = `http://127.0.0.1:${port}/mcp`;
    [legacy, modern] = await Promise.all([
      connectLegacy(url),
      connectModern(url, undefined, { listen: true }),
    ]);
    const l = legacy;
    const m = modern;
    await eventually(async () => (await names(l)).includes('chg__sleep'), 'every server listed', 30_000);
    await eventually(() => l.wire.some((r) => r.method === 'GET' && r.status === 200), 'the GET stream');
    const sessionId = l.transport.sessionId;
    expect(sessionId).toBeTruthy();

    // The load: both clients call the two unchanged servers until told to stop (bounded).
    let stop = false;
    const failures: string[] = [];
    let calls = 0;
    const loop = async (h: AnyHandle) => {
      const until = Date.now() + 60_000;
      for (let i = 0; !stop && Date.now() < until && calls < 5000; i++) {
        const call =
          i % 2 === 0
            ? { name: 'ev__echo', arguments: { message: `m${i}` } }
            : { name: 'fx__sleep', arguments: { ms: 5 } };
        try {
          const r = (await h.client.callTool(call)) as { isError?: boolean; content?: unknown };
          if (r.isError) failures.push(`${h.era} ${call.name}: ${JSON.stringify(r.content)}`);
        } catch (e) {
          failures.push(`${h.era} ${call.name}: ${String(e)}`);
        }
        calls++;
      }
    };
    const loops = Promise.all([loop(l), loop(m)]);

    // 1. The watched file, replaced by a rename as editors save: one added, one removed, one changed.
    const tmp = join(dir, '.manifold.json.tmp');
    writeFileSync(
      tmp,
      JSON.stringify({
        mcpServers: { ev, fx: fixture(), chg: fixture({ FIXTURE_MODE: 'normal' }), added: fixture() },
        gateway,
      }),
    );
    const saved = Date.now();
    renameSync(tmp, file);
    await eventually(() => reloaded().length === 1, 'the first reload', 30_000);
    expect(reloaded()[0]).toMatchObject({ added: ['added'], removed: ['gone'], changed: ['chg'] });

    // 2. Watching turned off in the file (applied by the watch itself) ...
    const v2 = { ev, fx: fixture(), chg: fixture({ FIXTURE_MODE: 'normal' }), added: fixture() };
    write(v2, { watchConfig: false });
    await eventually(() => reloaded().length === 2, 'the second reload', 30_000);
    // ... so the next change waits for SIGHUP.
    write({ ...v2, late: fixture() }, { watchConfig: false });
    // Waiting to see that nothing happens: a watch still on would reload within this second.
    await new Promise((r) => setTimeout(r, 1000));
    expect(reloaded()).toHaveLength(2);
    p.child.kill('SIGHUP');
    await eventually(() => reloaded().length === 3, 'the reload on SIGHUP', 30_000);
    expect(reloaded()[2]).toMatchObject({ added: ['late'], removed: [], changed: [] });
    // The same text again is no reload.
    p.child.kill('SIGHUP');
    await eventually(() => p.logs.some((x) => x.event === 'config.reload_unchanged'), 'SIGHUP seen', 20_000);
    expect(reloaded()).toHaveLength(3);

    // The legacy session is the same one, and still works.
    expect(l.transport.sessionId).toBe(sessionId);
    expect((await l.client.callTool({ name: 'fx__sleep', arguments: { ms: 1 } })).isError).toBeFalsy();
    // The unchanged servers' children were never restarted: one spawn each, still running.
    for (const server of ['ev', 'fx']) {
      const spawned = p.logs.filter((x) => x.event === 'upstream.spawned' && x.server === server);
      expect(spawned, server).toHaveLength(1);
      expect(() => process.kill(spawned[0]!.pid as number, 0), server).not.toThrow();
    }
    // The replaced server got a new child; the removed one's is gone.
    const pidsOf = (server: string) =>
      p.logs.filter((x) => x.event === 'upstream.spawned' && x.server === server).map((x) => x.pid as number);
    expect(pidsOf('chg')).toHaveLength(2);
    const gonePid = pidsOf('gone')[0]!;
    await eventually(() => {
      try {
        process.kill(gonePid, 0);
        return false;
      } catch {
        return true;
      }
    }, 'the removed server stopped');
    // The load ran through every reload and the old upstreams' retirement.
    stop = true;
    await loops;
    expect(failures).toEqual([]);
    expect(calls).toBeGreaterThan(20);
    const tookMs = Date.parse(String(reloaded()[0]!.time)) - saved;
    console.log(
      `reload under load: ${calls} calls, none failed; first reload logged ${tookMs} ms after the save`,
    );
    for (const h of [l, m]) {
      const listed = await names(h);
      expect(listed).toEqual(
        expect.arrayContaining(['added__sleep', 'late__sleep', 'chg__sleep', 'ev__echo']),
      );
      expect(listed.some((n) => n.startsWith('gone__'))).toBe(false);
      expect(h.listChanged.count, h.era).toBeGreaterThanOrEqual(1);
    }

    // 4. A config with two errors (one of them in an interpolated value) is refused whole.
    writeFileSync(
      file,
      JSON.stringify({
        mcpServers: { ev, broken: { type: 'stdio' } },
        gateway: { ...gateway, watchConfig: false, pageSize: '${RELOAD_SECRET}' },
      }),
    );
    p.child.kill('SIGHUP');
    await eventually(() => p.logs.some((x) => x.event === 'config.reload_refused'), 'the refusal', 20_000);
    const refusal = p.logs.find((x) => x.event === 'config.reload_refused')!;
    const errors = refusal.errors as { path: string; message: string; fix?: string }[];
    expect(errors.map((e) => e.path).sort()).toEqual(['gateway.pageSize', 'mcpServers.broken.command']);
    for (const e of errors) expect(e.fix).toBeTruthy();
    expect(p.stderr.join('\n')).not.toContain(SECRET);
    // The old config keeps serving, and the process is alive.
    expect(p.child.exitCode).toBeNull();
    expect(reloaded()).toHaveLength(3);
    expect(await names(m)).toContain('late__sleep');
    expect((await m.client.callTool({ name: 'late__sleep', arguments: { ms: 1 } })).isError).toBeFalsy();
  }, 180_000);
});
