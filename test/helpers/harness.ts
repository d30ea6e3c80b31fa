import { type ChildProcess, spawn } from 'node:child_process';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, connect as netConnect } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Tracer } from '@opentelemetry/api';
import { type RunningGateway, startGateway } from '../../deploy/node/http/serve.js';
import { parseConfigObject } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import { createJsonLogger } from '../../src/lib/log.js';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const EVERYTHING = resolve(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
export const MEMORY = resolve(ROOT, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js');
export const FIXTURE = resolve(ROOT, 'test/fixtures/fixture-server.mjs');

export interface LogLine {
  level: string;
  event: string;
  server?: string;
  [k: string]: unknown;
}

export interface TestGateway extends RunningGateway {
  logs: LogLine[];
  config: Config;
}

/** A gateway in this process on a free loopback port, logging into an array. */
export async function startTestGateway(
  raw: {
    mcpServers: Record<string, unknown>;
    gateway?: Record<string, unknown>;
    profiles?: Record<string, unknown>;
  },
  options: { waitReady?: boolean; env?: Record<string, string>; trustPollMs?: number; tracer?: Tracer } = {},
): Promise<TestGateway> {
  const result = parseConfigObject(raw, { ...process.env, ...options.env });
  if (!result.ok) throw new Error(`bad test config: ${JSON.stringify(result.errors)}`);
  const config = result.config;
  config.gateway.port = 0;
  // Tests are hermetic: no state file unless the test names one.
  if (raw.gateway?.store === undefined) config.gateway.store = false;
  const logs: LogLine[] = [];
  const log = createJsonLogger({
    level: 'debug',
    redact: result.secrets,
    write: (line) => logs.push(JSON.parse(line) as LogLine),
  });
  const running = await startGateway({
    config,
    log,
    version: 'test',
    secrets: result.secrets,
    ...(options.trustPollMs ? { trustPollMs: options.trustPollMs } : {}),
    waitReady: options.waitReady ?? true,
    ...(options.tracer ? { tracer: options.tracer } : {}),
    backoff: { baseMs: 200, capMs: 1000, jitter: 0.1 },
  });
  return { ...running, logs, config };
}

export async function connectClient(url: string, name = 'test-client'): Promise<Client> {
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

export interface Spawned {
  child: ChildProcess;
  port: number;
  url: string;
  stop(): Promise<void>;
}

/** server-everything in `streamableHttp` or `sse` mode on a free loopback port. */
export async function startEverythingHttp(mode: 'streamableHttp' | 'sse'): Promise<Spawned> {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.resume();
  child.stderr?.resume();
  const path = mode === 'sse' ? '/sse' : '/mcp';
  await waitForPort(port, 15_000);
  return {
    child,
    port,
    url: `http://127.0.0.1:${port}${path}`,
    stop: () => stopChild(child),
  };
}

export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((res) => {
    child.once('close', () => res());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 3000).unref();
  });
}

export function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const listening = () =>
    new Promise<boolean>((res) => {
      const s = netConnect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        res(true);
      });
      s.once('error', () => res(false));
    });
  return eventually(listening, `something listening on ${port}`, timeoutMs, 100);
}

/**
 * Polls until `check` returns true, or fails naming `what` (a function, to report the last state
 * seen). The way a test waits for something to happen; a fixed sleep is only for waiting to see
 * that something does NOT happen, or for time itself to pass (a TTL, a rate-limit window).
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  what: string | (() => string),
  timeoutMs = 15_000,
  intervalMs = 50,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for: ${typeof what === 'string' ? what : what()}`);
}

/** A webhook receiver on 127.0.0.1: each POSTed JSON body is pushed to `received`, answered 204. */
export async function startJsonSink(): Promise<{
  server: HttpServer;
  port: number;
  received: Record<string, unknown>[];
}> {
  const received: Record<string, unknown>[] = [];
  const server = createHttpServer((req, res) => {
    let text = '';
    req.on('data', (d) => {
      text += d;
    });
    req.on('end', () => {
      received.push(JSON.parse(text) as Record<string, unknown>);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  return { server, port: (server.address() as { port: number }).port, received };
}
