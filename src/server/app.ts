import { Hono } from 'hono';
import { type Authenticator, noAuth, type Principal } from '../auth/principal.js';
import type { Gateway } from '../gateway.js';
import { toRpcError } from './errors.js';
import { isLoopbackHost, originGuard } from './http-guards.js';
import { errorMessage } from './jsonrpc.js';
import { broadcastListChanged, createMcpHandlers } from './mcp.js';

declare module 'hono' {
  interface ContextVariableMap {
    principal: Principal;
  }
}

export interface AppOptions {
  authenticate?: Authenticator;
  /** Check the Host header. Defaults to on when the gateway is bound to a loopback address. */
  checkHost?: boolean;
}

/**
 * The HTTP edge. Every error thrown below becomes a status plus a JSON-RPC error body here,
 * in one place; nothing escapes as a 500 with a stack.
 */
export function createApp(gateway: Gateway, options: AppOptions = {}): Hono {
  const g = gateway.config.gateway;
  const authenticate = options.authenticate ?? noAuth;
  const mcp = createMcpHandlers(gateway);
  gateway.onCatalogChange(() => broadcastListChanged(gateway));

  const app = new Hono();
  app.onError((err, c) => {
    const e = toRpcError(err);
    if (e.data.manifold === 'ERR_INTERNAL') {
      gateway.log.error('http.internal_error', { path: c.req.path, error: String(err).split('\n')[0] });
    }
    const status = e.status === 200 ? 500 : e.status;
    return new Response(errorMessage(null, e.code, e.message, e.data), {
      status,
      headers: { 'content-type': 'application/json' },
    });
  });
  app.notFound(() => new Response(JSON.stringify({ error: 'not found' }), { status: 404 }));

  app.get('/healthz', (c) => c.json(gateway.health()));

  app.use(
    '/mcp',
    originGuard({
      allowedOrigins: g.allowedOrigins,
      hostnames: g.hostnames,
      checkHost: options.checkHost ?? (isLoopbackHost(g.host) || g.hostnames.length > 0),
    }),
  );
  app.use('/mcp', async (c, next) => {
    c.set('principal', await authenticate(c.req.raw));
    await next();
  });
  app.post('/mcp', (c) => mcp.post(c));
  app.get('/mcp', (c) => mcp.get(c));
  app.delete('/mcp', (c) => mcp.delete(c));
  app.all('/mcp', () => new Response(null, { status: 405, headers: { allow: 'GET, POST, DELETE' } }));
  return app;
}
