import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { HeaderBag, Principal } from '../../../src/auth/principal.js';
import { describeError, ManifoldError } from '../../../src/errors.js';
import type { Logger } from '../../../src/lib/log.js';
import type { McpEndpoint } from '../../../src/server/http/app.js';
import {
  type HttpIn,
  JSON_HEADERS,
  PlainReply,
  pieces,
  type Reply,
  STREAMED_BODY_CHARS,
} from '../../../src/server/mcp/http-in.js';
import { repeatsName, shapedHeader } from './header-names.js';

/**
 * Node's listener: POST /mcp (and /mcp/<profile>) goes to the MCP endpoint straight from the
 * IncomingMessage, and its answer is written to the ServerResponse as it is; every other request
 * goes to the Hono app, whose Node adapter is loaded on the first of them.
 *
 * Why (#18): on Node 20, the adapter's Request, Headers and body stream and a Response per answer
 * cost as much as the rest of a relayed call, and loading the adapter loads undici before the
 * port opens. The endpoint is the same one the app's own POST route calls (app.ts
 * `createHttp`): admission, era handlers and error answers are not written twice.
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

/** The request as the endpoint reads it: headers joined as Headers.get does, the body read once. */
class NodeIn implements HttpIn {
  principal!: Principal;
  readonly headers: HeaderBag = this;
  /** Undefined until a header is read; null when Node's own `req.headers` is exact (no name repeats). */
  private joined: Map<string, string> | null | undefined;
  private body: Promise<string> | undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    readonly path: string,
  ) {}

  /** A lower-case name (HttpIn); `get` takes any case. */
  header(key: string): string | undefined {
    if (this.joined === undefined)
      this.joined = repeatsName(this.req) ? joinHeaders(this.req.rawHeaders) : null;
    if (this.joined !== null) return this.joined.get(key);
    const shaped = shapedHeader(this.req, key);
    if (shaped !== null) return shaped;
    // A plain object: a name such as `constructor` finds Object.prototype's, hence the checks.
    const value: unknown = this.req.headers[key];
    if (typeof value === 'string') return value;
    return Array.isArray(value) ? value.join(', ') : undefined;
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
    let live = true;
    // `on`, not `once`: a response closes once, and `once` wraps every listener in another. The
    // undo clears a flag rather than calling `off`, whose search and delete on the response's
    // listener table cost more than the listener (#18); the response, listener and all, goes
    // with its request.
    res.on('close', () => {
      if (live && !res.writableFinished) listener();
    });
    return () => {
      live = false;
    };
  }
}

/**
 * Repeated headers joined with ", ", as the Headers the app sees. Node's own `req.headers`
 * keeps only the first of a repeated Authorization or Host, and two Authorization headers must
 * stay ambiguous (grants.ts `extractBearer` refuses them).
 */
function joinHeaders(raw: readonly string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    const seen = map.get(name);
    map.set(name, seen === undefined ? value : `${seen}, ${value}`);
  }
  return map;
}

/** The body as UTF-8 text (a leading BOM dropped, as Request.text does), refused past `max` bytes. */
function readBody(req: IncomingMessage, max: number): Promise<string> {
  const tooLarge = () => new ManifoldError('ERR_BODY_TOO_LARGE', `request body exceeds ${max} bytes`);
  const declared = req.headers['content-length'];
  // Node's parser takes only digits here, so fewer digits than `max` has is a smaller number:
  // `Number` on a string is a call into the runtime, about 290 instructions (#18).
  if (declared !== undefined && declared.length >= String(max).length && Number(declared) > max)
    return Promise.reject(tooLarge());
  const cut = () => new ManifoldError('ERR_BAD_REQUEST', 'the request body ended before it was complete');
  if (req.destroyed) return Promise.reject(cut());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // The listeners stay on when the body is settled, and do nothing more: taking four off cost
    // more than the rest of the read (#18: about 2,600 instructions a call under callgrind). The
    // request, listeners and all, goes with its response; the chunks go at once.
    let settled = false;
    const settle = () => {
      settled = true;
      chunks.length = 0;
    };
    const onData = (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size > max) {
        settle();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      if (settled) return;
      const text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)).toString('utf8');
      settle();
      resolve(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    };
    const onError = () => {
      if (settled) return;
      settle();
      reject(cut());
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onError);
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
      const text = String(body);
      const length = Buffer.byteLength(text);
      // The common answer's headers as a literal of one shape (#18): merging into a copy stored
      // each key through V8's megamorphic path.
      res
        .writeHead(
          status,
          headers === JSON_HEADERS
            ? { 'content-type': 'application/json', 'content-length': length }
            : { 'content-length': length, ...headers },
        )
        .end(text);
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
