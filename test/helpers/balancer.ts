/**
 * A round-robin load balancer on loopback, as small as one can be (#15 tests): each request goes
 * to the next backend, on a fresh connection. A backend that could not be connected to (refused,
 * or reset before the connection was made) is skipped, as a balancer with health checks would stop
 * sending to a dead instance; any failure after the connection was made passes
 * through to the client: a 502 before the answer began, a cut connection after. It counts what
 * each backend is answering at any moment, so that a test can tell which calls a kill could fail.
 */
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Balancer {
  /** The balancer's /mcp. */
  url: string;
  /** Requests each backend has taken (connected), and is answering now. */
  readonly taken: number[];
  readonly active: number[];
  /** POSTs each backend took and never answered whole: in flight there when its connection died. */
  readonly cut: number[];
  close(): Promise<void>;
}

export async function startBalancer(backends: readonly number[]): Promise<Balancer> {
  const taken = backends.map(() => 0);
  const active = backends.map(() => 0);
  const cut = backends.map(() => 0);
  let next = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => attempt(Buffer.concat(chunks), next++ % backends.length, 0));
    function attempt(body: Buffer, i: number, tries: number): void {
      const headers = { ...req.headers };
      delete headers.connection;
      delete headers['keep-alive'];
      // A new connection per request: a dead backend is a refused connect, never a stale socket.
      const up = request({
        host: '127.0.0.1',
        port: backends[i],
        method: req.method,
        path: req.url,
        headers,
        agent: false,
      });
      let open = false;
      const finish = (whole: boolean) => {
        if (!open) return;
        open = false;
        active[i]!--;
        // POSTs only: a GET stream a legacy client keeps open is not a call.
        if (!whole && req.method === 'POST') cut[i]!++;
      };
      up.on('socket', (socket) =>
        socket.once('connect', () => {
          open = true;
          taken[i]!++;
          active[i]!++;
        }),
      );
      up.on('response', (answer: IncomingMessage) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.on('close', () => {
          finish(answer.complete);
          // Cut mid-answer (the backend died): the client sees its connection cut too.
          if (!answer.complete) res.destroy();
        });
      });
      up.on('error', () => {
        // Never connected (refused, or reset while still in the dying backend's accept queue):
        // no byte of the request reached it, so another backend may take it.
        const refused = !open;
        finish(false);
        if (refused && tries < backends.length - 1) {
          attempt(body, (i + 1) % backends.length, tries + 1);
          return;
        }
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end('bad gateway');
        else res.destroy();
      });
      res.on('close', () => {
        if (!res.writableFinished) up.destroy();
      });
      up.end(body);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    taken,
    active,
    cut,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
