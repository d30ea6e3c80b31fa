import { type ChildProcess, spawn } from 'node:child_process';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../../src/log.js';
import type { StdioSpec } from '../../src/platform.js';

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

/** Children still running; used by shutdown and by tests. */
export function liveChildren(): number {
  return live.size;
}

/**
 * MCP over a child's stdin/stdout: newline-delimited JSON (spec: basic/transports, stdio).
 * Written here rather than taken from the SDK to own the process group (no orphans), to put
 * stderr in the gateway log line by line, and to parse each line exactly once.
 */
export class ChildStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private child: ChildProcess | undefined;
  private buffer = '';
  private closed = false;

  constructor(
    private readonly spec: StdioSpec,
    private readonly log: Logger,
  ) {}

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.spec.command, this.spec.args, {
        env: { ...getDefaultEnvironment(), ...this.spec.env },
        cwd: this.spec.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
        windowsHide: true,
      });
      this.child = child;
      live.add(child);
      let started = false;
      child.once('spawn', () => {
        started = true;
        this.log.info('upstream.spawned', { pid: child.pid });
        resolve();
      });
      child.once('error', (err) => {
        const e = new Error(
          `could not start ${this.spec.command}: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
        );
        if (!started) reject(e);
        else this.onerror?.(e);
      });
      child.once('close', (code, signal) => {
        live.delete(child);
        if (started && !this.closed) this.log.warn('upstream.exited', { code, signal });
        this.finish();
      });
      child.stdout?.setEncoding('utf8');
      child.stdout?.on('data', (chunk: string) => this.onData(chunk));
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

  private onData(chunk: string): void {
    this.buffer += chunk;
    let nl = this.buffer.indexOf('\n');
    while (nl !== -1) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (line) this.onLine(line);
      nl = this.buffer.indexOf('\n');
    }
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

export function connectStdio(spec: StdioSpec, log: Logger): Transport {
  return new ChildStdioTransport(spec, log);
}
