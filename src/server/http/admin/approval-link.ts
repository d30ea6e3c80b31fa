/**
 * The signed link of a queued approval (#52), sent to the server's `approval.notify` webhook for a
 * chat tool: `GET /approvals/link?t=...` shows the call (server, tool, who, the arguments as the
 * queue holds them) with Approve and Decline buttons; the buttons POST the same token back. The
 * token is sealed by the gateway (HMAC, its own label), names one approval and expires with it:
 * holding the link is the authority to decide that one call, and nothing else.
 *
 * Opening the link decides nothing: chat tools fetch links to preview them, so only the POST of a
 * button does. No script at all; every value is escaped as text (hono/html); the page can post only
 * to itself.
 */
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { html } from 'hono/html';
import type { Gateway } from '../../../gateway/gateway.js';
import { effectiveStatus } from '../../../store/approvals.js';
import { readBodyCapped } from '../guards.js';

const CSP = [
  "default-src 'none'",
  "style-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const HEADERS: Record<string, string> = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

const MAX_FORM_BYTES = 8 * 1024;

export function mountApprovalLink(app: Hono, gateway: Gateway, guard: MiddlewareHandler): void {
  app.use('/approvals/link', guard);
  const page = (c: Context, status: 200 | 400 | 404 | 409, body: ReturnType<typeof html>) =>
    c.html(
      html`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Manifold approval</title></head><body>${body}</body></html>`,
      status,
      HEADERS,
    );
  const invalid = (c: Context) =>
    page(c, 404, html`<h1>This link is not valid</h1><p>It was altered, or its approval expired.</p>`);

  app.get('/approvals/link', async (c) => {
    const token = c.req.query('t');
    const id = await gateway.approvals.openLink(token);
    const approval = id === undefined ? undefined : await gateway.approvals.get(id);
    if (!approval || token === undefined) return invalid(c);
    const status = effectiveStatus(approval, gateway.platform.now());
    const decided =
      status === 'pending'
        ? html`<form method="post" action="/approvals/link"><input type="hidden" name="t" value="${token}"><button type="submit" name="decision" value="approve">Approve</button> <button type="submit" name="decision" value="decline">Decline</button></form>`
        : html`<p>This request is ${status}${approval.decidedBy ? html` (decided by ${approval.decidedBy})` : ''}.</p>`;
    return page(
      c,
      200,
      html`<h1>Approve a tool call?</h1>
<dl><dt>Tool</dt><dd>${approval.tool}</dd><dt>Server</dt><dd>${approval.server}</dd><dt>Risk</dt><dd>${approval.risk}</dd>
<dt>Asked by</dt><dd>${approval.subject} (tenant ${approval.tenant})</dd><dt>Expires</dt><dd>${new Date(approval.expiresAt).toISOString()}</dd></dl>
<h2>Arguments</h2><pre>${approval.shown}</pre>${decided}`,
    );
  });

  app.post('/approvals/link', async (c) => {
    let form: URLSearchParams;
    try {
      form = new URLSearchParams(await readBodyCapped(c.req.raw, MAX_FORM_BYTES));
    } catch {
      return page(c, 400, html`<h1>The form could not be read</h1>`);
    }
    const decision = form.get('decision');
    const id = await gateway.approvals.openLink(form.get('t'));
    if (id === undefined) return invalid(c);
    if (decision !== 'approve' && decision !== 'decline') {
      return page(c, 400, html`<h1>Choose Approve or Decline</h1>`);
    }
    // Whoever holds the link decides: the audit line says it came through the link.
    const result = await gateway.approvals.decide(id, decision, 'signed-link');
    if (!result.ok) return page(c, result.status, html`<h1>Not decided</h1><p>${result.error}</p>`);
    return page(
      c,
      200,
      html`<h1>${decision === 'approve' ? 'Approved' : 'Declined'}</h1><p>The call of ${result.approval.tool} was ${result.approval.status}.</p>`,
    );
  });
}
