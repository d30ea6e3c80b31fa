/**
 * The Worker (#15): each isolate runs the gateway for the requests that need no state, and sends
 * the rest to the Durable Object that owns that state (route.ts, objects.ts). A modern client's
 * request to a modern upstream touches no Durable Object once the isolate has the snapshots.
 */

import { createAuthenticator } from '../../src/auth/authenticate.js';
import { type Authenticator, noAuth, type Principal } from '../../src/auth/principal.js';
import { isObject } from '../../src/lib/json.js';
import { encodeHeaderValue } from '../../src/protocol/headers.js';
import { errorMessage } from '../../src/protocol/jsonrpc.js';
import { revocable } from '../../src/server/http/admin/tokens.js';
import { readBodyCapped } from '../../src/server/http/guards.js';
import { toRpcError } from '../../src/server/mcp/errors.js';
import { MemoryStateStore } from '../../src/store/state.js';
import { type AdminStateClient, AdminStatePull, withSharedState } from './admin-state.js';
import { type AuditShipper, auditShipper } from './audit.js';
import {
  ConfigFailure,
  configError,
  type Env,
  INTERNAL,
  readConfig,
  SERVER_HEADER,
  TENANT_HEADER,
} from './boot.js';
import { refreshStale } from './fresh.js';
import { callbackServer, oauthServers, observeAuth, plain, remoteAuths, SeenOrigin } from './oauth.js';
import { type SnapshotOpener, snapshotOpener } from './opener.js';
import { buildPlace, deploymentSecret, type Place } from './place.js';
import { workersPlatform } from './platform.js';
import {
  forObject,
  isLegacyClient,
  type Message,
  queuedTaskOwner,
  type Route,
  routeMessage,
} from './route.js';
import { tenantLimiter, tenantObjectName } from './tenant-limit.js';

export { ManifoldGateway, ManifoldTenant, ManifoldUpstream } from './objects.js';

interface Isolate extends Place {
  opener: SnapshotOpener;
  /** The token verified and checked against the revocation list (#52), for routing. */
  authenticate: Authenticator;
  /** The shared state's object (#52: stored servers, tokens), and this isolate's refresh of it. */
  shared: AdminStateClient;
  pull: AdminStatePull;
  /** Sends this isolate's audited calls to the deployment's window (#52); none without a status page. */
  shipper: AuditShipper | undefined;
  /** auth is on: tenant objects are keyed by the token's tenant. */
  auth: boolean;
}

/** Where this isolate's clients come from (#19: the callback URL of a login begun here). */
const origin = new SeenOrigin();

/** This isolate's gateway, built by the first request (and again if that failed). */
let isolate: Promise<Isolate | ConfigFailure> | undefined;

async function bootIsolate(env: Env): Promise<Isolate | ConfigFailure> {
  const booted = readConfig(env);
  if (booted instanceof ConfigFailure) return booted;
  const { config } = booted;
  const auth = config.gateway.auth;
  // One authenticator for routing and for the app: a token is verified once per isolate.
  const authenticate = auth
    ? createAuthenticator(auth, workersPlatform(booted.log, config.gateway).fetch)
    : noAuth;
  // Protected upstreams (#19): an OAuth server's token comes from its object (oauth.ts).
  const upstreamAuth = remoteAuths(booted, env, origin);
  const opener = snapshotOpener(env.UPSTREAMS, () => Date.now(), false, observeAuth(upstreamAuth));
  // #52: servers added through the admin API and the revocation list, shared by every place.
  const { store, shared } = withSharedState(env.TENANTS, new MemoryStateStore());
  const place = buildPlace(booted, {
    store,
    secret: await deploymentSecret(env, config),
    upstreamAuth,
    origin,
    openSession: opener.open,
    // Every isolate spends a tenant's budget from the tenant's object, a block at a time.
    callLimiter: tenantLimiter(env.TENANTS, { log: booted.log }),
    app: { authenticate },
  });
  place.gateway.tokens.pulled = true;
  await place.gateway.start();
  return {
    ...place,
    opener,
    authenticate: revocable(authenticate, place.gateway.tokens),
    shared,
    pull: new AdminStatePull(),
    shipper: auditShipper(place.gateway, env.TENANTS),
    auth: auth !== false,
  };
}

const notFound = () => Response.json({ error: 'not found' }, { status: 404 });

const ADMIN = /^\/admin\/servers\/([^/]+)\//;
const KEYS = /^\/keys\/([^/]+)$/;

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const path = new URL(request.url).pathname;
    // The objects' own routes are for the Worker alone.
    if (path.startsWith(INTERNAL) || path === INTERNAL.slice(0, -1)) return notFound();
    if (env.MANIFOLD_ROUTE === 'object') {
      return env.MANIFOLD.get(env.MANIFOLD.idFromName('gateway')).fetch(request);
    }
    if (env.MANIFOLD_ROUTE !== undefined && env.MANIFOLD_ROUTE !== 'isolate') {
      return configError(500, 'MANIFOLD_ROUTE must be "isolate" (the default) or "object"');
    }
    isolate ??= bootIsolate(env).catch((e) => {
      isolate = undefined;
      return new ConfigFailure(500, `gateway failed to start: ${e instanceof Error ? e.message : String(e)}`);
    });
    origin.note(request);
    const iso = await isolate;
    if (iso instanceof ConfigFailure) return iso.response();
    await iso.pull.pull(iso.gateway, Date.now());
    await refreshStale(iso.gateway, iso.opener, Date.now());
    const response = await serve(iso, env, request, path);
    ctx.waitUntil(iso.shared.settled());
    return iso.shipper ? iso.shipper.after(response, (p) => ctx.waitUntil(p)) : response;
  },
} satisfies ExportedHandler<Env>;

async function serve(iso: Isolate, env: Env, request: Request, path: string): Promise<Response> {
  if (path === '/oauth/callback' || path === '/oauth/client-metadata.json') {
    const oauth = await toOAuthObject(iso, env, request, path);
    if (oauth) return oauth;
  }
  // #52: a caller's own key is given on its server's object's page, which keeps it.
  const keyServer = KEYS.exec(path)?.[1];
  if (keyServer && iso.gateway.pool.get(keyServer)?.config.auth?.mode === 'user-key') {
    return toUpstream(env, keyServer, request);
  }
  // #52: the audit query reads the deployment's window, which every place sends its calls to.
  if (path === '/admin/audit' && request.method === 'GET' && iso.shipper) {
    const principal = await iso.authenticate(request).catch(() => undefined);
    if (principal?.admin) return iso.shipper.query(new URL(request.url));
  }
  const admin = ADMIN.exec(path);
  if (admin) {
    let server: string;
    try {
      server = decodeURIComponent(admin[1]!);
    } catch {
      return iso.app.fetch(request);
    }
    // Re-trust rewrites the baseline in the server's own object; isolates see it at their next read.
    // Only an admin's request goes there: the isolate's own admin routes refuse the others alike.
    const principal = await iso.authenticate(request).catch(() => undefined);
    if (!principal?.admin || !iso.gateway.pool.get(server)) return iso.app.fetch(request);
    return toUpstream(env, server, request);
  }
  const profile = path === '/mcp' ? undefined : path.startsWith('/mcp/') ? path.slice(5) : null;
  if (profile === null) return iso.app.fetch(request);
  if (request.method !== 'POST' && !isLegacyClient(request, undefined)) return iso.app.fetch(request);
  let text: string | undefined;
  let message: Message | undefined;
  if (request.method === 'POST') {
    try {
      text = await readBodyCapped(request, iso.gateway.config.gateway.maxBodyBytes);
    } catch (e) {
      // Over the cap (B2): the same 413 the app gives, without reading further.
      const rpc = toRpcError(e);
      return new Response(errorMessage(null, rpc.code, rpc.message, rpc.data), {
        status: rpc.status,
        headers: { 'content-type': 'application/json' },
      });
    }
    message = parse(text);
  }
  const again = () => new Request(request, text === undefined ? {} : { body: text });
  const principal = await iso.authenticate(request).catch(() => undefined);
  // Not authenticated: the app answers (401 with its metadata, and so on).
  if (!principal) return iso.app.fetch(again());
  let route: Route = { to: 'isolate' };
  let body = text;
  let renamedTo: string | undefined;
  if (isLegacyClient(request, message)) route = { to: 'tenant' };
  else if (message) {
    let served: Principal;
    try {
      served = iso.gateway.profilePrincipal(principal, profile ? decodeURIComponent(profile) : undefined);
    } catch {
      return iso.app.fetch(again());
    }
    route = routeMessage(iso.gateway, served, message);
    if (route.to === 'tenant') {
      const owner = await queuedTaskOwner(iso.gateway, served, message);
      if (owner) route = { to: 'upstream', server: owner };
    }
    if (route.to === 'upstream') {
      const names = iso.opener.fresh.get(route.server)?.names ?? {};
      const renamed = forObject(iso.gateway, served, message, names);
      if (renamed) {
        body = JSON.stringify(renamed);
        // The Mcp-Name header must match the body's name (streamable-http "Request Metadata").
        renamedTo = encodeHeaderValue(String(renamed.params?.name));
      }
    }
  }
  if (route.to === 'isolate') return iso.app.fetch(again());
  const forwarded = new Request(request, body === undefined ? {} : { body });
  if (renamedTo !== undefined && forwarded.headers.has('mcp-name'))
    forwarded.headers.set('mcp-name', renamedTo);
  if (route.to === 'upstream') return toUpstream(env, route.server, forwarded);
  // Without auth every client is one tenant ('default', the anonymous principal's). The object is
  // the one that counts the tenant's calls too (tenant-limit.ts), and learns its tenant from here.
  const tenant = iso.auth ? principal.tenant : 'default';
  forwarded.headers.set(TENANT_HEADER, tenant);
  return env.TENANTS.get(env.TENANTS.idFromName(tenantObjectName(tenant))).fetch(forwarded);
}

/**
 * Upstream OAuth's public routes (#19) are served by the object that owns the server's token: the
 * callback by the server its sealed state names, the client metadata document by any OAuth
 * server's object (they all describe the same client). undefined: the isolate's app answers.
 */
async function toOAuthObject(
  iso: Isolate,
  env: Env,
  request: Request,
  path: string,
): Promise<Response | undefined> {
  const config = iso.gateway.config;
  const servers = oauthServers(config);
  if (servers.length === 0) return undefined;
  if (path === '/oauth/client-metadata.json') return toUpstream(env, servers[0]!.name, request);
  if (request.method !== 'GET') return undefined;
  const server = await callbackServer(config, new URL(request.url).searchParams);
  if (server === undefined || !servers.some((s) => s.name === server)) {
    iso.gateway.log.warn('oauth.callback_refused', { rule: 'state-invalid' });
    return plain(400, 'state-invalid');
  }
  return toUpstream(env, server, request);
}

function toUpstream(env: Env, server: string, request: Request): Promise<Response> {
  const headers = new Headers(request.headers);
  headers.set(SERVER_HEADER, server);
  const stub = env.UPSTREAMS.get(env.UPSTREAMS.idFromName(server));
  // The client's own URL, so the object's answers (a 401's metadata URL) name the public origin.
  return stub.fetch(new Request(request, { headers }));
}

function parse(text: string): Message | undefined {
  try {
    const m = JSON.parse(text) as unknown;
    return isObject(m) ? (m as Message) : undefined;
  } catch {
    return undefined;
  }
}
