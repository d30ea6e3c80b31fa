// A throwaway Postgres cluster on loopback: Debian's binaries (test/services.mjs installs them),
// a cluster in a temp dir, trust auth, a free port, its socket in the temp dir, fsync off (nothing
// here must survive). One per test run (test/setup/global.ts) and one per bench run. Postgres
// refuses to run as root, so as root every command runs as the `postgres` OS user.
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT_DIR = '/usr/lib/postgresql';

/** The newest installed version's bin directory, or an error that says what to run. */
function binDir() {
  const versions = existsSync(ROOT_DIR)
    ? readdirSync(ROOT_DIR)
        .filter((v) => existsSync(join(ROOT_DIR, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error(
      `Postgres is not installed (no ${ROOT_DIR}/*/bin/initdb): run \`node test/services.mjs\``,
    );
  }
  return join(ROOT_DIR, versions[0], 'bin');
}

function run(bin, args) {
  const asRoot = process.getuid?.() === 0;
  const [command, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  const r = spawnSync(command, argv, { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) {
    throw new Error(`${bin} ${args.join(' ')} failed (${r.status}): ${(r.stderr || r.stdout).slice(-2000)}`);
  }
}

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

/** Whether the process runs; a zombie (exited, not yet reaped) does not. */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * initdb and pg_ctl start. Returns the port, the postmaster's pid, the admin URL and stop()
 * (pg_ctl stop -m fast; fails if the server still runs; removes the temp dir). A process that
 * exits without stop() takes the server down with it.
 */
export async function startCluster() {
  const bin = binDir();
  const dir = mkdtempSync(join(tmpdir(), 'mf-pg-'));
  if (process.getuid?.() === 0) {
    const id = (flag) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
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
    // Every test file's gateways share this cluster: room for their pools and listeners.
    '-c max_connections=400',
  ].join(' ');
  run(join(bin, 'pg_ctl'), ['start', '-D', data, '-w', '-t', '30', '-l', join(dir, 'log'), '-o', options]);
  const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const onExit = () => {
    if (alive(pid)) process.kill(pid, 'SIGQUIT');
  };
  process.once('exit', onExit);
  return {
    port,
    pid,
    adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
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

/** A new database on the cluster at `adminUrl`; returns its URL. */
export async function createDatabase(adminUrl, name) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
