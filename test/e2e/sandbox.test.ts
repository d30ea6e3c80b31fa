import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectEra, resultText } from '../helpers/clients.js';
import {
  EVERYTHING,
  eventually,
  MEMORY,
  ROOT,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

// SECURITY J1: a sandboxed stdio server sees only its declared paths, environment and network.
// The hostile fixture tries each escape twice: once contained (it must fail) and once from an
// identical server without a sandbox (the control: it must succeed, so the failure is the sandbox).

const HOSTILE = resolve(ROOT, 'test/fixtures/hostile-stdio.mjs');

let gw: TestGateway;
let work: string;
let outside: string;
let listener: Server;
let port: number;
/** Connections the loopback listener accepted. */
let accepted = 0;

async function call(h: AnyHandle, name: string, args: Record<string, unknown>): Promise<string> {
  const r = await h.client.callTool({ name, arguments: args });
  return resultText(r);
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'manifold-sandbox-gw-'));
  outside = mkdtempSync(join(tmpdir(), 'manifold-sandbox-outside-'));
  writeFileSync(join(outside, 'secret.txt'), 'the operator keeps this');
  listener = createServer((s) => {
    accepted++;
    s.end();
  });
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', () => r()));
  port = (listener.address() as { port: number }).port;
  const hostile = { command: process.execPath, args: [HOSTILE], env: { GIVEN: 'by its config' } };
  gw = await startTestGateway({
    mcpServers: {
      contained: {
        ...hostile,
        sandbox: { network: false, limits: { processes: 24 } },
      },
      control: { ...hostile, sandbox: false },
      egress: { ...hostile, sandbox: { network: 'egress', allowHosts: [`127.0.0.1:${port}`] } },
      everything: { command: process.execPath, args: [EVERYTHING, 'stdio'], sandbox: { network: false } },
      memory: {
        command: process.execPath,
        args: [MEMORY],
        env: { MEMORY_FILE_PATH: '/data/memory.jsonl' },
        sandbox: { network: false },
      },
    },
    gateway: { serverDataDir: join(work, 'servers') },
  });
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  listener?.close();
  rmSync(work, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

describe.each(['v1', 'v2'] as const)('a sandboxed stdio server, through a %s client', (era) => {
  let h: AnyHandle;
  beforeAll(async () => {
    h = await connectEra(gw.url, era);
  });
  afterAll(() => h?.close());

  it('J1: cannot read a file outside its paths (the control can)', async () => {
    const path = join(outside, 'secret.txt');
    expect(await call(h, 'control__read_file', { path })).toBe('ok: the operator keeps this');
    expect(await call(h, 'contained__read_file', { path })).toMatch(/^failed: ENOENT/);
    // Nor the gateway's own home: nothing outside the sandbox's binds exists for it.
    expect(await call(h, 'contained__read_file', { path: '/etc/hostname' })).toMatch(/^failed: ENOENT/);
  });

  it("J1: cannot write into the gateway's directory (the control can)", async () => {
    const planted = join(work, `planted-${era}.txt`);
    expect(await call(h, 'contained__write_file', { path: planted })).toMatch(
      /^failed: (ENOENT|EROFS|EACCES)/,
    );
    expect(existsSync(planted)).toBe(false);
    expect(await call(h, 'control__write_file', { path: planted })).toBe('ok: written');
    expect(readFileSync(planted, 'utf8')).toBe('written by a stdio server');
    // Its own private data directory is writable, and is where the gateway keeps it.
    expect(await call(h, 'contained__write_file', { path: `/data/own-${era}.txt` })).toBe('ok: written');
    expect(readFileSync(join(work, 'servers', 'contained', `own-${era}.txt`), 'utf8')).toBe(
      'written by a stdio server',
    );
  });

  it('J1: with network off, cannot reach a loopback port or a name (the control can)', async () => {
    expect(await call(h, 'control__tcp_connect', { host: '127.0.0.1', port })).toBe(
      `ok: connected to 127.0.0.1:${port}`,
    );
    expect(await call(h, 'contained__tcp_connect', { host: '127.0.0.1', port })).toMatch(/^failed: /);
    expect(await call(h, 'control__tcp_connect', { host: 'localhost', port })).toBe(
      `ok: connected to localhost:${port}`,
    );
    expect(await call(h, 'contained__tcp_connect', { host: 'localhost', port })).toMatch(/^failed: /);
  });

  it("J1: sees only its own env, never the gateway's environment (the control inherits some)", async () => {
    expect(await call(h, 'control__read_env', { name: 'HOME' })).toBe(`ok: ${process.env.HOME}`);
    expect(await call(h, 'control__read_env', { name: 'PATH' })).toBe(`ok: ${process.env.PATH}`);
    expect(await call(h, 'contained__read_env', { name: 'HOME' })).toBe('ok: /data');
    expect(await call(h, 'contained__read_env', { name: 'PATH' })).not.toBe(`ok: ${process.env.PATH}`);
    for (const name of ['USER', 'LOGNAME', 'SHELL', 'TERM']) {
      expect(await call(h, 'contained__read_env', { name })).toBe('failed: absent');
    }
    expect(await call(h, 'contained__read_env', { name: 'GIVEN' })).toBe('ok: by its config');
  });

  it('J1: with network "egress", reaches only the listed hosts, and only through the proxy', async () => {
    const before = accepted;
    expect(await call(h, 'egress__proxy_connect', { target: `127.0.0.1:${port}` })).toBe(
      'ok: HTTP/1.1 200 Connection Established',
    );
    await eventually(() => accepted === before + 1, 'the listed host to see the tunnelled connection');
    expect(await call(h, 'egress__proxy_connect', { target: `127.0.0.1:${port + 1}` })).toBe(
      'failed: HTTP/1.1 403 Forbidden',
    );
    expect(await call(h, 'egress__proxy_connect', { target: `localhost:${port}` })).toBe(
      'failed: HTTP/1.1 403 Forbidden',
    );
    expect(await call(h, 'egress__proxy_connect', { target: '169.254.169.254:80' })).toBe(
      'failed: HTTP/1.1 403 Forbidden',
    );
    // Ignoring the proxy variables reaches nothing: it has no network of its own.
    expect(await call(h, 'egress__tcp_connect', { host: '127.0.0.1', port })).toMatch(/^failed: /);
    expect(accepted).toBe(before + 1);
    // The network-off sandbox has no proxy at all.
    expect(await call(h, 'contained__proxy_connect', { target: `127.0.0.1:${port}` })).toBe(
      'failed: no HTTPS_PROXY',
    );
  });

  it('J1: cannot fork past its process limit (the control can)', async () => {
    expect(await call(h, 'control__fork_many', { count: 48 })).toBe('ok: started 48');
    expect(await call(h, 'contained__fork_many', { count: 48 })).toMatch(/^failed: started \d+ of 48/);
    // And it keeps serving after hitting the limit.
    expect(await call(h, 'contained__read_env', { name: 'GIVEN' })).toBe('ok: by its config');
  });

  it('server-everything and server-memory work unchanged in a sandbox with network off', async () => {
    expect(await call(h, 'everything__echo', { message: `hello ${era}` })).toContain(`hello ${era}`);
    await h.client.callTool({
      name: 'memory__create_entities',
      arguments: { entities: [{ name: `entity-${era}`, entityType: 'test', observations: ['kept'] }] },
    });
    expect(await call(h, 'memory__read_graph', {})).toContain(`entity-${era}`);
    expect(readFileSync(join(work, 'servers', 'memory', 'memory.jsonl'), 'utf8')).toContain(`entity-${era}`);
  });
});

describe('the sandbox of a server', () => {
  it('J1: the contained child runs in its own namespaces, as its own user without capabilities; the control as the gateway', async () => {
    const own = (pid: number | string, ns: string) => readlinkSync(`/proc/${pid}/ns/${ns}`);
    const running = (needle: string) =>
      readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .filter((pid) => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(needle);
          } catch {
            return false;
          }
        });
    const hostile = running(HOSTILE).filter((pid) => {
      try {
        // The server itself, not bwrap or prlimit on its way to it.
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith(process.execPath);
      } catch {
        return false;
      }
    });
    const contained = hostile.filter((pid) => own(pid, 'pid') !== own(process.pid, 'pid'));
    const control = hostile.filter((pid) => own(pid, 'pid') === own(process.pid, 'pid'));
    // contained and egress (the latter under its forwarder); one control.
    expect(contained.length).toBeGreaterThanOrEqual(2);
    expect(control).toHaveLength(1);
    for (const ns of ['pid', 'net', 'ipc', 'uts', 'mnt']) {
      for (const pid of contained) expect(own(pid, ns)).not.toBe(own(process.pid, ns));
      expect(own(control[0]!, ns)).toBe(own(process.pid, ns));
    }
    // Its user: as root, a user of its own with no capability at all (root, even in a user
    // namespace, would escape the process limit); otherwise a user namespace of its own.
    const status = (pid: string) => readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (pid: string, name: string) =>
      new RegExp(`^${name}:\\s+(\\S+)`, 'm').exec(status(pid))![1]!;
    for (const pid of contained) {
      if (process.getuid?.() === 0) {
        expect(Number(field(pid, 'Uid'))).toBeGreaterThanOrEqual(200_000);
        expect(field(pid, 'CapEff')).toBe('0000000000000000');
        expect(field(pid, 'CapBnd')).toBe('0000000000000000');
        expect(field(pid, 'NoNewPrivs')).toBe('1');
      } else expect(own(pid, 'user')).not.toBe(own(process.pid, 'user'));
    }
    expect(field(control[0]!, 'Uid')).toBe(String(process.getuid?.()));
    // Two sandboxes never share one: each has its own pid namespace.
    expect(new Set(contained.map((pid) => own(pid, 'pid'))).size).toBeGreaterThanOrEqual(2);
  });
});
