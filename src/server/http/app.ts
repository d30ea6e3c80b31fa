import { type Context, Hono } from 'hono';
import { createAuthenticator } from '../../auth/authenticate.js';
import { type Authenticator, noAuth, type Principal } from '../../auth/principal.js';
import { isLoopbackHost } from '../../config/bind.js';
import { describeError, ManifoldError } from '../../errors.js';
import type { Gateway } from '../../gateway/gateway.js';
import { onAbort } from '../../lib/cancellation.js';
import type { MetricsExporter } from '../../observe/metrics.js';
import { UserKeyAuth } from '../../upstream/user-key.js';
import type { Edge } from '../mcp/edge.js';
import { announceChanged, createMcpHandlers } from '../mcp/endpoint.js';
import { errorAnswer } from '../mcp/errors.js';
import type { Forwarder } from '../mcp/forward.js';
import { type HttpIn, PlainReply, type Reply, toResponse } from '../mcp/http-in.js';
import { ListenRegistry } from '../mcp/listen.js';
import { ResourceWatch } from '../mcp/resource-watch.js';
import { HeldCalls } from '../mcp/rounds/mrtr.js';
import { SessionTable } from '../mcp/sessions.js';
import { type SessionStore, SharedSessions } from '../mcp/shared-sessions.js';
import { TaskPumps } from '../mcp/task-pumps.js';
import { Tracing } from '../mcp/tracing.js';
import { mountAdmin } from './admin/routes.js';
import { revocable } from './admin/tokens.js';
import { hostAllowed, originCheck, originGuard, readBodyCapped } from './guards.js';
import { mountMetrics } from './metrics.js';
import { mountOAuth } from './oauth.js';
import { mountRegistry } from './registry.js';
import { mountStatusPage } from './status/page.js';
import { mountUserKeyPage } from './user-key-page.js';

declare module 'hono' {
  interface ContextVariableMap {
    principal: Principal;
  }
}

export interface AppOptions {
  authenticate?: Authenticator;
  /** Check the Host header. Defaults to on when the gateway is bound to a loopback address. */
  checkHost?: boolean;
  /**
   * Serves `gateway.metricsPath` in this exporter's format (Node: prom-client; the Worker: the
   * core's text exporter). Without one, the path is not served and no request is observed.
   */
  metrics?: MetricsExporter;
  /**
   * Legacy session records several instances share (#15; Node on Postgres). Absent: a session
   * lives on the instance that opened it, as on SQLite, in memory and on Workers.
   */
  sessions?: SessionStore;
  /**
   * The other instances of the deployment (#15; Node on Postgres): a modern retry of a call held
   * on another instance is forwarded there (forward.ts). Absent: such a retry is refused as an
   * invalid state, as it was.
   */
  forward?: Forwarder;
}

/**
 * POST /mcp and /mcp/<profile> without Hono, for a runtime that reads the request itself (the
 * Node lane, deploy/node/http/lane.ts): the same admission, handlers and error answers as the
 * app's own routes, which call it too.
 */
export interface McpEndpoint {
  /** The profile a path names: undefined for /mcp, its name for /mcp/<name>, null for other paths. */
  route(path: string): string | undefined | null;
  /** A whole POST: origin and host, authentication, then the message. Never throws. */
  post(c: HttpIn, profile: string | undefined): Promise<Reply>;
}

export interface Http {
  app: Hono;
  mcp: McpEndpoint;
}

/** What an error answer and the resource metadata read of a request. */
type RequestView = Pick<HttpIn, 'url' | 'path' | 'header'>;

/** How long a modern client may treat a list as fresh (list_changed still invalidates it at once). */
const LIST_TTL_MS = 60_000;

/**
 * The HTTP edge. Every error thrown below becomes a status plus a JSON-RPC error body here,
 * in one place; nothing escapes as a 500 with a stack.
 */
export function createApp(gateway: Gateway, options: AppOptions = {}): Hono {
  return createHttp(gateway, options).app;
}

/** The Hono app, and the MCP endpoint it routes to (which the Node lane calls directly). */
export function createHttp(gateway: Gateway, options: AppOptions = {}): Http {
  const g = gateway.config.gateway;
  const auth = g.auth || undefined;
  // #52: every request's token is checked against the revocation list the admin API writes.
  const authenticate = revocable(
    options.authenticate ?? (auth ? createAuthenticator(auth, gateway.platform.fetch) : noAuth),
    gateway.tokens,
  );
  // RFC 9728 §5.1: a 401 points at the protected-resource metadata of this endpoint. Its URL is
  // the configured auth.resource; without one, the request's own origin only when its Host is one
  // the gateway serves (loopback or gateway.hostnames), never an arbitrary echoed Host (#13.14).
  const resource = (c: RequestView) => {
    if (auth?.resource) return auth.resource;
    if (hostAllowed(c.header('host'), g.hostnames)) return `${new URL(c.url()).origin}/mcp`;
    const host = g.hostnames[0] ?? (g.host.includes(':') ? `[${g.host}]` : g.host);
    return `http://${host}${g.hostnames[0] ? '' : `:${g.port}`}/mcp`;
  };
  // A profile's endpoint (#17) has its own metadata document, at the path-specific form.
  const profileOf = (path: string) => (path.startsWith('/mcp/') ? path.slice(5) : undefined);
  const metadataUrl = (c: RequestView) =>
    `${new URL(resource(c)).origin}/.well-known/oauth-protected-resource/mcp${
      profileOf(c.path) !== undefined ? `/${encodeURIComponent(profileOf(c.path)!)}` : ''
    }`;
  // Sessions and listen streams belong to the HTTP edge: nothing below it knows about them.
  const edge: Edge = {
    gateway,
    sessions: new SessionTable({
      max: g.maxSessions,
      idleSeconds: g.sessionIdleSeconds,
      perPrincipal: g.maxSessionsPerPrincipal,
      perTenant: g.maxSessionsPerTenant,
    }),
    listeners: new ListenRegistry({
      total: g.maxListenStreams,
      perPrincipal: g.maxListenStreamsPerPrincipal,
      perTenant: g.maxListenStreamsPerTenant,
      keepaliveMs: 25_000,
    }),
    // A list is private whenever what it holds depends on who asks (spec 2026-07-28: caching).
    listCache: { ttlMs: LIST_TTL_MS, cacheScope: auth ? 'private' : 'public' },
    serverInfo: { name: 'manifold', version: gateway.version },
    watch: new ResourceWatch(gateway),
    held: new HeldCalls({
      total: g.maxHeldCalls,
      perPrincipal: g.maxHeldCallsPerPrincipal,
      perTenant: g.maxHeldCallsPerTenant,
    }),
    instance: options.forward?.id ?? crypto.randomUUID(),
    ...(options.forward ? { forwarder: options.forward } : {}),
    taskPumps: new TaskPumps(() => gateway.platform.now(), {
      total: g.maxTasksAwaitingInput,
      perPrincipal: g.maxTasksAwaitingInputPerPrincipal,
      perTenant: g.maxTasksAwaitingInputPerTenant,
    }),
    ...(gateway.platform.tracer ? { tracing: new Tracing(gateway.platform.tracer) } : {}),
  };
  if (options.sessions) {
    edge.shared = new SharedSessions(
      options.sessions,
      edge.sessions,
      g.sessionIdleSeconds * 1000,
      () => gateway.platform.now(),
      (what, e) => gateway.log.warn('sessions.store_failed', { what, error: describeError(e).slice(0, 300) }),
    );
  }
  const mcp = createMcpHandlers(edge);
  gateway.onCatalogChange((_catalog, changed) => announceChanged(edge, changed));
  gateway.onShutdown(() => {
    edge.listeners.closeAll();
    edge.held.closeAll();
    edge.taskPumps.closeAll();
    edge.sessions.clear();
  });

  /**
   * An error thrown before a message is read (origin, host, token, body) as its answer, mapped by
   * the MCP edge's one mapping (mcp/errors.ts); a method error's 200 is a 500 here.
   */
  const errorReply = (err: unknown, c: RequestView) => {
    const { status, body } = errorAnswer(gateway, null, err, 'legacy');
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (err instanceof ManifoldError && err.code === 'ERR_UNAUTHORIZED') {
      // RFC 6750 §3: error="invalid_token" only when a token was presented.
      const presented = err.data?.presented !== false;
      headers['www-authenticate'] =
        `Bearer resource_metadata="${metadataUrl(c)}"${presented ? ', error="invalid_token"' : ''}`;
    }
    return new PlainReply(status === 200 ? 500 : status, body, headers);
  };
  const checkMcp = originCheck({
    allowedOrigins: g.allowedOrigins,
    hostnames: g.hostnames,
    checkHost: options.checkHost ?? (isLoopbackHost(g.host) || g.hostnames.length > 0),
  });
  /** Origin and Host, then the token: who the request is from, or a refusal. */
  const admit = async (c: HttpIn, profile: string | undefined): Promise<void> => {
    checkMcp(c);
    try {
      c.principal = gateway.profilePrincipal(await authenticate(c), profile);
    } catch (e) {
      // Read (and drop) the body before refusing, so the connection stays usable for the client's
      // retry with a token; some servers close a socket with an unread body.
      await c.text(g.maxBodyBytes).catch(() => '');
      throw e;
    }
  };
  const endpoint: McpEndpoint = {
    route(path) {
      if (path === '/mcp') return undefined;
      // One segment, as Hono's /mcp/:profile matches it (and decodes it).
      const name = profileOf(path);
      if (!name || name.includes('/')) return null;
      try {
        return decodeURIComponent(name);
      } catch {
        return null;
      }
    },
    async post(c, profile) {
      try {
        await admit(c, profile);
        return await mcp.post(c);
      } catch (e) {
        return errorReply(e, c);
      }
    },
  };

  const app = new Hono();
  app.onError((err, c) => toResponse(errorReply(err, honoIn(c))));
  app.notFound((c) => c.json({ error: 'not found' }, 404));

  // /healthz (and the metrics) answer only for a Host the gateway serves (or an IP literal, as load
  // balancers probe): a DNS-rebinding page must not read them (#13.5). Its status code is what a
  // load balancer reads: 503 while stopping, starting or with no upstream ready, 200 otherwise.
  const operatorGuard = originGuard({
    allowedOrigins: g.allowedOrigins,
    hostnames: g.hostnames,
    checkHost: options.checkHost ?? (isLoopbackHost(g.host) || g.hostnames.length > 0),
    ipLiterals: true,
  });
  app.use('/healthz', operatorGuard);
  if (g.metricsPath && options.metrics) {
    mountMetrics(app, {
      gateway,
      exporter: options.metrics,
      path: g.metricsPath,
      guard: operatorGuard,
      ...(auth ? { authenticate } : {}),
      edge: () => ({ sessions: edge.sessions.size, listenStreams: edge.listeners.size }),
    });
  }
  // With auth on, an anonymous caller learns only that the gateway is alive (issue: auth §4).
  app.get('/healthz', async (c) => {
    const health = gateway.health();
    const code = health.status === 'ok' || health.status === 'degraded' ? 200 : 503;
    if (!auth) return c.json(health, code);
    const principal = await authenticate(c.req.raw).catch(() => undefined);
    if (principal?.admin) return c.json(health, code);
    return c.json({ status: gateway.isStopping ? 'stopping' : code === 200 ? 'alive' : 'unavailable' }, code);
  });

  // RFC 9728 protected-resource metadata, at the root and the path-specific form (§3.1).
  const metadata = (c: Context) => ({
    resource: resource(honoIn(c)),
    authorization_servers: auth?.authorizationServers ?? [],
    // The grammar, not the servers: anonymous callers learn no server names here (#13.14).
    scopes_supported: ['tools:*', 'prompts:*', 'resources:*', 'manifold:admin'],
    bearer_methods_supported: ['header'],
  });
  app.get('/.well-known/oauth-protected-resource', (c) => (auth ? c.json(metadata(c)) : c.notFound()));
  app.get('/.well-known/oauth-protected-resource/mcp', (c) => (auth ? c.json(metadata(c)) : c.notFound()));
  app.get('/.well-known/oauth-protected-resource/mcp/:profile', (c) => {
    const profile = c.req.param('profile');
    if (!auth || !gateway.config.profiles.some((p) => p.name === profile)) return c.notFound();
    return c.json({ ...metadata(c), resource: `${resource(honoIn(c))}/${profile}` });
  });

  // The status page (#16) and its JSON view, behind the same guard as /healthz and the same auth as /mcp.
  mountStatusPage(app, gateway, { authenticate, guard: operatorGuard });
  // The Registry API's read side over the gateway's own catalog (#54): what this caller may see.
  mountRegistry(app, gateway, {
    authenticate,
    guard: operatorGuard,
    endpoint: (c) => resource(honoIn(c)),
  });
  // Re-trust over HTTP (#15), for an admin token: the diff first, then the rewrite of exactly that.
  mountAdmin(app, gateway, { authenticate, guard: operatorGuard });
  // Upstream OAuth (#19): the callback, the client metadata document, login and logout for an admin.
  if (gateway.upstreamAuth.size > 0) mountOAuth(app, gateway, { authenticate, guard: operatorGuard });
  // #52: where a caller gives their own key for a user-key server.
  if ([...gateway.upstreamAuth.values()].some((a) => a instanceof UserKeyAuth)) {
    mountUserKeyPage(app, gateway, operatorGuard);
  }

  // `/mcp` and each profile's `/mcp/<profile>` (#17): the same endpoint over another catalog.
  for (const path of ['/mcp', '/mcp/:profile']) {
    app.post(path, async (c) => toResponse(await endpoint.post(honoIn(c), c.req.param('profile'))));
    const other = (handle: (c: HttpIn) => Promise<Reply>) => async (c: Context) => {
      const inp = honoIn(c);
      await admit(inp, c.req.param('profile'));
      return toResponse(await handle(inp));
    };
    app.get(path, other(mcp.get));
    app.delete(path, other(mcp.delete));
    app.all(path, () => new Response(null, { status: 405, headers: { allow: 'GET, POST, DELETE' } }));
  }
  return { app, mcp: endpoint };
}

/** A Hono request as the endpoint reads it. A client that goes away aborts the request's signal. */
function honoIn(c: Context): HttpIn {
  const raw = c.req.raw;
  return {
    header: (name) => c.req.header(name),
    headers: raw.headers,
    path: c.req.path,
    url: () => c.req.url,
    text: (max) => readBodyCapped(raw, max),
    onDisconnect(listener) {
      if (!raw.signal.aborted) return onAbort(raw.signal, listener);
      listener();
      return () => {};
    },
    principal: undefined as never,
  };
}
