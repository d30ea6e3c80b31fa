import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { HeaderBag, Principal } from '../../../src/auth/principal.js';
import { bodyTooLarge, describeError, ManifoldError } from '../../../src/errors.js';
import type { Logger } from '../../../src/lib/log.js';
import type { McpEndpoint } from '../../../src/server/http/app.js';
import {
  type HttpIn,
  PlainReply,
  pieces,
  type Reply,
  STREAMED_BODY_CHARS,
} from '../../../src/server/mcp/http-in.js';

/**
 * Node's listener: POST /mcp (and /mcp/<profile>) goes to the MCP endpoint straight from the
 * IncomingMessage, and its answer is written to the ServerResponse as it is; every other request
 * goes to the Hono app, whose Node adapter is loaded on the first of them.
 *
 * Why: the adapter's web Request, Headers, body stream and Response per call cost a large share of
 * a relayed call's CPU (the B2 bench row). The endpoint is the same one the app's own POST route
 * calls (app.ts `createHttp`): admission, era handlers and error answers are not written twice.
 */
export function httpLane(
  endpoint: McpEndpoint,
  other: () => Promise<RequestListener>,
  log: Logger,
): RequestListener {
  let fallback: Promise<RequestListener> | undefined;
  return (req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const profile = req.method === 'POST' ? endpoint.route(path) : null;
    if (profile === null) {
      fallback ??= other();
      fallback.then(
        (listener) => listener(req, res),
        (e) => broken(res, e, log),
      );
      return;
    }
    endpoint.post(new NodeIn(req, res, path), profile).then(
      (reply) => send(res, reply),
      (e) => broken(res, e, log),
    );
  };
}

/**
 * The request as the endpoint reads it, the body read once. Its headers are Node's own table,
 * which the server builds with repeated headers joined with ", " as Headers.get does
 * (`joinDuplicateHeaders`, serve.ts): two Authorization headers stay ambiguous (grants.ts
 * `extractBearer`) and two Host headers are refused (guards.ts `hostAllowed`).
 */
class NodeIn implements HttpIn {
  principal!: Principal;
  readonly headers: HeaderBag = this;
  private body: Promise<string> | undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    readonly path: string,
  ) {}

  /** A lower-case name (HttpIn); `get` takes any case. */
  header(key: string): string | undefined {
    const value = this.req.headers[key];
    // Only Set-Cookie is kept as a list; no request header the gateway reads is one.
    return Array.isArray(value) ? value.join(', ') : value;
  }

  /** Any case, as Headers.get. */
  get(name: string): string | null {
    return this.header(name.toLowerCase()) ?? null;
  }

  url(): string {
    return `http://${this.header('host') ?? 'localhost'}${this.req.url ?? '/'}`;
  }

  text(max: number): Promise<string> {
    this.body ??= readBody(this.req, max);
    return this.body;
  }

  onDisconnect(listener: () => void): () => void {
    const res = this.res;
    const onClose = () => {
      if (!res.writableFinished) listener();
    };
    res.once('close', onClose);
    return () => {
      res.off('close', onClose);
    };
  }
}

/** The body as UTF-8 text (a leading BOM dropped, as Request.text does), refused past `max` bytes. */
function readBody(req: IncomingMessage, max: number): Promise<string> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > max) return Promise.reject(bodyTooLarge(max));
  const cut = () => new ManifoldError('ERR_BAD_REQUEST', 'the request body ended before it was complete');
  if (req.destroyed) return Promise.reject(cut());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = () => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onError);
      chunks.length = 0;
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        settle();
        reject(bodyTooLarge(max));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      const text = Buffer.concat(chunks, size).toString('utf8');
      settle();
      resolve(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    };
    const onError = () => {
      settle();
      reject(cut());
    };
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onError);
  });
}

/** Writes a reply: a plain one as it is (a big one in pieces, as the socket drains), a stream as it comes. */
function send(res: ServerResponse, reply: Reply): void {
  if (res.destroyed) return;
  if (reply instanceof PlainReply) {
    const { status, body, headers } = reply;
    if (body === null) {
      res.writeHead(status, headers).end();
    } else if (body.length <= STREAMED_BODY_CHARS) {
      // The length before the spread: a kept optimisation for Node 20 (docs/architecture.md).
      res.writeHead(status, { 'content-length': Buffer.byteLength(body), ...headers }).end(body);
    } else {
      res.writeHead(status, headers);
      const source = pieces(body);
      const pump = () => {
        for (let next = source.next(); !next.done; next = source.next()) {
          if (!res.write(next.value)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
    }
    return;
  }
  const headers: Record<string, string> = {};
  reply.headers.forEach((value, name) => {
    headers[name] = value;
  });
  res.writeHead(reply.status, headers);
  if (!reply.body) {
    res.end();
    return;
  }
  // A stream's headers leave now: the client is waiting on them, not on the first event.
  res.flushHeaders();
  const reader = reply.body.getReader();
  res.once('close', () => {
    if (!res.writableFinished) reader.cancel().catch(() => {});
  });
  const pump = (): void => {
    reader.read().then(
      ({ done, value }) => {
        if (done) {
          res.end();
          return;
        }
        if (res.write(value)) pump();
        else res.once('drain', pump);
      },
      () => res.destroy(),
    );
  };
  pump();
}

/** A bug in the lane itself: the client gets a JSON-RPC internal error, never a hung socket. */
function broken(res: ServerResponse, e: unknown, log: Logger): void {
  log.error('http.internal_error', { error: describeError(e) });
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res
    .writeHead(500, { 'content-type': 'application/json' })
    .end('{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}');
}
