/**
 * Where a request is served in the Workers layout (#15), decided in the isolate before dispatch:
 *
 * - here, in the isolate: a modern request whose target (if any) is a modern upstream, the meta
 *   tools, discovery, lists, /healthz, the status page, /metrics (per isolate);
 * - the upstream's object: a request aimed at a LEGACY upstream (its session lives there), and
 *   every MRTR retry (`requestState`/`inputResponses`: the object holds a bridged call, and claims
 *   approvals in its store), and `/admin/servers/<name>/*`;
 * - the tenant's object: whatever needs state across requests of one client: every legacy client
 *   request (initialize, `Mcp-Session-Id`, GET/DELETE), `subscriptions/listen`, `tasks/*`, a call
 *   made as a task, `logging/setLevel`, resource subscriptions, and requests to a server with
 *   `isolation` (its per-tenant or per-subject instances hold connections);
 * - except `tasks/*` for a call waiting in the approvals queue as a task (#52): its sealed
 *   arguments are in the store of the server's object, which made the task (`queuedTaskOwner`).
 *   The approvals themselves are in one queue every place shares (admin-state.ts), so a 2025
 *   client's queued call, served in its tenant's object with its session, is the operator's too.
 */
import type { Principal } from '../../src/auth/principal.js';
import type { Gateway } from '../../src/gateway/gateway.js';
import type { TaskRef } from '../../src/server/mcp/task-shape.js';

export type Route = { to: 'isolate' } | { to: 'upstream'; server: string } | { to: 'tenant' };

const HERE: Route = { to: 'isolate' };
/** Modern methods that keep state between requests: served by the tenant's object. */
const STATEFUL = /^(subscriptions\/listen|tasks\/|logging\/setLevel$|resources\/(un)?subscribe$)/;

export interface Message {
  method?: unknown;
  params?: Record<string, unknown>;
}

/** Whether a request belongs to a legacy client's session (or opens one). */
export function isLegacyClient(request: Request, message: Message | undefined): boolean {
  if (request.method === 'GET' || request.method === 'DELETE') return true;
  if (request.headers.get('mcp-session-id') !== null) return true;
  return message?.method === 'initialize';
}

/** The route of one parsed POST to /mcp from a modern client; `principal` as served at this path. */
export function routeMessage(gateway: Gateway, principal: Principal, message: Message): Route {
  const method = typeof message.method === 'string' ? message.method : '';
  const params = message.params ?? {};
  if (STATEFUL.test(method) || params.task !== undefined) return { to: 'tenant' };
  const server = targetServer(gateway, principal, method, params);
  if (server === undefined) return HERE;
  const upstream = gateway.pool.get(server);
  // A server with `isolation` has an instance per tenant or subject: its connection is state.
  if (upstream && upstream.config.isolation !== 'shared') return { to: 'tenant' };
  // #52: a call that may wait in the approvals queue is served in the server's object, which keeps
  // a task's sealed arguments for the polls `queuedTaskOwner` sends there.
  if (method === 'tools/call' && upstream && (upstream.config.approval.via ?? 'client') !== 'client') {
    return { to: 'upstream', server };
  }
  if (params.requestState !== undefined || params.inputResponses !== undefined)
    return { to: 'upstream', server };
  return upstream?.era === 'legacy' ? { to: 'upstream', server } : HERE;
}

/**
 * The server whose object holds the queued call a `tasks/*` request names (#52), when the task id
 * opens under the deployment's key, names a call waiting in the approvals queue (`q`), and is this
 * principal's; undefined otherwise (the tenant's object answers, "unknown task" included).
 */
export async function queuedTaskOwner(
  gateway: Gateway,
  principal: Principal,
  message: Message,
): Promise<string | undefined> {
  if (typeof message.method !== 'string' || !message.method.startsWith('tasks/')) return undefined;
  const taskId = message.params?.taskId;
  if (typeof taskId !== 'string') return undefined;
  const ref = (await (await gateway.taskIds).open(taskId)) as Partial<TaskRef> | undefined;
  if (ref?.v !== 1 || ref.q !== 1 || ref.p !== principal.key || typeof ref.s !== 'string') return undefined;
  return gateway.pool.get(ref.s) ? ref.s : undefined;
}

/** The server a request goes to; undefined for none, or when it does not resolve (answered here). */
function targetServer(
  gateway: Gateway,
  principal: Principal,
  method: string,
  params: Record<string, unknown>,
): string | undefined {
  try {
    switch (method) {
      case 'tools/call': {
        const entry = gateway.resolve(principal, params.name);
        if (entry.meta !== 'call_tool') return entry.meta ? undefined : entry.server;
        const args = params.arguments as { name?: unknown } | undefined;
        return gateway.resolve(principal, args?.name).server;
      }
      case 'prompts/get':
        return gateway.views.resolvePrompt(principal, params.name).server;
      case 'resources/read':
        return gateway.views.resolveResource(principal, params.uri).server;
      case 'completion/complete': {
        const ref = params.ref as { type?: unknown; name?: unknown; uri?: unknown } | undefined;
        if (ref?.type === 'ref/prompt') return gateway.views.resolvePrompt(principal, ref.name).server;
        if (ref?.type === 'ref/resource') return gateway.views.resolveTemplate(principal, ref.uri).server;
        return undefined;
      }
      default:
        return undefined;
    }
  } catch {
    return undefined;
  }
}

/**
 * A tools/call's body for its upstream object: the name the object's own catalog gives the tool
 * when it differs (a rewritten name can be salted differently in a one-server catalog).
 */
export function forObject(
  gateway: Gateway,
  principal: Principal,
  message: Message,
  names: Record<string, string>,
): Message | undefined {
  if (message.method !== 'tools/call') return undefined;
  try {
    const entry = gateway.resolve(principal, message.params?.name);
    const own = names[entry.original];
    if (entry.meta || own === undefined || own === entry.name) return undefined;
    return { ...message, params: { ...message.params, name: own } };
  } catch {
    return undefined;
  }
}
