// A throwaway Postgres for the bench's scale section (#15): the same idea as the tests'
// test/helpers/postgres.ts (Debian's binaries under /usr/lib/postgresql/<version>/bin, a cluster
// in a temp dir, trust auth, a free loopback port, fsync off), in plain .mjs for node. The bench
// never installs anything: without the binaries it fails and says what to install.
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT_DIR = '/usr/lib/postgresql';

/** The newest installed version's bin directory, or a clear error. */
function binDir() {
  const versions = existsSync(ROOT_DIR)
    ? readdirSync(ROOT_DIR)
        .filter((v) => existsSync(join(ROOT_DIR, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error(
      `the bench's scale section needs Postgres: no ${ROOT_DIR}/*/bin/initdb here (apt-get install -y postgresql; the bench does not install it)`,
    );
  }
  return join(ROOT_DIR, versions[0], 'bin');
}

/** Postgres refuses to run as root: as root, every command runs as the `postgres` OS user. */
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

/**
 * initdb, pg_ctl start, createdb `name`. Returns the database URL, the postmaster's pid and
 * stop() (pg_ctl stop -m fast, then the temp dir is removed). A bench that dies without stop()
 * takes the server down with it.
 */
export async function startPostgres(name = 'bench') {
  const bin = binDir();
  const dir = mkdtempSync(join(tmpdir(), 'mf-bench-pg-'));
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
  ].join(' ');
  run(join(bin, 'pg_ctl'), ['start', '-D', data, '-w', '-t', '30', '-l', join(dir, 'log'), '-o', options]);
  const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const onExit = () => {
    try {
      process.kill(pid, 'SIGQUIT');
    } catch {}
  };
  process.once('exit', onExit);
  try {
    run(join(bin, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', name]);
  } catch (e) {
    onExit();
    throw e;
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/${name}`,
    pid,
    async stop() {
      process.off('exit', onExit);
      run(join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'fast', '-w', '-t', '30']);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
