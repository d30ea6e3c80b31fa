/**
 * The approvals queue over HTTP (#52): `GET /admin/approvals` (the queue, newest first, filtered by
 * status and tenant) and `POST /admin/approvals/{id}` with `{"decision": "approve" | "decline",
 * "reason"?: "..."}`. A decision is final: a second one, or one after the expiry, is 409. The
 * arguments are shown as the queue holds them: bounded, with every configured secret redacted.
 */
import type { Hono } from 'hono';
import type { ApprovalRecord } from '../../../store/approvals.js';
import { effectiveStatus } from '../../../store/approvals.js';
import { type AdminContext, readJson } from './context.js';

const STATUSES = ['pending', 'approved', 'declined', 'running', 'done', 'expired'] as const;
/** The most approvals one listing returns. */
export const MAX_APPROVALS_LISTED = 200;

/** One approval as the API and the console show it: never its result. */
export function approvalView(a: ApprovalRecord, now: number): Record<string, unknown> {
  return {
    id: a.id,
    status: effectiveStatus(a, now),
    tenant: a.tenant,
    subject: a.subject,
    server: a.server,
    tool: a.tool,
    risk: a.risk,
    arguments: a.shown,
    createdAt: new Date(a.createdAt).toISOString(),
    expiresAt: new Date(a.expiresAt).toISOString(),
    ...(a.decidedBy !== undefined ? { decidedBy: a.decidedBy } : {}),
    ...(a.decidedAt !== undefined ? { decidedAt: new Date(a.decidedAt).toISOString() } : {}),
    ...(a.reason !== undefined ? { reason: a.reason } : {}),
  };
}

export function mountApprovals(app: Hono, ctx: AdminContext): void {
  const { gateway } = ctx;
  app.get('/admin/approvals', async (c) => {
    await ctx.admin(c);
    const status = c.req.query('status');
    if (status !== undefined && !(STATUSES as readonly string[]).includes(status)) {
      return c.json({ error: `status must be one of ${STATUSES.join(', ')}` }, 400);
    }
    const limitText = c.req.query('limit');
    const limit = limitText === undefined ? 50 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_APPROVALS_LISTED) {
      return c.json({ error: `limit must be an integer from 1 to ${MAX_APPROVALS_LISTED}` }, 400);
    }
    const tenant = c.req.query('tenant');
    const listed = await gateway.approvals.list({
      limit,
      ...(status ? { status: status as (typeof STATUSES)[number] } : {}),
      ...(tenant !== undefined ? { tenant } : {}),
    });
    const now = gateway.platform.now();
    return c.json({ approvals: listed.map((a) => approvalView(a, now)) });
  });
  app.get('/admin/approvals/:id', async (c) => {
    await ctx.admin(c);
    const found = await gateway.approvals.get(c.req.param('id'));
    if (!found) return c.json({ error: `no approval ${c.req.param('id')}` }, 404);
    return c.json(approvalView(found, gateway.platform.now()));
  });
  app.post('/admin/approvals/:id', async (c) => {
    const principal = await ctx.admin(c);
    const body = await readJson(c, '{"decision": "approve"} or {"decision": "decline", "reason": "..."}');
    if (!body.ok) return body.reply;
    const { decision, reason } = body.value;
    if (
      (decision !== 'approve' && decision !== 'decline') ||
      (reason !== undefined && typeof reason !== 'string')
    ) {
      return c.json(
        { error: 'write {"decision": "approve"} or {"decision": "decline", "reason": "..."}' },
        400,
      );
    }
    const id = c.req.param('id');
    const result = await gateway.approvals.decide(id, decision, principal.subject, reason);
    const now = gateway.platform.now();
    if (!result.ok) {
      return c.json(
        { error: result.error, ...(result.approval ? { approval: approvalView(result.approval, now) } : {}) },
        result.status,
      );
    }
    ctx.audit(principal, `approval.${decision}`, {
      id,
      server: result.approval.server,
      tool: result.approval.tool,
    });
    return c.json(approvalView(result.approval, now));
  });
}
