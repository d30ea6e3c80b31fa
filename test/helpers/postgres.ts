/**
 * A real Postgres for the tests (#15), started and stopped by the test file that needs it: Debian's
 * binaries (installed with apt-get when absent and running as root; otherwise a loud failure, never
 * a skip), a throwaway cluster in a temp dir (fsync off: nothing here must survive), trust auth on
 * 127.0.0.1, a free loopback port, its socket in the temp dir. Postgres refuses to run as root, so
 * as root every command runs as the `postgres` OS user, which owns the temp dir.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { aptInstall } from './apt.js';
import { type AnyHandle, connectLegacy, connectModern } from './clients.js';
import { freePort, ROOT, startTestGateway, stopChild, type TestGateway } from './harness.js';

export interface TestPostgres {
  port: number;
  /** Creates a fresh database and returns its URL (trust auth: no password). */
  database(name: string): Promise<string>;
  /** pg_ctl stop -m fast, then fails if the server is still running; removes the temp dir. */
  stop(): Promise<void>;
}

const ROOT_DIR = '/usr/lib/postgresql';

function binDir(): string | undefined {
  if (!existsSync(ROOT_DIR)) return undefined;
  const versions = readdirSync(ROOT_DIR)
    .filter((v) => existsSync(join(ROOT_DIR, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(ROOT_DIR, versions[0], 'bin');
}

/**
 * The newest installed Postgres's bin directory, installing postgresql first when absent (as
 * root). Also used by the bench smoke test: the bench itself never installs anything.
 */
export function findOrInstall(): string {
  const found = binDir();
  if (found) return found;
  if (process.getuid?.() !== 0) {
    throw new Error(
      `Postgres is not installed (no ${ROOT_DIR}/*/bin/initdb) and these tests are not root: run apt-get install -y postgresql`,
    );
  }
  const failed = aptInstall(['postgresql']);
  if (failed) throw new Error(failed);
  const installed = binDir();
  if (!installed) throw new Error(`apt-get installed postgresql, but no ${ROOT_DIR}/*/bin/initdb appeared`);
  return installed;
}

/** Runs a Postgres binary, as the postgres user when we are root; throws with its output on failure. */
function run(bin: string, args: string[]): void {
  const asRoot = process.getuid?.() === 0;
  const [command, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  const r = spawnSync(command, argv, { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) {
    throw new Error(`${bin} ${args.join(' ')} failed (${r.status}): ${(r.stderr || r.stdout).slice(-2000)}`);
  }
}

/** Whether the process runs; a zombie (exited, not yet reaped by PID 1) does not. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

export async function startPostgres(): Promise<TestPostgres> {
  const bin = findOrInstall();
  const dir = mkdtempSync(join(tmpdir(), 'mf-pg-'));
  if (process.getuid?.() === 0) {
    const id = (flag: string) =>
      Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
    chownSync(dir, id('-u'), id('-g'));
  }
  const data = join(dir, 'data');
  run(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    '-c listen_addresses=127.0.0.1',
    '-c fsync=off',
    '-c synchronous_commit=off',
    '-c full_page_writes=off',
  ].join(' ');
  run(join(bin, 'pg_ctl'), ['start', '-D', data, '-w', '-t', '30', '-l', join(dir, 'log'), '-o', options]);
  const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  // A test worker that dies without afterAll must not leave a server behind.
  const onExit = () => {
    if (alive(pid)) process.kill(pid, 'SIGQUIT');
  };
  process.once('exit', onExit);
  const admin = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    port,
    async database(name) {
      const client = new pg.Client({ connectionString: admin });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      } finally {
        await client.end();
      }
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      process.off('exit', onExit);
      run(join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'fast', '-w', '-t', '30']);
      // pg_ctl -w returns once the pid file is gone; the process itself may take a moment more.
      const until = Date.now() + 5000;
      while (alive(pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      const running = alive(pid);
      rmSync(dir, { recursive: true, force: true });
      if (running) throw new Error(`Postgres (pid ${pid}) is still running after pg_ctl stop`);
    },
  };
}

/**
 * `count` gateways on one database, started at once (one migrates, the others wait for its lock),
 * each with a legacy (v1) and a modern (v2) client: instance i's clients are `clients[2i]` and
 * `clients[2i + 1]`. Fills the arrays the caller owns, so that its afterAll can close what started.
 */
export async function startInstances(
  raw: Parameters<typeof startTestGateway>[0],
  env: Record<string, string>,
  count: number,
  into: { gateways: TestGateway[]; clients: AnyHandle[] },
): Promise<void> {
  into.gateways.push(
    ...(await Promise.all(Array.from({ length: count }, () => startTestGateway(raw, { env })))),
  );
  for (const gw of into.gateways) into.clients.push(await connectLegacy(gw.url), await connectModern(gw.url));
}

/** Closes the clients, then the gateways, of `startInstances`. */
export async function stopInstances(from: { gateways: TestGateway[]; clients: AnyHandle[] }): Promise<void> {
  for (const c of from.clients) await c.close().catch(() => {});
  for (const gw of from.gateways) await gw.stop();
}

/** A gateway in a process of its own (`manifold serve` from dist/), so that a test can kill it. */
export interface SpawnedInstance {
  port: number;
  /** Its /mcp. */
  url: string;
  child: ChildProcess;
  /** Its JSON log lines so far. */
  logs: Record<string, unknown>[];
  /** SIGTERM, then SIGKILL after 5 s. */
  stop(): Promise<void>;
}

/**
 * `count` `manifold serve` processes of one config file on free loopback ports, each resolved once
 * its /healthz answers 200 (an upstream is ready). Fills `into`, so that the caller's afterAll can
 * stop what started.
 */
export async function spawnInstances(
  configFile: string,
  env: Record<string, string>,
  count: number,
  into: SpawnedInstance[],
): Promise<void> {
  const cli = join(ROOT, 'dist/manifold.js');
  if (!existsSync(cli)) throw new Error('dist is missing: run npm run build (npm test does)');
  const started = await Promise.all(
    Array.from({ length: count }, async () => {
      const port = await freePort();
      const child = spawn(
        process.execPath,
        [
          cli,
          'serve',
          '--config',
          configFile,
          '--host',
          '127.0.0.1',
          '--port',
          String(port),
          '--log-format',
          'json',
        ],
        { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const logs: Record<string, unknown>[] = [];
      let rest = '';
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        const lines = (rest + chunk).split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) {
          try {
            logs.push(JSON.parse(line) as Record<string, unknown>);
          } catch {
            logs.push({ text: line });
          }
        }
      });
      child.stderr!.resume();
      const instance: SpawnedInstance = {
        port,
        url: `http://127.0.0.1:${port}/mcp`,
        child,
        logs,
        stop: () => stopChild(child),
      };
      into.push(instance);
      return instance;
    }),
  );
  await Promise.all(
    started.map(async (i) => {
      const until = Date.now() + 60_000;
      for (;;) {
        if (i.child.exitCode !== null) throw new Error(`manifold serve exited (${i.child.exitCode})`);
        const status = await fetch(`http://127.0.0.1:${i.port}/healthz`).then(
          (r) => r.status,
          () => 0,
        );
        if (status === 200) return;
        if (Date.now() > until) throw new Error(`manifold serve on ${i.port} is not healthy after 60 s`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }),
  );
}
