/**
 * The HTTP side of upstream OAuth (#19). The contract is fixed (the conformance driver
 * and the e2e tests use it):
 *
 * - `GET /oauth/client-metadata.json`: the gateway's Client ID Metadata Document, when
 *   `gateway.oauth.clientMetadataUrl` is set (404 otherwise);
 * - `GET /oauth/callback`: the authorization server sends the browser back here; 200 HTML, or 400
 *   text/plain naming the rule (a forged, expired or replayed state, an `iss` mismatch, an
 *   `error` answer). Nothing the AS sent is echoed back, and the page carries no token;
 * - `POST /admin/servers/<n>/login` (manifold:admin): 200 `{authorizationUrl, expiresAt}`, 404 for
 *   a server that does not sign in with OAuth, 409 `{rule}` when a login cannot help now, 502
 *   `{rule}` when discovery or registration failed;
 * - `POST /admin/servers/<n>/logout` (manifold:admin), `?subject=<key>` for one user's sign-in,
 *   `?all=1` for every subject: revokes at the AS when it can, then forgets the tokens;
 * - `GET /admin/servers/<n>/auth` (manifold:admin): the state, and who is signed in (no token).
 */
import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { Authenticator } from '../../auth/principal.js';
import { CALLBACK_PATH, CLIENT_METADATA_PATH } from '../../config/oauth.js';
import { ManifoldError } from '../../errors.js';
import type { Gateway } from '../../gateway/gateway.js';
import { completeLogin } from '../../upstream/oauth/login.js';
import { OAuthManager } from '../../upstream/oauth/manager.js';
import { clientMetadataDocument } from '../../upstream/oauth/registration.js';
import { OAuthError, type OAuthRule } from '../../upstream/oauth/types.js';

export interface OAuthRoutes {
  authenticate: Authenticator;
  guard: MiddlewareHandler;
}

/** Rules a new login cannot fix now: the operator must act (config, or the server's scopes). */
const CONFLICT = new Set<OAuthRule>(['step-up-exhausted', 'issuer-not-configured', 'login-required']);

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title: string, text: string): Response {
  const html = `<!doctype html><meta charset="utf-8"><title>${escapeHtml(title)}</title><p>${escapeHtml(text)}</p>`;
  return new Response(html, {
    status: 200,
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'referrer-policy': 'no-referrer',
      'content-security-policy': "default-src 'none'",
    },
  });
}

function plain(status: number, text: string): Response {
  return new Response(`${text}\n`, {
    status,
    headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' },
  });
}

export function mountOAuth(app: Hono, gateway: Gateway, routes: OAuthRoutes): void {
  const managers = () => [...gateway.upstreamAuth.values()].filter((a) => a instanceof OAuthManager);

  app.use('/oauth/*', routes.guard);
  app.get(CLIENT_METADATA_PATH, (c) => {
    const m = managers()[0];
    const url = m?.deps.gateway.clientMetadataUrl;
    if (!m || !url) return c.notFound();
    const doc = clientMetadataDocument({
      url,
      clientName: m.deps.gateway.clientName,
      redirectUris: [m.deps.gateway.redirectUri],
    });
    return c.json(doc, 200, { 'cache-control': 'public, max-age=300' });
  });

  app.get(CALLBACK_PATH, async (c) => {
    try {
      const done = await completeLogin(gateway.upstreamAuth, new URL(c.req.url).searchParams);
      return page(
        `Signed in to ${done.server}`,
        `Signed in to ${done.server}. You can close this page and return to your client.`,
      );
    } catch (e) {
      if (e instanceof OAuthError) {
        gateway.log.warn('oauth.callback_refused', { rule: e.rule });
        return plain(400, e.rule);
      }
      // A network failure at the token endpoint, say: no detail to the browser, a line in the log.
      gateway.log.warn('oauth.callback_failed', { error: String((e as Error)?.name ?? 'error') });
      return plain(502, 'token-failed');
    }
  });

  const admitted = async (c: Context) => {
    const principal = await routes.authenticate(c.req.raw);
    if (!principal.admin) {
      throw new ManifoldError(
        'ERR_FORBIDDEN',
        'signing a server in needs a token with the manifold:admin scope',
      );
    }
  };
  const managerOf = (c: Context) => {
    const name = c.req.param('server') ?? '';
    const m = gateway.upstreamAuth.get(name);
    return { name, m: m instanceof OAuthManager ? m : undefined };
  };

  app.post('/admin/servers/:server/login', async (c) => {
    await admitted(c);
    const { name, m } = managerOf(c);
    if (!m) return c.json({ error: `no server named ${name} signs in with OAuth` }, 404);
    try {
      const begun = await m.beginLogin('');
      return c.json({ authorizationUrl: begun.url, expiresAt: begun.expiresAt }, 200, {
        'cache-control': 'no-store',
      });
    } catch (e) {
      if (!(e instanceof OAuthError)) throw e;
      return c.json({ rule: e.rule, error: e.message }, CONFLICT.has(e.rule) ? 409 : 502);
    }
  });

  app.post('/admin/servers/:server/logout', async (c) => {
    await admitted(c);
    const { name, m } = managerOf(c);
    if (!m) return c.json({ error: `no server named ${name} signs in with OAuth` }, 404);
    const all = c.req.query('all') === '1' || c.req.query('all') === 'true';
    // A user's own sign-in (mode user) by their principal key, as GET …/auth lists them.
    const subject = c.req.query('subject') ?? '';
    await m.logout(all ? undefined : subject);
    return c.json({ loggedOut: name, ...(all ? { all: true } : subject ? { subject } : {}) });
  });

  app.get('/admin/servers/:server/auth', async (c) => {
    await admitted(c);
    const { name, m } = managerOf(c);
    if (!m) return c.json({ error: `no server named ${name} signs in with OAuth` }, 404);
    // Who is signed in (principal keys, issuers, scopes, expiries): never a token.
    const subjects = await m.deps.credentials.listTokens(name);
    return c.json({ server: name, mode: m.auth.mode, ...m.state(''), subjects });
  });
}
