/**
 * The only way out of a sandbox with network "egress" (#53): the child has no network of its own
 * (`--unshare-net`, just its own loopback). The gateway runs this HTTP CONNECT proxy on a unix
 * socket bound into the sandbox; a small forwarder inside (FORWARDER_SOURCE) listens on the
 * sandbox's loopback and carries each connection to the socket; HTTP(S)_PROXY point at it. The
 * proxy opens a tunnel only to a listed host, and checks every address the host resolves to the
 * way the gateway's own egress does (private, loopback and metadata ranges refused unless listed,
 * SECURITY D3). A server that ignores the proxy variables reaches nothing: the safe failure.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { egressPolicy } from '../../../src/guards/egress/policy.js';
import type { Logger } from '../../../src/lib/log.js';
import { checkedLookup } from './egress.js';

/** Inside the sandbox, where the forwarder script is bound. */
export const FORWARDER = 'forwarder.mjs';

/**
 * Runs inside the sandbox under the sandbox's Node: listens on the sandbox's loopback, pipes each
 * connection to the proxy's socket, and runs the server with the sandbox's stdin and stdout. It
 * exits with the server. Kept as text because the sandbox sees only what is bound into it.
 */
const FORWARDER_SOURCE = `import { createServer, connect } from 'node:net';
import { spawn } from 'node:child_process';
const [socket, port, sep, command, ...args] = process.argv.slice(2);
if (sep !== '--') process.exit(2);
const server = createServer((c) => {
  const up = connect(socket);
  c.pipe(up).pipe(c);
  c.on('error', () => up.destroy());
  up.on('error', () => c.destroy());
});
server.listen(Number(port), '127.0.0.1', () => {
  const child = spawn(command, args, { stdio: 'inherit' });
  for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(s, () => child.kill(s));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
  child.on('error', () => process.exit(127));
});
`;

export interface EgressProxy {
  /** The host path of the proxy's unix socket (bound into the sandbox). */
  socket: string;
  /** The host path of the forwarder script (bound into the sandbox). */
  forwarder: string;
  close(): Promise<void>;
}

export async function openEgressProxy(allowHosts: readonly string[], log: Logger): Promise<EgressProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'manifold-egress-'));
  const socket = join(dir, 'egress.sock');
  const forwarder = join(dir, FORWARDER);
  writeFileSync(forwarder, FORWARDER_SOURCE, { mode: 0o644 });
  const policy = egressPolicy({ allowedHosts: allowHosts });
  const lookup = checkedLookup(policy);
  const tunnels = new Set<Socket>();
  const server = createServer((_req, res) => {
    // Plain-HTTP proxying is not offered: only CONNECT tunnels, so the proxy never reads a body.
    res.writeHead(405, { 'content-type': 'text/plain' }).end('only CONNECT is served by this proxy\n');
  });
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    const target = req.url ?? '';
    const refuse = (status: string, reason: string) => {
      log.warn('sandbox.egress_denied', { target: target.slice(0, 300), reason });
      client.end(`HTTP/1.1 ${status}\r\ncontent-length: 0\r\n\r\n`);
    };
    let url: URL;
    try {
      url = new URL(`https://${target}`);
    } catch {
      refuse('400 Bad Request', 'not host:port');
      return;
    }
    if (url.port === '' || url.pathname !== '/' || !/:\d+$/.test(target)) {
      refuse('400 Bad Request', 'not host:port');
      return;
    }
    const verdict = policy.checkUrl(url);
    if (!verdict.ok) {
      refuse('403 Forbidden', verdict.reason);
      return;
    }
    const up = connect({ host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port), lookup });
    tunnels.add(up).add(client);
    up.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) up.write(head);
      up.pipe(client).pipe(up);
    });
    up.once('error', (e) => {
      if (!client.writableEnded && up.connecting)
        refuse('502 Bad Gateway', (e as Error).message.slice(0, 200));
      client.destroy();
    });
    client.once('error', () => up.destroy());
    client.once('close', () => {
      tunnels.delete(client);
      up.destroy();
    });
    up.once('close', () => tunnels.delete(up));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => resolve());
  });
  // The sandbox's user must connect to the socket; nobody else can reach it, the directory being
  // the gateway's only (bwrap binds the socket alone into the sandbox).
  chmodSync(socket, 0o666);
  chmodSync(dir, 0o700);
  return {
    socket,
    forwarder,
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of tunnels) t.destroy();
        server.close(() => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
