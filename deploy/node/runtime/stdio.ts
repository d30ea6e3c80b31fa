/**
 * stdio upstreams on Node: the child process, what it inherits, how no child outlives the gateway
 * (SECURITY F6, J2), and MCP over its stdin and stdout.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../../../src/lib/log.js';
import type { StdioSpec } from '../../../src/platform.js';
import { type EgressProxy, openEgressProxy } from './egress-proxy.js';
import { BoundedLines, overLongId } from './lines.js';
import { sandboxCommand, sandboxTools } from './sandbox.js';

/**
 * What a stdio upstream inherits from the gateway's environment when its config does not say:
 * the few variables a program needs to find itself (the same set as the MCP SDK's stdio client,
 * itself after sudo's defaults), never the gateway's own secrets. Its `env` is added on top.
 */
const INHERITED =
  process.platform === 'win32'
    ? [
        'APPDATA',
        'HOMEDRIVE',
        'HOMEPATH',
        'LOCALAPPDATA',
        'PATH',
        'PROCESSOR_ARCHITECTURE',
        'SYSTEMDRIVE',
        'SYSTEMROOT',
        'TEMP',
        'USERNAME',
        'USERPROFILE',
        'PROGRAMFILES',
      ]
    : ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER'];

/**
 * The inherited part of a child's environment. A value that starts with `()` is a shell function
 * export (the Shellshock vector), and is never passed on.
 */
function inheritedEnvironment(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of INHERITED) {
    const value = process.env[key];
    if (value !== undefined && !value.startsWith('()')) env[key] = value;
  }
  return env;
}

/** Every live child, so that no exit path of the gateway leaves one behind. */
const live = new Set<ChildProcess>();

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    // Negative pid: the whole process group, so wrappers such as npx take their children along.
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}

process.once('exit', () => {
  for (const child of live) killGroup(child, 'SIGKILL');
});

/**
 * Children must not outlive the gateway even when it cannot clean up (kill -9, OOM kill): the
 * exit hook above never runs then. A small shell reaper, in its own process group and deaf to
 * signals, holds the read end of a pipe; the gateway writes each child's process group id to it
 * (and `-id` when the child is gone). When the gateway dies, however it dies, the kernel closes
 * the pipe, the reaper reads EOF and SIGKILLs every group still listed, grandchildren included
 * (#13.15). POSIX only; on Windows there is no process group to kill.
 */
const REAPER = [
  "trap '' INT TERM HUP",
  'groups=" "',
  'while read -r id; do',
  '  case "$id" in',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a template
  '    -*) groups=$(printf %s "$groups" | sed "s/ ${id#-} / /") ;;',
  '    *[!0-9]*|"") ;;',
  '    *) groups="$groups$id " ;;',
  '  esac',
  'done',
  'for id in $groups; do kill -KILL "-$id" 2>/dev/null; done',
].join('\n');

let reaper: ChildProcess | undefined | null;

function reaperInput(): NodeJS.WritableStream | undefined {
  if (reaper === null || process.platform === 'win32') return undefined;
  if (!reaper || reaper.exitCode !== null) {
    try {
      reaper = spawn('/bin/sh', ['-c', REAPER], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
      reaper.on('error', () => {
        reaper = null;
      });
      reaper.stdin?.on('error', () => {});
      reaper.unref();
      // The pipe must not keep the event loop alive either.
      (reaper.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    } catch {
      reaper = null;
      return undefined;
    }
  }
  return reaper.stdin ?? undefined;
}

function tellReaper(line: string): void {
  reaperInput()?.write(`${line}\n`);
}

/**
 * MCP over a child's stdin/stdout: newline-delimited JSON (spec: basic/transports, stdio).
 * Written here rather than taken from the SDK to own the process group (no orphans), to put
 * stderr in the gateway log line by line, and to parse each line exactly once.
 */
export class ChildStdioTransport implements Transport {
  private corked = false;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private child: ChildProcess | undefined;
  private readonly lines: BoundedLines;
  private closed = false;
  /** The egress proxy of a sandbox with network "egress", while its child runs. */
  private egress: EgressProxy | undefined;

  constructor(
    private readonly spec: StdioSpec,
    private readonly log: Logger,
    /** The longest line read (characters; each is at least one byte): `maxUpstreamBodyBytes`. */
    private readonly maxLine = 8 * 1024 * 1024,
  ) {
    this.lines = new BoundedLines(maxLine, {
      line: (line) => this.onLine(line),
      overLong: (head, tail, chars) => this.overLong(head, tail, chars),
    });
  }

  async start(): Promise<void> {
    let command = this.spec.command;
    let args = this.spec.args;
    let env: Record<string, string> = { ...inheritedEnvironment(), ...this.spec.env };
    let cwd = this.spec.cwd;
    const { sandbox } = this.spec;
    if (sandbox) {
      // Contained, or not started at all (SECURITY J1): a missing part rejects with its fix.
      const tools = await sandboxTools(this.spec.server);
      if (sandbox.network === 'egress') this.egress = await openEgressProxy(sandbox.allowHosts, this.log);
      if (this.closed) {
        await this.egress?.close();
        throw new Error('stdio upstream closed while it was starting');
      }
      let contained: ReturnType<typeof sandboxCommand>;
      try {
        contained = sandboxCommand(this.spec, sandbox, tools, {
          ...(this.egress ? { proxySocket: this.egress.socket, forwarder: this.egress.forwarder } : {}),
        });
      } catch (e) {
        await this.egress?.close();
        throw e;
      }
      ({ command, args, env } = contained);
      cwd = undefined;
    }
    return this.spawnChild(command, args, env, cwd);
  }

  private spawnChild(
    command: string,
    args: string[],
    env: Record<string, string>,
    cwd: string | undefined,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, {
        env,
        ...(cwd !== undefined ? { cwd } : {}),
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
        windowsHide: true,
      });
      this.child = child;
      live.add(child);
      let started = false;
      child.once('spawn', () => {
        started = true;
        // detached: the child leads its own process group, whose id is its pid.
        if (child.pid !== undefined) tellReaper(String(child.pid));
        this.log.info('upstream.spawned', {
          pid: child.pid,
          ...(this.spec.sandbox ? { sandboxed: true } : {}),
        });
        resolve();
      });
      child.once('error', (err) => {
        const e = new Error(
          `could not start ${this.spec.sandbox ? 'the sandbox (bwrap) for ' : ''}${this.spec.command}: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
        );
        if (!started) reject(e);
        else this.onerror?.(e);
      });
      child.once('close', (code, signal) => {
        live.delete(child);
        void this.egress?.close();
        if (child.pid !== undefined) tellReaper(`-${child.pid}`);
        if (started && !this.closed) this.log.warn('upstream.exited', { code, signal });
        this.finish();
      });
      child.stdout?.setEncoding('utf8');
      child.stdout?.on('data', (chunk: string) => this.lines.push(chunk));
      child.stdin?.on('error', (err) => this.onerror?.(err));
      let errBuf = '';
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        errBuf += chunk;
        let nl = errBuf.indexOf('\n');
        while (nl !== -1) {
          const line = errBuf.slice(0, nl).trimEnd();
          errBuf = errBuf.slice(nl + 1);
          if (line) this.log.info('upstream.stderr', { line: line.slice(0, 2000) });
          nl = errBuf.indexOf('\n');
        }
        if (errBuf.length > 64 * 1024) errBuf = '';
      });
    });
  }

  /** An over-long line ended (#13.3): fail the request it answers, if it names one. */
  private overLong(head: string, tail: string, chars: number): void {
    const id = overLongId(head, tail, 'response');
    this.log.warn('upstream.line_too_long', { chars, limit: this.maxLine });
    if (id === undefined) return;
    this.onmessage?.({
      jsonrpc: '2.0',
      id,
      error: {
        code: -32603,
        message: `the server's answer was longer than maxUpstreamBodyBytes (${this.maxLine}) and was dropped`,
      },
    } as JSONRPCMessage);
  }

  private onLine(line: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      this.log.debug('upstream.stdout_noise', { line: line.slice(0, 200) });
      return;
    }
    if (typeof msg === 'object' && msg !== null && (msg as { jsonrpc?: unknown }).jsonrpc === '2.0') {
      this.onmessage?.(msg as JSONRPCMessage);
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.closed || !stdin.writable)
      return Promise.reject(new Error('stdio upstream is not running'));
    // Lines sent in one turn of the event loop go out in one write: each write to a pipe is a
    // syscall that wakes the child.
    if (!this.corked) {
      this.corked = true;
      stdin.cork();
      setImmediate(() => {
        this.corked = false;
        stdin.uncork();
      });
    }
    return new Promise((resolve, reject) => {
      const ok = stdin.write(`${JSON.stringify(message)}\n`, (err) => (err ? reject(err) : undefined));
      if (ok) resolve();
      else stdin.once('drain', () => resolve());
    });
  }

  /** Closes stdin, then SIGTERM to the group, then SIGKILL; resolves when the child is gone. */
  async close(): Promise<void> {
    const child = this.child;
    this.closed = true;
    if (!child || child.exitCode !== null || child.signalCode !== null) {
      await this.egress?.close();
      this.finish();
      return;
    }
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    child.stdin?.end();
    killGroup(child, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 2000);
    await exited;
    clearTimeout(timer);
  }

  private finish(): void {
    if (this.child && this.onclose) {
      const cb = this.onclose;
      this.onclose = undefined;
      cb();
    }
  }
}

export function connectStdio(spec: StdioSpec, log: Logger, maxLine?: number): Transport {
  return new ChildStdioTransport(spec, log, maxLine);
}
