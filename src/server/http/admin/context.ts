/**
 * What every admin route shares (#52): who may use the API, how a change is audited, and how a
 * JSON body is read. The API answers only a principal holding `manifold:admin`, and only where
 * that means something: with `gateway.auth` on, or on a loopback bind without auth (where the
 * anonymous principal is the operator at the machine). A gateway bound to another address without
 * auth has no admin API: anyone who reaches it would be an admin.
 */
import type { Context } from 'hono';
import type { Authenticator, Principal } from '../../../auth/principal.js';
import { isLoopbackHost } from '../../../config/bind.js';
import { ManifoldError } from '../../../errors.js';
import type { Gateway } from '../../../gateway/gateway.js';
import { isObject } from '../../../lib/json.js';
import { readBodyCapped } from '../guards.js';

/** An admin request's body, at most this large (a server's config is the largest). */
export const MAX_ADMIN_BODY = 256 * 1024;

export interface AdminContext {
  gateway: Gateway;
  /** The request's principal when it may use the admin API; throws 401 or 403 otherwise. */
  admin(c: Context): Promise<Principal>;
  /** The audit line of one change, naming who made it (SECURITY I4). */
  audit(by: Principal, action: string, fields: Record<string, unknown>): void;
}

export function adminContext(gateway: Gateway, authenticate: Authenticator): AdminContext {
  return {
    gateway,
    async admin(c) {
      const g = gateway.config.gateway;
      if (!g.auth && !isLoopbackHost(g.host)) {
        throw new ManifoldError(
          'ERR_FORBIDDEN',
          'the admin API needs gateway.auth (a manifold:admin token), or a loopback bind',
        );
      }
      const principal = await authenticate(c.req.raw);
      if (!principal.admin) {
        throw new ManifoldError('ERR_FORBIDDEN', 'the admin API needs a token with the manifold:admin scope');
      }
      return principal;
    },
    audit(by, action, fields) {
      gateway.log.info('audit.admin', {
        action,
        by: by.subject,
        tenant: by.tenant,
        at: new Date(gateway.platform.now()).toISOString(),
        ...fields,
      });
    },
  };
}

/** A JSON object body, or the 400 that says what to send instead. */
export async function readJson(
  c: Context,
  example: string,
): Promise<{ ok: true; value: Record<string, unknown> } | { ok: false; reply: Response }> {
  let value: unknown;
  try {
    value = JSON.parse(await readBodyCapped(c.req.raw, MAX_ADMIN_BODY));
  } catch (e) {
    if (e instanceof ManifoldError && e.code === 'ERR_BODY_TOO_LARGE') throw e;
    return { ok: false, reply: c.json({ error: `the body must be JSON: ${example}` }, 400) };
  }
  if (!isObject(value))
    return { ok: false, reply: c.json({ error: `the body must be a JSON object: ${example}` }, 400) };
  return { ok: true, value };
}
