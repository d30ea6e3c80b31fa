import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  EVERYTHING,
  eventually,
  FIXTURE,
  freePort,
  MEMORY,
  ROOT,
} from '../helpers/harness.js';

// The built CLI as a user runs it: a real process, signals, exit codes, its children in /proc.
const CLI = resolve(ROOT, 'dist/manifold.js');
const STUBBORN = resolve(ROOT, 'test/fixtures/stubborn-stdio.mjs');

interface Proc {
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
  /** Parsed JSON log lines from stderr. */
  logs: { event?: string; [k: string]: unknown }[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function run(command: string, args: string[], options: { cwd?: string; detached?: boolean } = {}): Proc {
  const child = spawn(command, args, {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
  const proc: Proc = {
    child,
    stdout: [],
    stderr: [],
    logs: [],
    exited: new Promise((res) => child.once('exit', (code, signal) => res({ code, signal }))),
  };
  const lines = (sink: string[], onLine?: (l: string) => void) => {
    let buf = '';
    return (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      let nl = buf.indexOf('\n');
      while (nl !== -1) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        sink.push(line);
        onLine?.(line);
        nl = buf.indexOf('\n');
      }
    };
  };
  child.stdout?.on('data', lines(proc.stdout));
  child.stderr?.on(
    'data',
    lines(proc.stderr, (l) => {
      if (!l.startsWith('{')) return;
      try {
        proc.logs.push(JSON.parse(l));
      } catch {
        // not a log line
      }
    }),
  );
  return proc;
}

/** Waits for exit within `ms`; a process that outlives it is killed and the test fails. */
async function exitWithin(proc: Proc, ms: number, what: string) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, rej) => {
    timer = setTimeout(() => {
      proc.child.kill('SIGKILL');
      rej(new Error(`${what} did not exit within ${ms} ms`));
    }, ms);
  });
  try {
    return await Promise.race([proc.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs the CLI to completion. */
async function cli(args: string[], ms = 20_000) {
  const proc = run(process.execPath, [CLI, ...args]);
  const { code } = await exitWithin(proc, ms, `manifold ${args.join(' ')}`);
  return { code, stdout: proc.stdout.join('\n'), stderr: proc.stderr.join('\n') };
}

/** ppid of a process from /proc/<pid>/stat, or undefined if it is gone. */
function procStat(pid: number): { ppid: number; state: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may contain spaces: parse after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0]!, ppid: Number(rest[1]) };
  } catch {
    return undefined;
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** The gateway's children, without its reaper (the `sh` that kills them if it dies, #13.15). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    if (procStat(Number(entry))?.ppid === pid && !isReaper(Number(entry))) out.push(Number(entry));
  }
  return out;
}

function isReaper(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes("trap '' INT TERM HUP");
  } catch {
    return false;
  }
}

/**
 * The example's servers under the gateway: each runs in a sandbox (bwrap, then prlimit, then the
 * server), so every process of that chain names the server. The gateway's own children are the
 * first of each chain: the ones whose parent does not name a server. All of them must go on stop.
 */
function exampleServers(tree: number[]): { top: number[]; all: number[] } {
  const named = (p: number) => /server-everything|server-memory/.test(cmdline(p));
  const all = tree.filter(named);
  return { all, top: all.filter((p) => !named(procStat(p)?.ppid ?? 0)) };
}

function descendantsOf(pid: number): number[] {
  const out: number[] = [];
  const queue = [pid];
  for (let guard = 0; queue.length > 0 && guard < 10_000; guard++) {
    const p = queue.shift()!;
    for (const c of childrenOf(p)) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

/** kill(pid, 0) succeeds for a live process; a zombie awaiting its reaper is already dead. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw e;
  }
  return procStat(pid)?.state !== 'Z';
}

interface UpstreamHealth {
  name: string;
  state: string;
}

async function healthz(base: string): Promise<{ status: string; upstreams: UpstreamHealth[] } | undefined> {
  try {
    const r = await fetch(`${base}/healthz`);
    return r.ok ? await r.json() : undefined;
  } catch {
    return undefined;
  }
}

async function waitAllReady(base: string, names: string[], proc: Proc) {
  await eventually(
    async () => {
      if (proc.child.exitCode !== null) {
        throw new Error(`the gateway exited early: ${proc.stderr.join('\n').slice(-2000)}`);
      }
      const h = await healthz(base);
      return names.every((n) => h?.upstreams.find((u) => u.name === n)?.state === 'ready');
    },
    `${names.join(', ')} ready at ${base}/healthz`,
  );
}

function textOf(res: unknown): string {
  return (res as { content: { text: string }[] }).content[0]?.text ?? '';
}

let dir: string;

beforeAll(() => {
  if (!existsSync(CLI)) {
    throw new Error(`${CLI} is missing: run \`npm run build\` before the e2e suite (npm test does this).`);
  }
  dir = mkdtempSync(join(tmpdir(), 'manifold-process-'));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function writeConfig(
  name: string,
  config: { gateway?: Record<string, unknown> } & Record<string, unknown>,
): string {
  const path = join(dir, name);
  // Each config keeps its drift state in the temp dir, away from the repo's .manifold/.
  const gateway = { store: { path: join(dir, `${name}.db`) }, ...config.gateway };
  writeFileSync(path, JSON.stringify({ ...config, gateway }, null, 2));
  return path;
}

describe('F6: manifold serve and SIGTERM', () => {
  it('F6: SIGTERM exits 0 and leaves no stdio child behind', async () => {
    const port = await freePort();
    const config = writeConfig('serve.json', {
      mcpServers: {
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        memory: {
          command: process.execPath,
          args: [MEMORY],
          env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
        },
      },
    });
    const gw = run(process.execPath, [CLI, 'serve', '--config', config, '--port', String(port)]);
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitAllReady(base, ['everything', 'memory'], gw);
      const pid = gw.child.pid!;
      const children = childrenOf(pid);
      const cmds = children.map(cmdline);
      expect(cmds.some((c) => c.includes('server-everything'))).toBe(true);
      expect(cmds.some((c) => c.includes('server-memory'))).toBe(true);
      // The gateway logs the pid of every child it spawns; they are the ones found in /proc.
      const logged = gw.logs.filter((l) => l.event === 'upstream.spawned').map((l) => l.pid as number);
      expect([...logged].sort()).toEqual([...children].sort());

      gw.child.kill('SIGTERM');
      const { code, signal } = await exitWithin(gw, 15_000, 'the gateway after SIGTERM');
      expect(signal).toBeNull();
      expect(code).toBe(0);
      for (const c of children) expect(isAlive(c), `child ${c} (${cmds[children.indexOf(c)]})`).toBe(false);
      expect(gw.logs.map((l) => l.event)).toEqual(
        expect.arrayContaining(['gateway.signal', 'gateway.stopped']),
      );
    } finally {
      gw.child.kill('SIGKILL');
    }
  });

  it('F6: SIGTERM drains an in-flight call: the client gets its result, new work is refused', async () => {
    const port = await freePort();
    const config = writeConfig('drain.json', {
      mcpServers: {
        fx: { command: process.execPath, args: [FIXTURE] },
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
      },
    });
    const gw = run(process.execPath, [CLI, 'serve', '--config', config, '--port', String(port)]);
    const client = await (async () => {
      await waitAllReady(`http://127.0.0.1:${port}`, ['fx', 'everything'], gw);
      return connectClient(`http://127.0.0.1:${port}/mcp`);
    })();
    try {
      const children = childrenOf(gw.child.pid!);
      expect(children.length).toBe(2);
      const sleeping = client.callTool({ name: 'fx__sleep', arguments: { ms: 1500 } }, CallToolResultSchema, {
        timeout: 20_000,
      });
      sleeping.catch(() => {});
      await eventually(async () => {
        const stats = JSON.parse(textOf(await client.callTool({ name: 'fx__stats', arguments: {} })));
        return stats.calls >= 1;
      }, 'the sleep call reached the fixture');

      gw.child.kill('SIGTERM');
      await eventually(
        () => gw.logs.some((l) => l.event === 'gateway.signal'),
        'the gateway took the signal',
      );
      // Stops accepting: a new call while draining is refused, not started.
      await expect(
        client.callTool({ name: 'everything__echo', arguments: { message: 'late' } }),
      ).rejects.toThrow();

      const res = await sleeping;
      expect(textOf(res)).toBe('slept 1500');
      const { code } = await exitWithin(gw, 15_000, 'the gateway after draining');
      expect(code).toBe(0);
      for (const c of children) expect(isAlive(c), `child ${c}`).toBe(false);
    } finally {
      await client.close().catch(() => {});
      gw.child.kill('SIGKILL');
    }
  });
});

describe('49.14: SIGTERM while a stdio server is still listing', () => {
  it('49.14: the gateway and its child are gone within 10 s of SIGTERM, though tools/list is never answered', async () => {
    const port = await freePort();
    const config = writeConfig('hang-list.json', {
      mcpServers: {
        slow: { command: process.execPath, args: [FIXTURE], env: { FIXTURE_MODE: 'hang-list' } },
      },
      // The listing deadline is far beyond the 10 s: only the stop itself can end the child.
      gateway: { listTimeoutMs: 60_000 },
    });
    const gw = run(process.execPath, [CLI, 'serve', '--config', config, '--port', String(port)]);
    const pid = gw.child.pid!;
    let children: number[] = [];
    try {
      // Initialize answered, tools/list received and never answered: the child says so on stderr.
      await eventually(
        () =>
          gw.logs.some(
            (l) => l.event === 'upstream.stderr' && String(l.line).includes('tools/list received'),
          ),
        'the stdio server is listing',
      );
      children = childrenOf(pid);
      expect(children.map(cmdline).filter((c) => c.includes('fixture-server'))).toHaveLength(1);
      gw.child.kill('SIGTERM');
      await eventually(
        () => !isAlive(pid) && children.every((c) => !isAlive(c)),
        'the gateway and its child gone after SIGTERM',
        10_000,
      );
      expect((await gw.exited).code).toBe(0);
      expect(gw.logs.map((l) => l.event)).toContain('gateway.stopped');
    } finally {
      gw.child.kill('SIGKILL');
      for (const c of children) if (isAlive(c)) process.kill(c, 'SIGKILL');
    }
  });
});

describe('the log reader goes away', () => {
  it('a gateway whose stderr is closed (a closed terminal, a dead log pipe) keeps serving', async () => {
    const port = await freePort();
    const config = writeConfig('stderr-gone.json', {
      mcpServers: { everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] } },
    });
    const gw = run(process.execPath, [CLI, 'serve', '--config', config, '--port', String(port)]);
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitAllReady(base, ['everything'], gw);
      // Nobody reads the gateway's stderr any more: its next log line (each call's audit line)
      // fails with EPIPE, which used to end the process with exit code 1.
      gw.child.stderr!.destroy();
      const client = await connectClient(`${base}/mcp`);
      try {
        for (let i = 0; i < 5; i++) {
          const r = await client.callTool({ name: 'everything__echo', arguments: { message: `m${i}` } });
          expect(textOf(r)).toBe(`Echo: m${i}`);
          // Waiting to see that nothing happens: a failed log write would end the process about now.
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        await client.close();
      }
      expect(gw.child.exitCode).toBeNull();
      gw.child.kill('SIGTERM');
      const { code } = await exitWithin(gw, 15_000, 'the gateway after SIGTERM');
      expect(code).toBe(0);
    } finally {
      gw.child.kill('SIGKILL');
    }
  });
});

describe('#13.15 kill -9 of the gateway', () => {
  it('takes its stdio children and their children along, even ones that ignore EOF and SIGTERM', async () => {
    const port = await freePort();
    const pids = join(dir, 'stubborn.pids');
    const config = writeConfig('stubborn.json', {
      mcpServers: {
        stubborn: { command: process.execPath, args: [STUBBORN], env: { STUBBORN_PIDS: pids } },
      },
      gateway: { connectTimeoutMs: 1000 },
    });
    const gw = run(process.execPath, [CLI, 'serve', '--config', config, '--port', String(port)]);
    const read = () =>
      existsSync(pids) ? readFileSync(pids, 'utf8').split('\n').filter(Boolean).map(Number) : [];
    try {
      await eventually(() => read().length >= 2, 'the stubborn child and grandchild started', 15_000);
      const stubborn = read();
      expect(stubborn.every(isAlive)).toBe(true);
      gw.child.kill('SIGKILL');
      await gw.exited;
      await eventually(() => read().every((p) => !isAlive(p)), 'every stubborn process gone', 10_000);
    } finally {
      gw.child.kill('SIGKILL');
      for (const p of read()) if (isAlive(p)) process.kill(p, 'SIGKILL');
    }
  });
});

/** After an npm test: its process group, and whatever of `pids` outlived it. */
function killLeftovers(npm: Proc, pids: (number | undefined)[]): void {
  try {
    process.kill(-npm.child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
  for (const p of pids) if (p !== undefined && isAlive(p)) process.kill(p, 'SIGKILL');
}

describe('README quick start: npm start', () => {
  it('serves examples/manifold.json on 127.0.0.1:8787 with both example servers, and stops clean', async () => {
    const busy = await new Promise<boolean>((res) => {
      const s = createServer();
      s.once('error', () => res(true));
      s.listen(8787, '127.0.0.1', () => s.close(() => res(false)));
    });
    if (busy) {
      throw new Error(
        'port 8787 on 127.0.0.1 is in use: the README quick start needs it. Stop whatever listens there and run again.',
      );
    }
    // detached: npm gets its own process group, as a terminal would give it.
    const npm = run('npm', ['start'], { cwd: ROOT, detached: true });
    let upstreamPids: number[] = [];
    let gatewayPid: number | undefined;
    try {
      await waitAllReady('http://127.0.0.1:8787', ['everything', 'memory'], npm);
      const client = await connectClient('http://127.0.0.1:8787/mcp', 'quick-start');
      const names = (await client.listTools()).tools.map((t) => t.name);
      await client.close();
      expect(names).toContain('everything__echo');
      expect(names).toContain('memory__read_graph');

      // npm -> sh -c -> node cli.js -> the two servers. The gateway is the servers' parent (the
      // sh wrapper's command line names cli.js too, so it is found by parentage, not by name).
      const servers = exampleServers(descendantsOf(npm.child.pid!));
      upstreamPids = servers.all;
      expect(servers.top.length).toBe(2);
      // Sandboxed (bwrap, its pid 1, prlimit's exec of the server): more than the two tops.
      expect(servers.all.length).toBeGreaterThan(2);
      const parents = new Set(servers.top.map((p) => procStat(p)?.ppid));
      expect(parents.size).toBe(1);
      gatewayPid = [...parents][0];
      expect(cmdline(gatewayPid!)).toMatch(/node.* dist\/manifold\.js serve/);

      // Ctrl-C in a terminal signals the whole foreground group; SIGTERM it the same way.
      process.kill(-npm.child.pid!, 'SIGTERM');
      await exitWithin(npm, 15_000, 'npm start after SIGTERM');
      await eventually(() => !isAlive(gatewayPid!), 'the gateway under npm exited', 15_000);
      for (const p of upstreamPids) expect(isAlive(p), `upstream child ${p}`).toBe(false);
      // It shut down gracefully: one signal taken, not a forced exit from npm forwarding a second.
      await eventually(() => npm.logs.some((l) => l.event === 'gateway.stopped'), 'gateway.stopped logged');
      expect(npm.logs.filter((l) => l.event === 'gateway.forced_exit')).toEqual([]);
    } finally {
      killLeftovers(npm, [gatewayPid, ...upstreamPids]);
    }
  });

  it('`kill <pid of npm start>` (npm alone, not its group) stops the gateway and its servers too', async () => {
    const port = await freePort();
    // npm's `sh -c` does not pass npm's SIGTERM on; the gateway sees its shell go and stops.
    const npm = run('npm', ['start', '--', '--port', String(port)], { cwd: ROOT, detached: true });
    let upstreamPids: number[] = [];
    let gatewayPid: number | undefined;
    try {
      await waitAllReady(`http://127.0.0.1:${port}`, ['everything', 'memory'], npm);
      const servers = exampleServers(descendantsOf(npm.child.pid!));
      upstreamPids = servers.all;
      expect(servers.top.length).toBe(2);
      gatewayPid = procStat(servers.top[0]!)?.ppid;
      expect(cmdline(gatewayPid!)).toMatch(/node.* dist\/manifold\.js serve/);

      process.kill(npm.child.pid!, 'SIGTERM');
      await exitWithin(npm, 15_000, 'npm after SIGTERM');
      await eventually(() => !isAlive(gatewayPid!), 'the gateway exited after npm was killed', 15_000);
      for (const p of upstreamPids) expect(isAlive(p), `upstream child ${p}`).toBe(false);
      // A graceful stop, announced as such.
      await eventually(() => npm.logs.some((l) => l.event === 'gateway.stopped'), 'gateway.stopped logged');
      expect(npm.logs.some((l) => l.event === 'gateway.parent_exited' || l.event === 'gateway.signal')).toBe(
        true,
      );
    } finally {
      killLeftovers(npm, [gatewayPid, ...upstreamPids]);
    }
  });
});

describe('manifold check', () => {
  it('prints the table and the exposed names, and exits 0 when every server is ready', async () => {
    const config = writeConfig('check-ok.json', {
      mcpServers: {
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        memory: {
          command: process.execPath,
          args: [MEMORY],
          env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
        },
        modern: {
          command: process.execPath,
          args: [join(ROOT, 'test/fixtures/reference-server.mjs'), 'stdio'],
        },
      },
    });
    const { code, stdout } = await cli(['check', '--config', config]);
    expect(code).toBe(0);
    const lines = stdout.split('\n');
    expect(lines[0]).toMatch(/^SERVER\s+TRANSPORT\s+STATUS\s+TOOLS\s+PROTOCOL\b/);
    expect(lines.find((l) => l.startsWith('everything'))).toMatch(
      /^everything\s+stdio\s+ready\s+\d+\s+legacy 2025-11-25/,
    );
    expect(lines.find((l) => l.startsWith('modern'))).toMatch(
      /^modern\s+stdio\s+ready\s+\d+\s+modern 2026-07-28/,
    );
    expect(lines.find((l) => l.startsWith('memory'))).toMatch(/^memory\s+stdio\s+ready\s+\d+/);
    const exposed = lines.filter((l) => l.startsWith('  ')).map((l) => l.trim());
    expect(exposed).toContain('everything__echo');
    expect(exposed).toContain('memory__read_graph');
    expect(stdout).toMatch(new RegExp(`exposed tools \\(${exposed.length}\\)`));
  });

  it('exits 1 and names the server that is not ready', async () => {
    const config = writeConfig('check-broken.json', {
      mcpServers: {
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        broken: { command: 'manifold-no-such-command-xyz' },
      },
    });
    const { code, stdout } = await cli(['check', '--config', config]);
    expect(code).toBe(1);
    const row = stdout.split('\n').find((l) => l.startsWith('broken'));
    expect(row).toBeDefined();
    expect(row).not.toMatch(/\bready\b/);
    expect(row).toMatch(/ENOENT|could not start/);
    expect(stdout).toMatch(/^everything\s+stdio\s+ready/m);
  });

  it('a stdio server that crashes at start: check shows its last stderr lines and exit code, secrets redacted', async () => {
    const secret = 'sk-e2e-crash-0123456789abcdef';
    process.env.MANIFOLD_E2E_CRASH_TOKEN = secret;
    try {
      const config = writeConfig('check-crash.json', {
        mcpServers: {
          crashy: {
            command: process.execPath,
            args: [
              '-e',
              "console.error('starting up'); console.error('Error: token ' + process.env.TOKEN + ' was refused'); process.exit(3)",
            ],
            env: { TOKEN: '${MANIFOLD_E2E_CRASH_TOKEN}' },
          },
        },
      });
      const { code, stdout, stderr } = await cli(['check', '--config', config]);
      expect(code).toBe(1);
      expect(stdout).toContain('crashy: the last lines it wrote to stderr (it exited with code 3):');
      expect(stdout).toContain('  starting up');
      expect(stdout).toContain('  Error: token [redacted] was refused');
      expect(stdout + stderr).not.toContain(secret);
    } finally {
      delete process.env.MANIFOLD_E2E_CRASH_TOKEN;
    }
  });

  it('exits 2 for an invalid config and names every problem with its JSON path', async () => {
    const config = writeConfig('check-invalid.json', {
      mcpServers: {
        bad__name: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        remote: { url: 'https://mcp.example.com/${MANIFOLD_E2E_UNSET_VAR}' },
      },
    });
    expect(process.env.MANIFOLD_E2E_UNSET_VAR).toBeUndefined();
    const { code, stderr, stdout } = await cli(['check', '--config', config]);
    expect(code).toBe(2);
    expect(stderr).toMatch(/mcpServers\.bad__name: .*__/);
    expect(stderr).toMatch(/mcpServers\.remote\.url: .*MANIFOLD_E2E_UNSET_VAR.*not set/);
    // Nothing was started: no table.
    expect(stdout).not.toMatch(/SERVER\s+TRANSPORT/);
  });

  it('names every bad flag with the config problem beside them; an unknown flag is a usage error', async () => {
    const missing = join(dir, 'no-such-config.json');
    for (const command of ['serve', 'check']) {
      const bad = await cli([
        command,
        '--port',
        'abc',
        '--log-level',
        'loud',
        '--log-format',
        'xml',
        '--config',
        missing,
      ]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--log-level must be one of debug, info, warn, error');
      expect(bad.stderr).toContain('--log-format must be one of json, pretty');
      expect(bad.stderr).toContain('--port must be an integer from 0 to 65535');
      expect(bad.stderr).toContain(`config file not found: ${missing}`);
    }
    // A valid config does not let a bad flag through.
    const config = writeConfig('flags-ok.json', {
      mcpServers: { a: { url: 'https://mcp.example.com/mcp' } },
    });
    const port = await cli(['serve', '--config', config, '--port', '']);
    expect(port.code).toBe(2);
    expect(port.stderr).toContain('--port must be an integer from 0 to 65535');
    // Every command: a flag it does not know (or one without its value) is a usage error.
    for (const args of [
      ['serve', '--bogus'],
      ['check', '--port'],
      ['stdio', '--bogus'],
      ['drift', '--bogus'],
      ['retrust', '--bogus'],
      ['keys', '--bogus'],
    ]) {
      const usage = await cli(args);
      expect(usage.code, args.join(' ')).toBe(2);
      expect(usage.stderr).toMatch(/^manifold( [a-z]+)?: .*(--bogus|--port)/);
      expect(usage.stderr).toMatch(/usage:/i);
    }
    // The stdio front door's log level is checked too: an unknown one let every line through.
    const level = await cli(['stdio', '--log-level', 'loud', '--config', config]);
    expect(level.code).toBe(2);
    expect(level.stderr).toContain('--log-level must be one of debug, info, warn, error');
    // So are its profile (it served a profile the config does not have) and its log file (one in
    // a missing folder ended the process with an unhandled error).
    const profile = await cli(['stdio', '--profile', 'nope', '--config', config]);
    expect(profile.code).toBe(2);
    expect(profile.stderr).toContain('no profile named "nope"');
    const logFile = await cli(['stdio', '--log-file', join(dir, 'missing', 'x.log'), '--config', config]);
    expect(logFile.code).toBe(2);
    expect(logFile.stderr).toContain('cannot open --log-file: ENOENT');
    expect(logFile.stderr).not.toContain('Unhandled');
  });

  it('--log-format pretty writes readable lines; a bad format is refused; check shows each warning once', async () => {
    const config = writeConfig('pretty.json', {
      mcpServers: { everything: { command: process.execPath, args: [EVERYTHING, 'stdio'], timout: 5 } },
    });
    const gw = run(process.execPath, [
      CLI,
      'serve',
      '--config',
      config,
      '--port',
      '0',
      '--log-format',
      'pretty',
    ]);
    try {
      await eventually(
        () =>
          gw.stderr.some((l) =>
            /^\d\d:\d\d:\d\d\.\d{3} INFO {2}gateway\.listening url=http:\/\/127\.0\.0\.1:\d+\/mcp/.test(l),
          ),
        'a pretty gateway.listening line',
        15_000,
      );
      expect(
        gw.stderr.some((l) => /WARN {2}config\.warning path=mcpServers\.everything\.timout/.test(l)),
      ).toBe(true);
      expect(gw.logs).toEqual([]);
    } finally {
      gw.child.kill('SIGTERM');
      await exitWithin(gw, 15_000, 'the pretty gateway after SIGTERM');
    }
    const bad = await cli(['serve', '--config', config, '--log-format', 'xml']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--log-format must be one of json, pretty');
    const checked = await cli(['check', '--config', config]);
    expect(checked.code).toBe(0);
    expect(checked.stderr.split('\n').filter((l) => l.includes('timout')).length).toBe(1);
  });

  it('an invalid config still shows the "did you mean" of its misspelt keys (comand, isuer)', async () => {
    const config = writeConfig('check-typos.json', {
      mcpServers: { a: { comand: process.execPath } },
      gateway: { auth: { isuer: 'https://issuer.example', audience: 'manifold', secret: 'x'.repeat(32) } },
    });
    const serve = await cli(['serve', '--config', config, '--port', '0']);
    for (const { code, stderr } of [await cli(['check', '--config', config]), serve]) {
      expect(code).toBe(2);
      expect(stderr).toMatch(/mcpServers\.a: has neither "command" nor "url"/);
      expect(stderr).toMatch(/gateway\.auth\.issuer: is missing/);
      expect(stderr).toMatch(/mcpServers\.a\.comand: unknown key "comand".*did you mean "command"\?/);
      expect(stderr).toMatch(/gateway\.auth\.isuer: unknown key "isuer".*did you mean "issuer"\?/);
    }
  });
});
