/**
 * The admin API (#52), mounted under `/admin` behind the Origin/Host guard of `/healthz`, one file
 * per resource: servers (servers.ts), drift review and accept (drift.ts), the approvals queue (approvals.ts), tokens and their revocation (tokens.ts), the audit query (audit.ts), and the
 * OpenAPI document that describes them all (openapi.ts). Who may use it: context.ts. Beside it,
 * the signed link of a queued approval (approval-link.ts), which needs no token: the link is one.
 */
import type { Hono, MiddlewareHandler } from 'hono';
import type { Authenticator } from '../../../auth/principal.js';
import type { Gateway } from '../../../gateway/gateway.js';
import { mountApprovalLink } from './approval-link.js';
import { mountApprovals } from './approvals.js';
import { mountAudit } from './audit.js';
import { adminContext } from './context.js';
import { mountDrift } from './drift.js';
import { mountOpenApi } from './openapi.js';
import { mountServers } from './servers.js';
import { mountTokens } from './tokens.js';

export interface AdminRoutes {
  authenticate: Authenticator;
  guard: MiddlewareHandler;
}

export function mountAdmin(app: Hono, gateway: Gateway, routes: AdminRoutes): void {
  app.use('/admin/*', routes.guard);
  const ctx = adminContext(gateway, routes.authenticate);
  mountOpenApi(app, ctx);
  mountDrift(app, ctx);
  mountServers(app, ctx);
  mountApprovals(app, ctx);
  mountTokens(app, ctx);
  mountAudit(app, ctx);
  mountApprovalLink(app, gateway, routes.guard);
}
