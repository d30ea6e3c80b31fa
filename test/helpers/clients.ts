/**
 * Clients of both protocol eras for end-to-end tests, plus taps that let a test see what an
 * upstream really received (a stdio relay and an HTTP proxy, both transparent).
 *
 * - legacy: the v1 SDK `Client` over streamable HTTP (initialize, Mcp-Session-Id, GET stream).
 * - modern: the v2 SDK `Client` (`@modelcontextprotocol/client`) pinned to 2026-07-28 (server/discover,
 *   per-request `_meta`, subscriptions/listen), with every HTTP exchange recorded.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  type McpSubscription,
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { ROOT, stopChild } from './harness.js';

export const REFERENCE = resolve(ROOT, 'test/fixtures/reference-server.mjs');
export const DRIFT = resolve(ROOT, 'test/fixtures/drift-server.mjs');

/** One HTTP exchange a client made, as it went out and as it was answered. */
export interface WireRecord {
  method: string;
  headers: Record<string, string>;
  body?: Record<string, unknown>;
  status?: number;
  responseHeaders?: Record<string, string>;
}

function recordingFetch(log: WireRecord[]): typeof fetch {
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    const rec: WireRecord = {
      method: init?.method ?? (input instanceof Request ? input.method : 'GET'),
      headers: Object.fromEntries(headers),
    };
    if (typeof init?.body === 'string') {
      try {
        rec.body = JSON.parse(init.body) as Record<string, unknown>;
      } catch {
        // not JSON: leave it out
      }
    }
    log.push(rec);
    const res = await fetch(input, init);
    rec.status = res.status;
    rec.responseHeaders = Object.fromEntries(res.headers);
    return res;
  };
}

/** Counts notifications/tools/list_changed as the client's own handler sees them. */
export interface ChangeCounter {
  count: number;
}

export interface LegacyHandle {
  era: 'legacy';
  client: LegacyClient;
  transport: LegacyTransport;
  wire: WireRecord[];
  listChanged: ChangeCounter;
  close(): Promise<void>;
}

export interface ModernHandle {
  era: 'modern';
  client: ModernClient;
  wire: WireRecord[];
  listChanged: ChangeCounter;
  subscription: McpSubscription | undefined;
  close(): Promise<void>;
}

export type AnyHandle = LegacyHandle | ModernHandle;

/** A v1 (2025-11-25) or a v2 (2026-07-28) SDK client of the gateway at `url`. */
export function connectEra(url: string, era: 'v1' | 'v2'): Promise<AnyHandle> {
  return era === 'v1' ? connectLegacy(url) : connectModern(url);
}

/** The text blocks of a tool result, joined. */
export const resultText = (r: unknown): string =>
  ((r as { content?: { text?: string }[] } | undefined)?.content ?? []).map((c) => c.text ?? '').join('');

const bearer = (token: string | undefined): Record<string, string> =>
  token ? { authorization: `Bearer ${token}` } : {};

/** A v1 SDK client (2025-11-25) with a session; list_changed arrives on its GET stream. */
export async function connectLegacy(
  url: string,
  token?: string,
  name = 'matrix-legacy',
): Promise<LegacyHandle> {
  const wire: WireRecord[] = [];
  const transport = new LegacyTransport(new URL(url), {
    requestInit: { headers: bearer(token) },
    fetch: recordingFetch(wire),
  });
  const client = new LegacyClient({ name, version: '1.0.0' });
  const listChanged: ChangeCounter = { count: 0 };
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    listChanged.count++;
  });
  await client.connect(transport);
  return { era: 'legacy', client, transport, wire, listChanged, close: () => client.close() };
}

/**
 * A v2 SDK client pinned to 2026-07-28: it probes with server/discover and never falls back to
 * initialize. With `listen`, it opens subscriptions/listen for tools/list_changed.
 */
export async function connectModern(
  url: string,
  token?: string,
  options: { listen?: boolean; name?: string } = {},
): Promise<ModernHandle> {
  const wire: WireRecord[] = [];
  const transport = new ModernTransport(new URL(url), {
    requestInit: { headers: bearer(token) },
    fetch: recordingFetch(wire),
  });
  const client = new ModernClient(
    { name: options.name ?? 'matrix-modern', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  const listChanged: ChangeCounter = { count: 0 };
  client.setNotificationHandler('notifications/tools/list_changed', () => {
    listChanged.count++;
  });
  await client.connect(transport);
  const subscription = options.listen ? await client.listen({ toolsListChanged: true }) : undefined;
  return {
    era: 'modern',
    client,
    wire,
    listChanged,
    subscription,
    close: async () => {
      await subscription?.close().catch(() => {});
      await client.close();
    },
  };
}

/** The reference fixture (dual-era, v2 SDK server) over streamable HTTP on a free port. */
export async function startReferenceHttp(env: Record<string, string> = {}): Promise<{
  child: ChildProcess;
  port: number;
  url: string;
  stop(): Promise<void>;
}> {
  const child = spawn(process.execPath, [REFERENCE, 'http', '0'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr?.resume();
  const port = await new Promise<number>((res, rej) => {
    let buf = '';
    child.stdout?.on('data', (d: Buffer) => {
      buf += String(d);
      const m = /listening (\d+)/.exec(buf);
      if (m) res(Number(m[1]));
    });
    child.once('exit', (code) => rej(new Error(`reference server exited (${code}) before listening`)));
  });
  child.stdout?.resume();
  return { child, port, url: `http://127.0.0.1:${port}/mcp`, stop: () => stopChild(child) };
}

// ---------------------------------------------------------------------------------------------
// Taps

/** One line of a stdio upstream's traffic: `in` is what the gateway wrote, `out` what the server did. */
export interface TapLine {
  dir: 'in' | 'out';
  msg: Record<string, unknown>;
}

const TAP_SOURCE = `
import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
const [log, cmd, ...args] = process.argv.slice(2);
const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'], env: process.env });
const splitter = (dir) => {
  let buf = '';
  return (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) appendFileSync(log, JSON.stringify({ dir, line }) + '\\n');
    }
  };
};
const seenIn = splitter('in');
const seenOut = splitter('out');
process.stdin.setEncoding('utf8');
child.stdout.setEncoding('utf8');
process.stdin.on('data', (c) => { seenIn(c); child.stdin.write(c); });
process.stdin.on('end', () => child.stdin.end());
child.stdout.on('data', (c) => { seenOut(c); process.stdout.write(c); });
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
process.on('SIGTERM', () => child.kill('SIGTERM'));
`;

let tapDir: string | undefined;

/**
 * A stdio server behind a transparent relay that appends every line in each direction to a log:
 * use `command`/`args` in the gateway config, `lines()` to read what crossed.
 */
export function tapStdio(
  name: string,
  command: string,
  args: string[],
): {
  command: string;
  args: string[];
  lines(): TapLine[];
} {
  tapDir ??= mkdtempSync(join(tmpdir(), 'manifold-tap-'));
  const script = join(tapDir, 'tap.mjs');
  if (!existsSync(script)) writeFileSync(script, TAP_SOURCE);
  const log = join(tapDir, `${name}.jsonl`);
  appendFileSync(log, '');
  return {
    command: process.execPath,
    args: [script, log, command, ...args],
    lines: () =>
      readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .flatMap((l) => {
          const { dir, line } = JSON.parse(l) as { dir: 'in' | 'out'; line: string };
          try {
            return [{ dir, msg: JSON.parse(line) as Record<string, unknown> }];
          } catch {
            return [];
          }
        }),
  };
}

/** One HTTP request that went through the proxy tap. */
export interface TapExchange {
  method: string;
  headers: IncomingHttpHeaders;
  /** The JSON body, once it has been read. */
  body?: Record<string, unknown>;
  /** The response as it streamed (SSE or JSON text). */
  response: string;
  /** The upstream finished its response. */
  ended: boolean;
  /** The client (the gateway) closed the request before the upstream finished answering. */
  closedEarly: boolean;
}

/** A transparent HTTP proxy on loopback in front of `targetPort`, recording every exchange. */
export async function startHttpTap(targetPort: number): Promise<{
  port: number;
  exchanges: TapExchange[];
  stop(): Promise<void>;
}> {
  const exchanges: TapExchange[] = [];
  const server: Server = createServer((req, res) => {
    const ex: TapExchange = {
      method: req.method ?? 'GET',
      headers: req.headers,
      response: '',
      ended: false,
      closedEarly: false,
    };
    exchanges.push(ex);
    const chunks: Buffer[] = [];
    const up = httpRequest(
      {
        host: '127.0.0.1',
        port: targetPort,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        res.flushHeaders();
        ur.on('data', (c: Buffer) => {
          ex.response += String(c);
          res.write(c);
        });
        ur.on('end', () => {
          ex.ended = true;
          res.end();
        });
        ur.on('error', () => res.destroy());
      },
    );
    up.on('error', () => res.destroy());
    req.on('data', (c: Buffer) => {
      chunks.push(c);
      up.write(c);
    });
    req.on('end', () => {
      if (chunks.length > 0) {
        try {
          ex.body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
        } catch {
          // not JSON
        }
      }
      up.end();
    });
    res.on('close', () => {
      if (!ex.ended) {
        ex.closedEarly = true;
        up.destroy();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    exchanges,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
