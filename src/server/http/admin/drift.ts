/**
 * Re-trust over HTTP (#15): the one baseline rewrite (SECURITY C3) for a deployment without a
 * shell beside its store, Workers above all, where a quarantined tool could otherwise never be
 * accepted. It is `manifold retrust` as two requests, on the connection the gateway already has:
 *
 * - `GET /admin/servers/<name>/drift[?tool=NAME]`: what the server lists now against its baseline,
 *   the same diff lines the CLI prints, and a `digest` of what was shown and of the exact
 *   baseline accepting it would write;
 * - `POST /admin/servers/<name>/retrust` with `{"digest": "...", "tool"?: "..."}`: rewrites the
 *   baseline only if what would be accepted is still what that digest was taken over (409
 *   otherwise), so an operator never accepts a change they were not shown, even one made between
 *   the review and the accept.
 *
 * - `GET /admin/servers/<name>/drift/history[?tool=NAME]`: the server's (or one tool's) drift
 *   history, the newest first: each time drift held a tool back, and each accepted change with who
 *   accepted it (src/store/drift-history.ts), the same on every instance sharing the store.
 *
 * Only a principal with `manifold:admin` may use them (context.ts); every accept is an audit line
 * naming who made it, and an event in the history.
 */
import type { Hono } from 'hono';
import type { Gateway } from '../../../gateway/gateway.js';
import {
  acceptedItems,
  identityLine,
  planRetrust,
  reviewDigest,
} from '../../../guards/drift/retrust-plan.js';
import type { Baseline } from '../../../guards/drift/verdict.js';
import { type ServerIdentity, sameIdentity } from '../../../store/state.js';
import { type AdminContext, readJson } from './context.js';

interface Review {
  server: string;
  tool?: string;
  identityChanged: boolean;
  changes: number;
  lines: string[];
  digest: string;
}

export function mountDrift(app: Hono, ctx: AdminContext): void {
  const { gateway } = ctx;
  app.get('/admin/servers/:server/drift', async (c) => {
    await ctx.admin(c);
    const result = await review(gateway, c.req.param('server'), c.req.query('tool'));
    return 'status' in result ? c.json({ error: result.error }, result.status) : c.json(result.review);
  });
  app.post('/admin/servers/:server/retrust', async (c) => {
    const principal = await ctx.admin(c);
    const body = await readJson(c, '{"digest": "<from GET .../drift>"}');
    if (!body.ok) return body.reply;
    const { digest, tool } = body.value;
    if (typeof digest !== 'string' || (tool !== undefined && typeof tool !== 'string')) {
      return c.json({ error: 'write {"digest": "<from GET .../drift>", "tool": "<optional name>"}' }, 400);
    }
    const server = c.req.param('server');
    const result = await review(gateway, server, tool);
    if ('status' in result) return c.json({ error: result.error }, result.status);
    if (result.review.digest !== digest) {
      return c.json(
        { error: 'what the server lists changed since that review: review it again', review: result.review },
        409,
      );
    }
    const now = gateway.platform.now();
    await gateway.store.retrust(result.identity, result.next, now);
    for (const item of acceptedItems(result.old, result.next)) {
      await gateway.store.recordDrift({
        server,
        ...item,
        kind: 'accepted',
        digest,
        by: principal.subject,
        at: now,
      });
    }
    gateway.log.warn('drift.retrusted', {
      server,
      ...(tool ? { tool } : {}),
      changes: result.review.changes,
      via: 'admin-endpoint',
    });
    ctx.audit(principal, 'drift.accept', {
      server,
      ...(tool ? { tool } : {}),
      changes: result.review.changes,
    });
    // This instance re-verifies now; others on the same store see the epoch at their next poll.
    await gateway.pollTrust();
    return c.json({ retrusted: server, ...(tool ? { tool } : {}), changes: result.review.changes });
  });
  app.get('/admin/servers/:server/drift/history', async (c) => {
    await ctx.admin(c);
    const server = c.req.param('server');
    const upstream = gateway.pool.get(server);
    if (!upstream || upstream.config.disabled) return c.json({ error: `no server named ${server}` }, 404);
    const tool = c.req.query('tool');
    const limit = Number(c.req.query('limit') ?? HISTORY_LIMIT);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_HISTORY) {
      return c.json({ error: `limit is a whole number from 1 to ${MAX_HISTORY}` }, 400);
    }
    const events = await gateway.store.driftHistory(server, tool, limit);
    return c.json({
      server,
      ...(tool !== undefined ? { tool } : {}),
      history: events.map((e) => ({
        tool: e.tool,
        kind: e.kind,
        fingerprint: e.fingerprint,
        ...(e.digest !== undefined ? { digest: e.digest } : {}),
        ...(e.by !== undefined ? { by: e.by } : {}),
        at: new Date(e.at).toISOString(),
      })),
    });
  });
}

const HISTORY_LIMIT = 50;
const MAX_HISTORY = 500;

type Reviewed =
  | { review: Review; identity: ServerIdentity; next: Baseline; old: Baseline }
  | { status: 404 | 503; error: string };

/** What accepting would change, or why it cannot be reviewed now. */
async function review(gateway: Gateway, name: string, tool: string | undefined): Promise<Reviewed> {
  const upstream = gateway.pool.get(name);
  // Unknown and disabled read alike: there is nothing of it to accept.
  if (!upstream || upstream.config.disabled) return { status: 404, error: `no server named ${name}` };
  if (upstream.state !== 'ready') {
    return {
      status: 503,
      error: `server ${name} is not connected now (${upstream.state}): try again once it is`,
    };
  }
  const current = upstream.driftRecords();
  const identity = gateway.drift.identity(upstream.config);
  const row = await gateway.store.get(name);
  const identityChanged = row !== undefined && !sameIdentity(row.identity, identity);
  const plan = await planRetrust(row?.baseline ?? {}, current, tool);
  if ('refused' in plan) return { status: 404, error: `server ${name} ${plan.refused}` };
  const lines = identityChanged ? [identityLine(name, row!.identity, identity), ...plan.lines] : plan.lines;
  const shown = { server: name, ...(tool ? { tool } : {}), identityChanged, changes: plan.changes, lines };
  const digest = await reviewDigest(shown, { identity, baseline: plan.next });
  return { review: { ...shown, digest }, identity, next: plan.next, old: row?.baseline ?? {} };
}
