/**
 * The MCP Registry API's read side for the gateway's own catalog (#54): `GET /v0.1/servers` lists
 * the configured servers the caller may see (at least one of their tools is in its view: config
 * filters, grants and profile), in the registry's `ServerList` format
 * (modelcontextprotocol/registry, docs/reference/api/openapi.yaml), so a client that browses
 * registries discovers what this gateway offers. Each server's remote is the gateway's own MCP
 * endpoint (its profile's, for a token bound to one): that is where its tools are reached.
 * `GET /v0.1/servers/<name>/versions/<version|latest>` answers one of them.
 *
 * What a caller cannot see is absent, exactly like a server that does not exist (SECURITY A13).
 */
import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { CatalogEntry } from '../../aggregate/catalog.js';
import type { Authenticator, Principal } from '../../auth/principal.js';
import type { Gateway } from '../../gateway/gateway.js';

export interface RegistryRoutes {
  authenticate: Authenticator;
  guard: MiddlewareHandler;
  /** The MCP endpoint a request reaches this gateway at (`https://host/mcp`). */
  endpoint: (c: Context) => string;
}

const MAX_LIMIT = 100;
const DEFAULT_LIMIT = 30;
/** The key this gateway's own facts go under, beside the registry's (reverse-DNS, as the format asks). */
const META_KEY = 'dev.manifold/gateway';

export function mountRegistry(app: Hono, gateway: Gateway, routes: RegistryRoutes): void {
  app.use('/v0.1/servers', routes.guard);
  app.use('/v0.1/servers/*', routes.guard);
  const visible = async (c: Context) => {
    const principal = gateway.profilePrincipal(await routes.authenticate(c.req.raw), undefined);
    return { principal, servers: serversOf(gateway, principal, c, routes.endpoint(c)) };
  };
  app.get('/v0.1/servers', async (c) => {
    const { servers } = await visible(c);
    const search = c.req.query('search') ?? '';
    const limitText = c.req.query('limit');
    const limit = limitText === undefined ? DEFAULT_LIMIT : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1)
      return c.json({ error: 'limit must be a positive integer' }, 400);
    // The cursor is the last name of the previous page: names are unique and listed sorted.
    const cursor = c.req.query('cursor');
    const matching = servers.filter(
      (s) => s.server.name.includes(search) && (cursor === undefined || s.server.name > cursor),
    );
    const page = matching.slice(0, Math.min(limit, MAX_LIMIT));
    const more = matching.length > page.length;
    return c.json({
      servers: page,
      metadata: { count: page.length, ...(more ? { nextCursor: page.at(-1)!.server.name } : {}) },
    });
  });
  app.get('/v0.1/servers/:name/versions/:version', async (c) => {
    const { servers } = await visible(c);
    const name = c.req.param('name');
    const version = c.req.param('version');
    const found = servers.find(
      (s) => s.server.name === name && (version === 'latest' || s.server.version === version),
    );
    return found ? c.json(found) : c.json({ error: 'Server not found' }, 404);
  });
}

interface Listed {
  server: {
    name: string;
    title: string;
    description: string;
    version: string;
    remotes: { type: 'streamable-http'; url: string }[];
  };
  _meta: Record<string, unknown>;
}

/** The servers with a tool in this principal's view, in config order, as registry entries. */
function serversOf(gateway: Gateway, principal: Principal, c: Context, endpoint: string): Listed[] {
  const byServer = new Map<string, CatalogEntry[]>();
  for (const e of gateway.visibleEntries(principal)) {
    if (e.meta) continue;
    const list = byServer.get(e.server) ?? [];
    list.push(e);
    byServer.set(e.server, list);
  }
  const namespace = namespaceOf(new URL(c.req.url).hostname);
  const url = principal.profile ? `${endpoint}/${encodeURIComponent(principal.profile)}` : endpoint;
  const out: Listed[] = [];
  for (const s of gateway.config.servers) {
    const tools = byServer.get(s.name);
    if (!tools) continue;
    out.push({
      server: {
        name: `${namespace}/${s.name}`,
        title: s.name,
        description: `${s.name} through Manifold: ${tools.length} tool${tools.length === 1 ? '' : 's'}`.slice(
          0,
          100,
        ),
        version: gateway.version,
        remotes: [{ type: 'streamable-http', url }],
      },
      _meta: { [META_KEY]: { server: s.name, tools: tools.map((t) => t.name) } },
    });
  }
  return out.sort((a, b) => (a.server.name < b.server.name ? -1 : a.server.name > b.server.name ? 1 : 0));
}

/** A reverse-DNS namespace from the host clients reach the gateway at: `gw.example.com` gives `com.example.gw`. */
function namespaceOf(host: string): string {
  // An address names no one: a fixed namespace stands in.
  if (host.includes(':') || host.startsWith('[') || /^[0-9.]+$/.test(host)) return 'local.manifold';
  const clean = host.replace(/[^A-Za-z0-9.-]/g, '-');
  return clean.split('.').reverse().join('.') || 'local.manifold';
}
