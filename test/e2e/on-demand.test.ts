import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectEra, connectLegacy, connectModern, resultText } from '../helpers/clients.js';
import { CLI, ensureDist, runCli } from '../helpers/dist.js';
import { testIssuer } from '../helpers/factories.js';
import {
  eventually,
  FIXTURE,
  freePort,
  MEMORY,
  ROOT,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

// Servers on demand (#53): a lazy server is listed from its stored, verified catalog and starts on
// the first request that needs it; it stops when idle; gateway.maxRunningServers bounds how many
// run. Processes are counted from /proc, never from the gateway's own say-so.

const HOSTILE = resolve(ROOT, 'test/fixtures/hostile-stdio.mjs');

/** The argv of every live process. */
function processes(): { pid: number; argv: string[] }[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((pid) => {
      try {
        return [{ pid: Number(pid), argv: readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0') }];
      } catch {
        return [];
      }
    });
}

/** The servers (node processes, not a sandbox's bwrap or prlimit) started with `marker`, by their `--n=`. */
function runningServers(marker: string): string[] {
  return processes()
    .filter((p) => p.argv[0] === process.execPath && p.argv.includes(`--marker=${marker}`))
    .map((p) => p.argv.find((a) => a.startsWith('--n='))!.slice(4))
    .sort();
}

async function health(gw: TestGateway): Promise<Record<string, string>> {
  const h = (await (await fetch(gw.url.replace('/mcp', '/healthz'))).json()) as {
    upstreams: { name: string; state: string }[];
  };
  return Object.fromEntries(h.upstreams.map((u) => [u.name, u.state]));
}

const lazyServers = (marker: string, count: number, extra: Record<string, unknown> = {}) =>
  Object.fromEntries(
    Array.from({ length: count }, (_, i) => [
      `s${i}`,
      {
        command: process.execPath,
        args: [FIXTURE, `--marker=${marker}`, `--n=${i}`],
        start: 'lazy',
        ...extra,
      },
    ]),
  );

describe('twenty lazy servers, one used', () => {
  const marker = `twenty-${process.pid}-${Date.now()}`;
  let dir: string;
  let gw: TestGateway;
  const config = () => ({
    mcpServers: lazyServers(marker, 20, { idleStopSeconds: 2 }),
    gateway: { store: { path: join(dir, 'state.db') } },
  });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-ondemand-'));
    // A first gateway on this store has no catalog for them: it starts each once, lists and
    // verifies it, stores the catalog, and stops it.
    const first = await startTestGateway(config());
    await eventually(
      () => runningServers(marker).length === 0,
      () => `running: ${runningServers(marker)}`,
    );
    expect(Object.values(await health(first)).every((s) => s === 'idle')).toBe(true);
    await first.stop();
    gw = await startTestGateway(config());
  }, 90_000);

  afterAll(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts none of them, and lists every one from its stored catalog', async () => {
    expect(runningServers(marker)).toEqual([]);
    expect(gw.logs.filter((l) => l.event === 'upstream.spawned')).toEqual([]);
    const h = await connectEra(gw.url, 'v1');
    const { tools } = await h.client.listTools();
    for (let i = 0; i < 20; i++) expect(tools.map((t) => t.name)).toContain(`s${i}__sleep`);
    await h.close();
    expect(runningServers(marker)).toEqual([]);
    expect(new Set(Object.values(await health(gw)))).toEqual(new Set(['idle']));
  });

  describe.each([
    ['v1', '7'],
    ['v2', '13'],
  ] as const)('through a %s client', (era, n) => {
    let h: AnyHandle;
    beforeAll(async () => {
      h = await connectEra(gw.url, era);
    });
    afterAll(() => h?.close());

    it('the first call starts exactly its server; it stops after idleStopSeconds and starts again on the next call', async () => {
      // The other era's server, started at the end of its own test, stops first.
      await eventually(
        () => runningServers(marker).length === 0,
        () => `running: ${runningServers(marker)}`,
        15_000,
      );
      const before = gw.logs.length;
      const first = await h.client.callTool({ name: `s${n}__stats`, arguments: {} });
      expect(resultText(first)).toContain('calls');
      expect(runningServers(marker)).toEqual([n]);
      const started = gw.logs.slice(before).find((l) => l.event === 'upstream.started_on_demand');
      expect(started?.server).toBe(`s${n}`);
      // The first call's added latency, for the record (the bench measures it: --only local).
      expect(typeof started?.ms).toBe('number');
      // The drift gate checked the listing it started with (as on any connection).
      expect(gw.logs.slice(before).some((l) => l.event === 'upstream.ready' && l.server === `s${n}`)).toBe(
        true,
      );

      await eventually(
        () => runningServers(marker).length === 0,
        () => `running: ${runningServers(marker)}`,
        15_000,
      );
      expect((await health(gw))[`s${n}`]).toBe('idle');
      expect(
        gw.logs.some((l) => l.event === 'upstream.stopped' && l.server === `s${n}` && l.reason === 'idle'),
      ).toBe(true);
      // Still listed while stopped.
      const listed = await h.client.listTools();
      expect(listed.tools.map((t) => t.name)).toContain(`s${n}__sleep`);

      const again = await h.client.callTool({ name: `s${n}__stats`, arguments: {} });
      expect(resultText(again)).toContain('calls');
      expect(runningServers(marker)).toEqual([n]);
    });
  });
});

describe('a stopped server that fails to start again', () => {
  const marker = `failing-${process.pid}-${Date.now()}`;
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-ondemand-fail-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each(['v1', 'v2'] as const)(
    'keeps its verified tools listed, and the call says it was not sent (%s client)',
    async (era) => {
      // A path its sandbox must bind: present for its first start, gone before the next.
      const needed = join(dir, `needed-${era}`);
      mkdirSync(needed);
      const gw = await startTestGateway({
        mcpServers: {
          flaky: {
            command: process.execPath,
            args: [FIXTURE, `--marker=${marker}`, `--n=${era}`],
            start: 'lazy',
            sandbox: { network: false, filesystem: { read: [needed] } },
          },
        },
        gateway: { serverDataDir: join(dir, 'servers') },
      });
      try {
        // Listed once at start (no stored catalog), then stopped.
        await eventually(async () => (await health(gw)).flaky === 'idle', 'the first listing');
        rmSync(needed, { recursive: true });
        const h = await connectEra(gw.url, era);
        const names = async () => (await h.client.listTools()).tools.map((t) => t.name);
        expect(await names()).toContain('flaky__sleep');
        let message = '';
        try {
          message = resultText(await h.client.callTool({ name: 'flaky__stats', arguments: {} }));
        } catch (e) {
          message = (e as Error).message;
        }
        expect(message).toMatch(
          /server flaky is not connected right now \((backoff|failed)\); the call was not sent/,
        );
        expect(
          gw.logs.some((l) => l.event === 'upstream.unavailable' && l.rule === 'sandbox-path-missing'),
        ).toBe(true);
        // One failed start does not make its tools vanish.
        expect(await names()).toContain('flaky__sleep');
        await h.close();
      } finally {
        await gw.stop();
      }
    },
    30_000,
  );
});

describe('gateway.maxRunningServers', () => {
  const marker = `bound-${process.pid}-${Date.now()}`;
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({
      mcpServers: lazyServers(marker, 3, { idleStopSeconds: 0 }),
      // The start waits for room min(5 s, connectTimeoutMs): 3 s here, less than the busy call below.
      gateway: { maxRunningServers: 1, connectTimeoutMs: 3000 },
    });
    await eventually(
      () => runningServers(marker).length === 0,
      () => `running: ${runningServers(marker)}`,
    );
  }, 60_000);
  afterAll(() => gw?.stop());

  it.each(['v1', 'v2'] as const)(
    'with the bound reached, the least recently used idle server stops first (%s client)',
    async (era) => {
      const h = await connectEra(gw.url, era);
      await h.client.callTool({ name: 's0__stats', arguments: {} });
      expect(runningServers(marker)).toEqual(['0']);
      await h.client.callTool({ name: 's1__stats', arguments: {} });
      expect(runningServers(marker)).toEqual(['1']);
      expect(
        gw.logs.some((l) => l.event === 'upstream.stopped' && l.server === 's0' && l.reason === 'make-room'),
      ).toBe(true);
      await h.close();
    },
  );

  it('when none is idle, a start waits briefly, then fails with a clear error', async () => {
    const h = await connectEra(gw.url, 'v1');
    await h.client.callTool({ name: 's2__stats', arguments: {} });
    const busy = h.client.callTool({ name: 's2__sleep', arguments: { ms: 8000 } });
    await eventually(
      () => gw.logs.some((l) => l.event === 'upstream.stopped' && l.server === 's1'),
      'the previous server to stop',
    );
    let message = '';
    try {
      const r = await h.client.callTool({ name: 's0__stats', arguments: {} });
      message = resultText(r);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/maxRunningServers \(1\) servers are running and every one is busy/);
    expect(runningServers(marker)).toEqual(['2']);
    await busy;
    // Once it is idle again, the same start succeeds.
    const ok = await h.client.callTool({ name: 's0__stats', arguments: {} });
    expect(resultText(ok)).toContain('calls');
    expect(runningServers(marker)).toEqual(['0']);
    await h.close();
  });
});

describe('per-tenant instances of a lazy, sandboxed server', () => {
  const marker = `tenants-${process.pid}-${Date.now()}`;
  let gw: TestGateway;
  let dir: string;
  let mint: (tenant: string) => Promise<string>;
  const open: AnyHandle[] = [];
  const as = async (era: 'legacy' | 'modern', tenant: string) => {
    const token = await mint(tenant);
    const h = era === 'legacy' ? await connectLegacy(gw.url, token) : await connectModern(gw.url, token);
    open.push(h);
    return h;
  };
  const graph = async (h: AnyHandle) =>
    resultText(await h.client.callTool({ name: 'mem__read_graph', arguments: {} }));
  const write = (h: AnyHandle, entity: string) =>
    h.client.callTool({
      name: 'mem__create_entities',
      arguments: { entities: [{ name: entity, entityType: 'note', observations: ['kept'] }] },
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-tenants-lazy-'));
    const issuer = await testIssuer('https://issuer.lazy', 'manifold-lazy');
    mint = (tenant) => issuer.mint({ tid: tenant, scope: 'tools:*' }, `${tenant}-user`);
    gw = await startTestGateway({
      mcpServers: {
        mem: {
          command: process.execPath,
          args: [MEMORY, `--marker=${marker}`, '--n=mem'],
          env: { MEMORY_FILE_PATH: '/data/memory.jsonl' },
          isolation: 'per-tenant',
          start: 'lazy',
          idleStopSeconds: 2,
          sandbox: { network: false },
        },
      },
      gateway: {
        auth: { ...issuer.auth, tenantClaim: 'tid' },
        maxRunningServers: 2,
        serverDataDir: join(dir, 'servers'),
      },
    });
    await eventually(
      () => runningServers(marker).length === 0,
      () => `running: ${runningServers(marker)}`,
    );
  }, 60_000);

  afterAll(async () => {
    for (const h of open) await h.close().catch(() => {});
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('J1: each tenant gets its own sandboxed instance and data directory, within maxRunningServers, stopped when idle', async () => {
    const acme = await as('legacy', 'acme');
    const globex = await as('modern', 'globex');
    await write(acme, 'acme-note');
    await write(globex, 'globex-note');
    expect(runningServers(marker)).toEqual(['mem', 'mem']);
    const file = (tenant: string) =>
      readFileSync(join(dir, 'servers', 'mem', tenant, 'memory.jsonl'), 'utf8');
    expect(file('acme')).toContain('acme-note');
    expect(file('acme')).not.toContain('globex-note');
    expect(file('globex')).toContain('globex-note');
    expect(await graph(globex)).not.toContain('acme-note');

    // A third tenant: the bound is two, so the least recently used idle instance (acme's) stops.
    const initech = await as('modern', 'initech');
    expect(await graph(initech)).not.toContain('note');
    expect(runningServers(marker)).toHaveLength(2);
    expect(gw.logs.some((l) => l.event === 'upstream.stopped' && l.reason === 'make-room')).toBe(true);

    // Idle past idleStopSeconds: every instance stops; the next call starts acme's again, its data kept.
    await eventually(
      () => runningServers(marker).length === 0,
      () => `running: ${runningServers(marker)}`,
      15_000,
    );
    expect(await graph(acme)).toContain('acme-note');
    expect(runningServers(marker)).toEqual(['mem']);
  });
});

describe('the built gateway and its sandboxed children', () => {
  const base = `${process.pid}-${Date.now()}`;
  const marker = `kill-${base}`;
  let dir: string;
  beforeAll(() => {
    ensureDist();
    dir = mkdtempSync(join(tmpdir(), 'manifold-kill9-'));
  }, 200_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each(['SIGKILL', 'SIGTERM'] as const)(
    'J2: %s to the gateway leaves no sandboxed child behind, lazy or eager',
    async (signal) => {
      const marker = `${signal}-${base}`;
      const port = await freePort();
      const server = (n: string, start: string) => ({
        command: process.execPath,
        args: [HOSTILE, `--marker=${marker}`, `--n=${n}`],
        start,
        sandbox: { network: false },
      });
      writeFileSync(
        join(dir, 'manifold.json'),
        JSON.stringify({
          mcpServers: { eager: server('eager', 'eager'), lazy: server('lazy', 'lazy') },
          gateway: { port, store: false, serverDataDir: join(dir, 'servers') },
        }),
      );
      const gateway: ChildProcess = spawn(
        process.execPath,
        [CLI, 'serve', '--config', join(dir, 'manifold.json')],
        {
          cwd: dir,
          stdio: 'ignore',
        },
      );
      try {
        const url = `http://127.0.0.1:${port}/mcp`;
        await eventually(async () => {
          try {
            const h = await fetch(url.replace('/mcp', '/healthz'));
            const body = (await h.json()) as { upstreams: { name: string; state: string }[] };
            return body.upstreams.every((u) => u.state === 'ready' || u.state === 'idle');
          } catch {
            return false;
          }
        }, 'the gateway to serve');
        await eventually(
          () => runningServers(marker).join() === 'eager',
          () => `running: ${runningServers(marker)}`,
        );
        const h = await connectEra(url, 'v2');
        expect(
          resultText(await h.client.callTool({ name: 'lazy__read_env', arguments: { name: 'HOME' } })),
        ).toBe('ok: /data');
        expect(runningServers(marker)).toEqual(['eager', 'lazy']);
        // bwrap and prlimit on the way to each: every process that names the marker must go.
        const all = () => processes().filter((p) => p.argv.includes(`--marker=${marker}`));
        expect(all().length).toBeGreaterThan(2);
        gateway.kill(signal);
        await eventually(
          () => all().length === 0,
          () => `left behind: ${all().map((p) => p.argv[0])}`,
        );
        await h.close().catch(() => {});
      } finally {
        gateway.kill('SIGKILL');
      }
    },
    60_000,
  );

  it('J1: without bubblewrap, a server that asks for a sandbox does not start; check says how to install it, and how a lazy server is listed', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'manifold-nopath-'));
    writeFileSync(
      join(dir, 'nobwrap.json'),
      JSON.stringify({
        mcpServers: {
          contained: {
            command: process.execPath,
            args: [HOSTILE, `--marker=${marker}`, '--n=x'],
            sandbox: {},
          },
          open: { command: process.execPath, args: [FIXTURE], sandbox: false },
          later: { command: process.execPath, args: [FIXTURE], start: 'lazy' },
        },
        gateway: { store: false, serverDataDir: join(dir, 'servers') },
      }),
    );
    const r = await runCli(['check', '--config', join(dir, 'nobwrap.json')], {
      env: { PATH: empty },
      cwd: dir,
    });
    rmSync(empty, { recursive: true, force: true });
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(
      /^contained\s+stdio\s+unsupported\s.*no-net\s+.*bubblewrap \(bwrap\) and prlimit (and setpriv )?\(util-linux\) are not installed/m,
    );
    expect(r.stdout).toMatch(
      /no sandbox, so not started: .* \(apt-get install bubblewrap util-linux\), or set "sandbox": false$/m,
    );
    expect(r.stdout).toMatch(/^open\s+stdio\s+ready\s.*none/m);
    expect(r.stdout).toMatch(
      /^contained: sandbox: no network; data .*servers\/contained; 2048 MiB, 256 procs, 1024 files$/m,
    );
    expect(processes().filter((p) => p.argv.includes('--n=x'))).toEqual([]);
    // A lazy server is started by check, and check says how a gateway lists it.
    expect(r.stdout).toMatch(/^later\s+stdio\s+ready\s/m);
    expect(r.stdout).toMatch(
      /^later: lazy \(stops after 600 s idle\); no stored catalog yet: a gateway on this store starts it once when it starts/m,
    );
  }, 60_000);
});
