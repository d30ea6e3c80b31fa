/**
 * The approvals queue on Workers (#52): each server's queue lives in its own object's store, where
 * its queued calls are served (route.ts), so one decision and one run are that object's answer.
 * The admin routes and the signed link are sent to the object that holds the approval (its id
 * starts with the server's name); the listing asks every object whose server queues, and merges.
 */
import type { Principal } from '../../src/auth/principal.js';
import type { Gateway } from '../../src/gateway/gateway.js';
import { readBodyCapped } from '../../src/server/http/guards.js';

const ONE = /^\/admin\/approvals\/([A-Za-z0-9_-]+)\.[^/]+$/;
const MAX_FORM_BYTES = 8 * 1024;

export interface ApprovalsRouting {
  gateway: Gateway;
  authenticate(request: Request): Promise<Principal>;
  toUpstream(server: string, request: Request): Promise<Response>;
}

/** The servers whose calls may wait in a queue. */
function queued(gateway: Gateway): string[] {
  return gateway.config.servers.filter((s) => (s.approval.via ?? 'client') !== 'client').map((s) => s.name);
}

/** The answer from the owning objects, or undefined for the isolate's own app (which refuses alike). */
export async function toApprovalsOwner(
  r: ApprovalsRouting,
  request: Request,
  path: string,
): Promise<Response | undefined> {
  if (path === '/approvals/link') return toLinkOwner(r, request);
  if (path !== '/admin/approvals' && !path.startsWith('/admin/approvals/')) return undefined;
  const principal = await r.authenticate(request).catch(() => undefined);
  if (!principal?.admin) return undefined;
  const one = ONE.exec(path);
  if (one) return r.gateway.pool.get(one[1]!) ? r.toUpstream(one[1]!, request) : undefined;
  if (path !== '/admin/approvals' || request.method !== 'GET') return undefined;
  const answers = await Promise.all(queued(r.gateway).map((s) => r.toUpstream(s, new Request(request))));
  const failed = answers.find((a) => a.status !== 200);
  if (failed) return failed;
  const all = (
    await Promise.all(answers.map((a) => a.json() as Promise<{ approvals: { createdAt: string }[] }>))
  )
    .flatMap((a) => a.approvals)
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));
  const limit = Number(new URL(request.url).searchParams.get('limit') ?? 50);
  return Response.json({ approvals: all.slice(0, limit) });
}

/** The signed link's page and its buttons, in the object of the approval the link names. */
async function toLinkOwner(r: ApprovalsRouting, request: Request): Promise<Response | undefined> {
  let token: string | null;
  let body: string | undefined;
  if (request.method === 'GET') token = new URL(request.url).searchParams.get('t');
  else {
    body = await readBodyCapped(request, MAX_FORM_BYTES).catch(() => '');
    token = new URLSearchParams(body).get('t');
  }
  const id = await r.gateway.approvals.openLink(token);
  const server = id?.split('.')[0];
  if (!server || !r.gateway.pool.get(server)) return undefined;
  return r.toUpstream(server, new Request(request, body === undefined ? {} : { body }));
}
