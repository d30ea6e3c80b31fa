/**
 * The audit query over HTTP (#52): `GET /admin/audit` with `tenant`, `server`, `tool`, `verdict`
 * and `limit`: this instance's recent audited requests, newest first (observe/audit-window.ts).
 */
import type { Hono } from 'hono';
import type { Gateway } from '../../../gateway/gateway.js';
import { type AuditEntry, AuditWindow } from '../../../observe/audit-window.js';
import type { AdminContext } from './context.js';

/** How many audited requests each instance keeps for the query. */
export const AUDIT_WINDOW = 1000;

/** One window per gateway, however many times its HTTP edge is built. */
const windows = new WeakMap<Gateway, AuditWindow>();

function windowOf(gateway: Gateway): AuditWindow {
  let w = windows.get(gateway);
  if (!w) {
    w = new AuditWindow(AUDIT_WINDOW, () => gateway.platform.now());
    windows.set(gateway, w);
    gateway.observers.add(w.observe);
  }
  return w;
}

/** One audited request as the query answers it (here, and on Workers from the shared window). */
export function auditCall(e: AuditEntry): Record<string, unknown> {
  return {
    at: new Date(e.at).toISOString(),
    method: e.method,
    tenant: e.tenant,
    subject: e.subject,
    server: e.server,
    tool: e.target,
    verdict: e.verdict,
    durationMs: e.durationMs,
    bytesIn: e.bytesIn,
    bytesOut: e.bytesOut,
    ...(e.reason ? { reason: e.reason } : {}),
  };
}

export function mountAudit(app: Hono, ctx: AdminContext): void {
  // Off with the status page: a gateway with neither status page nor metrics keeps no per-call
  // observer at all, so that nothing is recorded per call that nobody reads.
  const window = ctx.gateway.config.gateway.statusPath === false ? undefined : windowOf(ctx.gateway);
  app.get('/admin/audit', async (c) => {
    await ctx.admin(c);
    if (!window) {
      return c.json(
        { error: 'the audit query is off with the status page (gateway.statusPath is false)' },
        404,
      );
    }
    const limitText = c.req.query('limit');
    const limit = limitText === undefined ? 100 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_WINDOW) {
      return c.json({ error: `limit must be an integer from 1 to ${AUDIT_WINDOW}` }, 400);
    }
    const pick = (name: string) => {
      const v = c.req.query(name);
      return v === undefined ? {} : { [name]: v };
    };
    const entries = window.query({
      limit,
      ...pick('tenant'),
      ...pick('server'),
      ...pick('tool'),
      ...pick('verdict'),
    });
    return c.json({ calls: entries.map(auditCall) });
  });
}
