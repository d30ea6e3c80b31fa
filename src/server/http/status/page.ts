/**
 * Routes of the status page (#16), in the core so that Node and Workers serve the same page:
 * `<statusPath>` (the HTML shell), and beside it `status.json` (the view), `status.js` and
 * `status.css`. The shell and assets hold no data and are served to anyone the Origin/Host guard
 * lets through; the JSON needs what /mcp needs (a valid bearer token when auth is on).
 */
import type { Hono, MiddlewareHandler } from 'hono';
import type { Authenticator } from '../../../auth/principal.js';
import type { Gateway } from '../../../gateway/gateway.js';
import { RecentCalls } from '../../../observe/recent-calls.js';
import { mountConsole } from './console.js';
import { statusView } from './data.js';
import { STATUS_CSS, STATUS_JS, statusHtml } from './html.js';

/**
 * No inline script or style, nothing from elsewhere, no framing, no form posts: the page can only
 * load its own two assets and fetch its own JSON.
 */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const HARDENING: Record<string, string> = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-resource-policy': 'same-origin',
};

/** One recent-calls window per gateway, however many times its HTTP edge is built. */
const windows = new WeakMap<Gateway, RecentCalls>();

function recentCalls(gateway: Gateway): RecentCalls {
  let recent = windows.get(gateway);
  if (!recent) {
    // Configured servers and the unresolved bucket: a caller cannot grow the map with names. A
    // reload may change the servers: the bound follows the config, and a removed server's window
    // gives way to a new one's.
    recent = new RecentCalls({
      maxServers: () => gateway.config.servers.length + 1,
      configured: (name) => gateway.pool.get(name) !== undefined,
    });
    windows.set(gateway, recent);
    gateway.observers.add(recent.observe);
  }
  return recent;
}

export interface StatusRoutes {
  authenticate: Authenticator;
  /** The Origin/Host guard /healthz uses (DNS rebinding). */
  guard: MiddlewareHandler;
}

/**
 * Mounts the page at `gateway.statusPath`; does nothing (not even the recent-calls observer, so
 * calls pay nothing for it) when that is `false`.
 *
 * @example
 * mountStatusPage(app, gateway, { authenticate, guard: originGuard({ ... }) });
 */
export function mountStatusPage(app: Hono, gateway: Gateway, routes: StatusRoutes): void {
  const path = gateway.config.gateway.statusPath;
  if (path === false) return;
  const recent = recentCalls(gateway);
  const base = path === '/' ? '' : path;
  const page = statusHtml(base);
  const asset = (body: string, type: string) => () =>
    new Response(body, {
      headers: { ...HARDENING, 'content-type': type, 'cache-control': 'no-cache' },
    });
  const pages = base === '' ? ['/'] : [base, `${base}/`];
  for (const p of pages) {
    app.use(p, routes.guard);
    app.get(p, asset(page, 'text/html; charset=utf-8'));
  }
  for (const [name, body, type] of [
    ['status.js', STATUS_JS, 'text/javascript; charset=utf-8'],
    ['status.css', STATUS_CSS, 'text/css; charset=utf-8'],
  ] as const) {
    app.use(`${base}/${name}`, routes.guard);
    app.get(`${base}/${name}`, asset(body, type));
  }
  // #52: the console's script and the catalog it searches, under the same guard and headers.
  mountConsole(app, gateway, base, {
    authenticate: routes.authenticate,
    guard: routes.guard,
    headers: HARDENING,
  });
  app.use(`${base}/status.json`, routes.guard);
  app.get(`${base}/status.json`, async (c) => {
    // A token bound to a profile sees that profile's catalog, as it would at /mcp.
    const principal = gateway.profilePrincipal(await routes.authenticate(c.req.raw), undefined);
    return new Response(JSON.stringify(await statusView(gateway, recent, principal)), {
      headers: {
        ...HARDENING,
        'content-type': 'application/json; charset=utf-8',
        // Per principal and changing every poll: never kept by a cache or shared between users.
        'cache-control': 'no-store',
        vary: 'authorization',
      },
    });
  });
}
