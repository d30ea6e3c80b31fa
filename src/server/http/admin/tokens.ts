/**
 * Tokens over HTTP (#52): `GET /admin/tokens` lists the unexpired tokens the gateway has seen (by
 * id: the `jti`, or a digest of the token; never the token), and `POST /admin/tokens/{id}/revoke`
 * refuses one before its expiry, on every instance sharing the store within seconds
 * (gateway/token-registry.ts). `revocable` is the check every request's token passes.
 */
import type { Hono } from 'hono';
import type { Authenticator } from '../../../auth/principal.js';
import { ManifoldError } from '../../../errors.js';
import type { TokenRegistry } from '../../../gateway/token-registry.js';
import type { SeenToken } from '../../../store/tokens.js';
import type { AdminContext } from './context.js';

const MAX_LISTED = 500;

/**
 * The authenticator with the revocation list checked on every request (SECURITY I4): a revoked
 * token is refused like an invalid one (401), and a token's first request here records it.
 */
export function revocable(authenticate: Authenticator, tokens: TokenRegistry): Authenticator {
  return async function authenticateUnrevoked(request) {
    const principal = await authenticate(request);
    const id = principal.tokenId;
    if (id === undefined) return principal;
    if (tokens.isRevoked(id)) {
      throw new ManifoldError('ERR_UNAUTHORIZED', 'invalid token', { data: { presented: true } });
    }
    tokens.note(principal);
    return principal;
  };
}

function tokenView(t: SeenToken): Record<string, unknown> {
  return {
    id: t.id,
    subject: t.subject,
    tenant: t.tenant,
    expiresAt: new Date(t.expiresAt).toISOString(),
    firstSeen: new Date(t.firstSeen).toISOString(),
    revoked: t.revokedAt !== undefined,
    ...(t.revokedAt !== undefined ? { revokedAt: new Date(t.revokedAt).toISOString() } : {}),
    ...(t.revokedBy !== undefined ? { revokedBy: t.revokedBy } : {}),
  };
}

export function mountTokens(app: Hono, ctx: AdminContext): void {
  const { gateway } = ctx;
  app.get('/admin/tokens', async (c) => {
    await ctx.admin(c);
    const limitText = c.req.query('limit');
    const limit = limitText === undefined ? 100 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LISTED) {
      return c.json({ error: `limit must be an integer from 1 to ${MAX_LISTED}` }, 400);
    }
    const tokens = await gateway.tokens.store.list(limit, gateway.platform.now());
    return c.json({ tokens: tokens.map(tokenView) });
  });
  app.post('/admin/tokens/:id/revoke', async (c) => {
    const principal = await ctx.admin(c);
    const id = c.req.param('id');
    if (!(await gateway.tokens.revoke(id, principal.subject))) {
      const known = (await gateway.tokens.store.list(MAX_LISTED, gateway.platform.now())).find(
        (t) => t.id === id,
      );
      return known
        ? c.json({ error: `token ${id} is revoked already` }, 409)
        : c.json({ error: `no unexpired token ${id} has been seen` }, 404);
    }
    ctx.audit(principal, 'token.revoke', { token: id });
    const token = (await gateway.tokens.store.list(MAX_LISTED, gateway.platform.now())).find(
      (t) => t.id === id,
    );
    return c.json(token ? tokenView(token) : { id, revoked: true });
  });
}
