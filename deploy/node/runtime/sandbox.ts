/**
 * A stdio server's sandbox on Linux (#53, SECURITY J1): bubblewrap for the namespaces and the file
 * system, util-linux `prlimit` for the rlimits, and (network "egress") the gateway's CONNECT proxy
 * as the only way out (egress-proxy.ts). Where any part is missing the server does not start, and
 * the error says what is missing and how to install it: it never runs unsandboxed by surprise.
 *
 * What the child sees: a fresh /proc and /dev, a private /tmp, the system's /usr (read-only), the
 * few /etc files a program needs to load its libraries and check TLS certificates, its runtime
 * and its own package (read-only), the declared `read` paths (read-only) and `write` paths, or a
 * private data directory. Its environment is its `env` and nothing the gateway has. Why these
 * choices: docs/decisions/0043-sandboxed-local-servers.md.
 */
import { execFile } from 'node:child_process';
import { chownSync, existsSync, lstatSync, mkdirSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join, resolve, sep } from 'node:path';
import { ManifoldError } from '../../../src/errors.js';
import type { SandboxSpec, StdioSpec } from '../../../src/platform.js';

/** What `spawn` runs instead of the server's own command. */
export interface SandboxedCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Set when the gateway runs as root: the server inside runs as this user and group of its own. */
  runsAs?: number;
}

/** Inside the sandbox, where its private data directory is (its HOME and working directory). */
export const DATA_IN_SANDBOX = '/data';
/** Inside the sandbox, where the egress proxy's socket is bound. */
export const PROXY_SOCKET_IN_SANDBOX = '/run/manifold/egress.sock';
/** The loopback port the in-sandbox forwarder listens on (the sandbox's loopback is its own). */
export const PROXY_PORT_IN_SANDBOX = 3128;

/** Kept short: a server's state shows the first 200 characters of its error (docs/deploy-node.md has the rest). */
const INSTALL_HINT = 'install them (apt-get install bubblewrap util-linux), or set "sandbox": false';

/** A sandbox that cannot be built: the server is not started, and the message says why and what to do. */
function unavailable(server: string, what: string, fix: string): ManifoldError {
  return new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', `no sandbox, so not started: ${what}; ${fix}`, {
    data: { rule: 'sandbox-unavailable', server },
  });
}

/** The first executable named `name` on `PATH`. */
export function onPath(name: string, path = process.env.PATH ?? ''): string | undefined {
  if (name.includes('/')) return existsSync(name) ? resolve(name) : undefined;
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The tools the sandbox needs, found once per PATH; a probe run proves user namespaces work. */
export interface SandboxTools {
  bwrap: string;
  prlimit: string;
  /** util-linux `setpriv`: a root gateway's sandbox drops to the server's own user with it. */
  setpriv?: string;
}

/** Why a sandbox cannot be built here, and how to fix it. */
interface Missing {
  what: string;
  fix: string;
}

const probed = new Map<string, Promise<SandboxTools | Missing>>();

/**
 * Finds bwrap and prlimit and runs bwrap once with a new user namespace, so that a kernel or a
 * container without unprivileged user namespaces is reported as such, not as a server that died.
 * Rejects with the diagnostic, naming `server`.
 */
export async function sandboxTools(server: string, path = process.env.PATH ?? ''): Promise<SandboxTools> {
  let found = probed.get(path);
  if (!found) {
    found = findTools(path);
    probed.set(path, found);
  }
  const tools = await found;
  if ('bwrap' in tools) return tools;
  // Not cached: the operator may install the missing part and reload.
  probed.delete(path);
  throw unavailable(server, tools.what, tools.fix);
}

async function findTools(path: string): Promise<SandboxTools | Missing> {
  if (process.platform !== 'linux') {
    return {
      what: `sandboxes need Linux, and this is ${process.platform}`,
      fix: 'run the gateway on Linux, or set "sandbox": false',
    };
  }
  const root = process.getuid?.() === 0;
  const bwrap = onPath('bwrap', path);
  const prlimit = onPath('prlimit', path);
  const setpriv = root ? onPath('setpriv', path) : undefined;
  if (!bwrap || !prlimit || (root && !setpriv)) {
    const util = [!prlimit ? 'prlimit' : '', root && !setpriv ? 'setpriv' : ''].filter(Boolean);
    const missing = [
      !bwrap ? 'bubblewrap (bwrap)' : '',
      util.length > 0 ? `${util.join(' and ')} (util-linux)` : '',
    ].filter(Boolean);
    const many = missing.length > 1 || util.length > 1;
    return { what: `${missing.join(' and ')} ${many ? 'are' : 'is'} not installed`, fix: INSTALL_HINT };
  }
  // As root, bwrap builds the sandbox with its own privileges and no user namespace (see
  // sandboxCommand); otherwise it needs an unprivileged user namespace.
  const probe = [
    ...(root ? [] : ['--unshare-user']),
    ...['--unshare-pid', '--unshare-net', '--die-with-parent', '--ro-bind', '/', '/', '--proc', '/proc'],
    ...['--', 'true'],
  ];
  const failed = await new Promise<string | undefined>((done) => {
    execFile(bwrap, probe, { timeout: 10_000 }, (err, _out, stderr) =>
      done(
        err
          ? String(stderr || err.message)
              .trim()
              .slice(0, 300)
          : undefined,
      ),
    );
  });
  if (failed !== undefined) {
    return {
      what: root
        ? 'bubblewrap cannot create namespaces here'
        : 'bubblewrap cannot create a user namespace here',
      fix: `allow ${root ? 'namespaces' : 'unprivileged user namespaces'} (docs/deploy-node.md, Sandboxes), or set "sandbox": false (bwrap said: ${failed})`,
    };
  }
  return { bwrap, prlimit, ...(setpriv ? { setpriv } : {}) };
}

/** The top directories of the system: bound read-only, or recreated as the symlinks they are (merged /usr). */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/** The /etc files a program needs to load its libraries, name its user, and check TLS certificates. */
const ETC_FILES = [
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/alternatives',
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/pki',
  '/etc/localtime',
  '/etc/passwd',
  '/etc/group',
  '/etc/nsswitch.conf',
];

/** Directories never bound whole because a server's file sits in them (ownFiles). */
const BROAD = new Set(['/', homedir(), '/tmp', '/root', '/home']);

/** `args` for one read-only bind of `path` (and its real location, when it is reached through a symlink). */
function bindings(path: string, writable: boolean, out: string[], seen: Set<string>): void {
  if (!existsSync(path)) return;
  const real = realpathSync(path);
  const flag = writable ? '--bind' : '--ro-bind';
  for (const dest of new Set([real, path])) {
    const key = `${flag}\0${dest}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(flag, real, dest);
  }
}

/**
 * The server's runtime and its own package, read-only: the real location of the command (a runtime
 * installed under a prefix outside /usr brings its prefix: `<prefix>/bin/node` binds `<prefix>`),
 * and for each argument that names an existing file, its directory, its nearest package manifest,
 * and every `node_modules` a module in it could be resolved from.
 */
function ownFiles(spec: StdioSpec, cwd: string, path: string): string[] {
  const out: string[] = [];
  const command = onPath(spec.command, path);
  if (command) {
    const real = realpathSync(command);
    const dir = dirname(real);
    const prefix = dir.endsWith(`${sep}bin`) ? dirname(dir) : dir;
    // A command in a broad directory (`./server` in the gateway's own) brings only itself.
    out.push(command, BROAD.has(prefix) || prefix === cwd || BROAD.has(dir) || dir === cwd ? real : prefix);
  }
  for (const arg of spec.args) {
    if (arg.startsWith('-') || arg.includes('\0')) continue;
    const file = resolve(cwd, arg);
    let isFile = false;
    try {
      isFile = statSync(file).isFile();
    } catch {
      continue;
    }
    if (!isFile) continue;
    for (const name of [file, realpathSync(file)]) {
      // The file's directory holds its siblings (a package's other modules), unless it is a
      // directory that holds far more than one server: the home directory, the gateway's own
      // working directory, or the root. Then only the file itself.
      const folder = dirname(name);
      out.push(BROAD.has(folder) || folder === cwd ? name : folder);
      let manifest = false;
      for (let dir = dirname(name); ; dir = dirname(dir)) {
        if (!manifest) {
          for (const m of ['package.json', 'pyproject.toml']) {
            if (existsSync(join(dir, m))) {
              out.push(join(dir, m));
              manifest = true;
            }
          }
        }
        if (existsSync(join(dir, 'node_modules'))) out.push(join(dir, 'node_modules'));
        if (dirname(dir) === dir) break;
      }
    }
  }
  return out.filter((p) => p !== '/');
}

/** Creates the private data directory (owned by the sandbox's user), and returns its absolute path. */
function dataDirectory(dir: string, uid: number | undefined): string {
  const abs = resolve(dir);
  // Parents the gateway creates may be traversed (not listed) by the sandbox's user; the leaf is its own.
  mkdirSync(dirname(abs), { recursive: true, mode: 0o711 });
  mkdirSync(abs, { recursive: true, mode: 0o700 });
  if (uid !== undefined) chownSync(abs, uid, uid);
  return abs;
}

/**
 * The user a root gateway's sandbox runs as: its own, stable across restarts (its data directory
 * stays its own), derived from the server (and instance) so that two servers share neither files
 * nor a process count. Never 0, never a system account.
 */
export function sandboxUid(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return SANDBOX_UID_BASE + (h % SANDBOX_UID_SPAN);
}
const SANDBOX_UID_BASE = 200_000;
const SANDBOX_UID_SPAN = 1 << 16;

/**
 * The bwrap command line for `spec` (its command wrapped in prlimit, and for "egress" in the
 * in-sandbox forwarder). `proxySocket`: the host path of the egress proxy's unix socket.
 */
export function sandboxCommand(
  spec: StdioSpec,
  sandbox: SandboxSpec,
  tools: SandboxTools,
  options: { proxySocket?: string; forwarder?: string; path?: string } = {},
): SandboxedCommand {
  const path = options.path ?? process.env.PATH ?? '';
  // As root, bwrap sets the sandbox up with root's own reach (any path can be bound) and no user
  // namespace, and the server runs as a user of its own with no capabilities (setpriv): the
  // kernel exempts root, even root in a user namespace, from the process limit.
  const root = process.getuid?.() === 0 && tools.setpriv !== undefined;
  const uid = root ? sandboxUid(sandbox.dataDir ?? spec.server) : undefined;
  const cwd = resolve(spec.cwd ?? process.cwd());
  const args = [
    ...(root ? [] : ['--unshare-user']),
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    // Both network modes start with no network; "egress" gets the proxy's socket, nothing else.
    '--unshare-net',
    '--die-with-parent',
    // Its own session: it cannot push input into the gateway's terminal (TIOCSTI).
    '--new-session',
    '--cap-drop',
    'ALL',
    // Kept only for setpriv, which drops them (and every other capability) before the server runs.
    ...(root ? ['--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID', '--cap-add', 'CAP_SETPCAP'] : []),
    '--hostname',
    'sandbox',
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
  ];
  const seen = new Set<string>();
  for (const dir of SYSTEM_DIRS) {
    let link: string | undefined;
    try {
      if (lstatSync(dir).isSymbolicLink()) link = readlinkSync(dir);
    } catch {
      continue;
    }
    if (link !== undefined) args.push('--symlink', link, dir);
    else bindings(dir, false, args, seen);
  }
  for (const file of ETC_FILES) bindings(file, false, args, seen);
  for (const own of ownFiles(spec, cwd, path)) bindings(own, false, args, seen);
  // The declared paths; a missing one fails the start with its name, not a bwrap message.
  const declared = (list: string[], writable: boolean) => {
    for (const p of list) {
      const abs = resolve(cwd, p);
      if (!existsSync(abs)) {
        throw new ManifoldError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `server ${spec.server}: sandbox.filesystem.${writable ? 'write' : 'read'} names ${abs}, which does not exist`,
          { data: { rule: 'sandbox-path-missing' } },
        );
      }
      bindings(abs, writable, args, seen);
    }
  };
  declared(sandbox.filesystem.read, false);
  let home = '/tmp';
  if (sandbox.filesystem.write) declared(sandbox.filesystem.write, true);
  else if (sandbox.dataDir) {
    // At one fixed path, so a config can name a file in it ("MEMORY_FILE_PATH": "/data/memory.jsonl").
    args.push('--bind', dataDirectory(sandbox.dataDir, uid), DATA_IN_SANDBOX);
    home = DATA_IN_SANDBOX;
  }
  // Its working directory is where it would run uncontained, so relative paths in its args name
  // the same files; a configured `cwd` is visible read-only, the gateway's own only where its
  // files are bound (an empty directory otherwise).
  if (spec.cwd !== undefined) bindings(cwd, false, args, seen);
  args.push('--perms', '0755', '--dir', cwd, '--chdir', cwd);
  // Nothing of the gateway's environment: a fixed PATH, its HOME and TMPDIR, then its own `env`.
  const runtimeBin = (() => {
    const c = onPath(spec.command, path);
    return c ? dirname(realpathSync(c)) : undefined;
  })();
  const env: Record<string, string> = {
    PATH: [runtimeBin, '/usr/local/bin', '/usr/bin', '/bin'].filter(Boolean).join(':'),
    HOME: home,
    TMPDIR: '/tmp',
    LANG: 'C.UTF-8',
  };
  let inner: string[] = [spec.command, ...spec.args];
  if (sandbox.network === 'egress' && options.proxySocket && options.forwarder) {
    args.push('--ro-bind', options.forwarder, '/run/manifold/forwarder.mjs');
    args.push('--bind', options.proxySocket, PROXY_SOCKET_IN_SANDBOX);
    const proxy = `http://127.0.0.1:${PROXY_PORT_IN_SANDBOX}`;
    Object.assign(env, {
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
      NO_PROXY: '',
    });
    inner = [
      process.execPath,
      '/run/manifold/forwarder.mjs',
      PROXY_SOCKET_IN_SANDBOX,
      String(PROXY_PORT_IN_SANDBOX),
      '--',
      ...inner,
    ];
    bindings(process.execPath, false, args, seen);
  }
  Object.assign(env, spec.env);
  args.push('--clearenv');
  for (const [k, v] of Object.entries(env)) args.push('--setenv', k, v);
  const { limits } = sandbox;
  const rlimits = [
    `--as=${limits.memoryMb * 1024 * 1024}`,
    `--nproc=${limits.processes}`,
    `--nofile=${limits.openFiles}`,
    ...(limits.cpuSeconds > 0 ? [`--cpu=${limits.cpuSeconds}`] : []),
  ];
  const drop =
    uid !== undefined
      ? [
          tools.setpriv!,
          `--reuid=${uid}`,
          `--regid=${uid}`,
          '--clear-groups',
          '--inh-caps=-all',
          '--bounding-set=-all',
          '--no-new-privs',
          '--',
        ]
      : [];
  args.push('--', ...drop, tools.prlimit, ...rlimits, '--', ...inner);
  return {
    command: tools.bwrap,
    args: uid !== undefined ? openParents(args) : args,
    // bwrap's own environment: only what it needs to run (the child's is set with --setenv).
    env: { PATH: path },
    ...(uid !== undefined ? { runsAs: uid } : {}),
  };
}

/**
 * Without a user namespace, the directories bwrap creates on the way to a bind are closed to
 * others; the server's own user must pass through them. Each is created open to traversal first,
 * after the private /tmp and before the first bind that needs it.
 */
function openParents(args: string[]): string[] {
  const binds = new Set(['--bind', '--ro-bind']);
  const parents = new Set<string>();
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--') break;
    const dest = binds.has(args[i]!)
      ? args[i + 2]
      : args[i] === '--chdir' || args[i] === '--dir'
        ? args[i + 1]
        : undefined;
    if (!dest) continue;
    for (let dir = dirname(dest); dir !== '/' && !parents.has(dir); dir = dirname(dir)) parents.add(dir);
  }
  const system = (d: string) => SYSTEM_DIRS.some((s) => d === s || d.startsWith(`${s}/`));
  const dirs = [...parents]
    .filter((d) => !system(d))
    .sort((a, b) => a.split('/').length - b.split('/').length);
  const at = args.indexOf('/tmp', args.indexOf('--tmpfs')) + 1;
  return [...args.slice(0, at), ...dirs.flatMap((d) => ['--perms', '0755', '--dir', d]), ...args.slice(at)];
}

/** One line for `manifold check`: what the server's sandbox holds. */
export function describeSandbox(sandbox: SandboxSpec | false | undefined): string {
  if (!sandbox) return 'none';
  const net = sandbox.network === false ? 'no network' : `egress to ${sandbox.allowHosts.join(', ')}`;
  const paths = [
    sandbox.filesystem.read.length > 0 ? `read ${sandbox.filesystem.read.join(', ')}` : '',
    sandbox.filesystem.write
      ? `write ${sandbox.filesystem.write.join(', ')}`
      : `data ${sandbox.dataDir ?? '(private)'}`,
  ].filter(Boolean);
  const l = sandbox.limits;
  return `${net}; ${paths.join('; ')}; ${l.memoryMb} MiB, ${l.processes} procs, ${l.openFiles} files${l.cpuSeconds > 0 ? `, ${l.cpuSeconds} s CPU` : ''}`;
}
