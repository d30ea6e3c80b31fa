import { describeError, ManifoldError } from '../../errors.js';
import type { Gateway } from '../../gateway/gateway.js';
import type { MessageBody } from '../../guards/split-result.js';
import { errorMessage, type JsonRpcId } from '../../protocol/jsonrpc.js';
import { type Era, TASKS_EXTENSION } from '../../protocol/versions.js';
import { toRpcError } from './errors.js';
import type { CacheHint, Exchange } from './exchange.js';
import type { Forwarder } from './forward.js';
import { JSON_HEADERS, PlainReply, type Reply } from './http-in.js';
import type { ListenRegistry } from './listen.js';
import { completionComplete, promptsGet, resourcesRead } from './relay/requests.js';
import { toolsCall } from './relay/tools-call.js';
import type { ResourceWatch } from './resource-watch.js';
import type { HeldCalls } from './rounds/mrtr.js';
import type { SessionTable } from './sessions.js';
import type { SharedSessions } from './shared-sessions.js';
import type { TaskPumps } from './task-pumps.js';
import { runsTasks, taskMethod } from './tasks.js';
import type { Tracing } from './tracing.js';

/**
 * What the gateway relays, whatever the client: the server features are aggregated from every
 * upstream that offers them (a list may be empty). Client features are negotiated per client.
 */
export const SERVER_CAPABILITIES = {
  tools: { listChanged: true },
  prompts: { listChanged: true },
  resources: { listChanged: true, subscribe: true },
  completions: {},
  logging: {},
} as const;

/**
 * The capabilities for a client of `era`: the server features, plus tasks where an upstream runs
 * them for that client (2025 clients: 2025 servers' tasks; 2026 clients: any server's, tasks.ts).
 */
export function serverCapabilities(gateway: Gateway, era: Era): Record<string, unknown> {
  const upstreams = gateway.pool.all().filter((u) => u.state === 'ready' && runsTasks(u));
  if (era === 'legacy') {
    return upstreams.some((u) => u.era === 'legacy')
      ? { ...SERVER_CAPABILITIES, tasks: { cancel: {}, requests: { tools: { call: {} } } } }
      : SERVER_CAPABILITIES;
  }
  return upstreams.length > 0
    ? { ...SERVER_CAPABILITIES, extensions: { [TASKS_EXTENSION]: {} } }
    : SERVER_CAPABILITIES;
}

/** What the era handlers share: the gateway, the edge's own tables, and one way to answer. */
export interface Edge {
  gateway: Gateway;
  sessions: SessionTable;
  /** Legacy sessions any instance can serve (#15): present only over a shared session store. */
  shared?: SharedSessions;
  listeners: ListenRegistry;
  /** How long a client may treat a list as fresh, and whether shared caches may keep it. */
  listCache: CacheHint;
  /** The gateway's identity in modern results. */
  serverInfo: { name: string; version: string };
  /** Who watches which resource. */
  watch: ResourceWatch;
  /** Calls held open while a modern client gathers input (MRTR). */
  held: HeldCalls;
  /** This process's id: the held states it seals name it (forward.ts). */
  instance: string;
  /** Reaches the other instances of the deployment, to forward a held call's retry (#15). */
  forwarder?: Forwarder;
  /** 2025 servers' tasks waiting for a 2026 client's input (tasks.ts). */
  taskPumps: TaskPumps;
  /** Present only when the platform gave a tracer: decided once, when the edge is built. */
  tracing?: Tracing;
}

/** A JSON answer; a big one leaves in pieces (http-in.ts `pieces`), whatever the runtime. */
export function json(body: MessageBody, status = 200, extra?: Record<string, string>): PlainReply {
  return new PlainReply(status, body, extra ? { ...JSON_HEADERS, ...extra } : JSON_HEADERS);
}

/** A JSON-RPC error body for `e`, logged when it is the gateway's own bug. */
export function failBody(
  edge: Edge,
  id: JsonRpcId | null,
  e: unknown,
  era: Era,
): { status: number; body: string } {
  const err = toRpcError(e, era);
  if (err.data.manifold === 'ERR_INTERNAL') {
    edge.gateway.log.error('request.internal_error', { error: describeError(e) });
  }
  // Error text can carry an upstream's words, which may echo a configured secret (#13.4).
  return { status: err.status, body: edge.gateway.redact(errorMessage(id, err.code, err.message, err.data)) };
}

/** An error as the whole HTTP answer: its own status (4xx for transport-level problems). */
export function failResponse(edge: Edge, id: JsonRpcId | null, e: unknown, era: Era): PlainReply {
  const { status, body } = failBody(edge, id, e, era);
  return json(body, status);
}

/**
 * The methods both eras serve the same way. Era-only methods are handled before this. With tracing
 * on, each gets its span here: ended when its answer is ready, or, for a relayed request, when
 * its upstream call settles (through.ts).
 */
export function dispatchCommon(edge: Edge, ex: Exchange): Promise<Reply> {
  if (!edge.tracing) return serveCommon(edge, ex);
  const t = edge.tracing.begin(ex);
  ex.trace = t;
  let served: Promise<Reply>;
  try {
    served = serveCommon(edge, ex);
  } catch (e) {
    served = Promise.reject(e);
  }
  return served.then(
    (reply) => {
      if (!t.held) t.finish();
      return reply;
    },
    (e: unknown) => {
      t.fail(e);
      t.finish();
      throw e;
    },
  );
}

function serveCommon(edge: Edge, ex: Exchange): Promise<Reply> {
  // The relayed methods return their own promise: no async wrapper of this one around it (#18).
  switch (ex.request.method) {
    case 'tools/call':
      return toolsCall(edge, ex);
    case 'prompts/get':
      return promptsGet(edge, ex);
    case 'resources/read':
      return resourcesRead(edge, ex);
    case 'completion/complete':
      return completionComplete(edge, ex);
    default:
      return serveListsAndTasks(edge, ex);
  }
}

async function serveListsAndTasks(edge: Edge, ex: Exchange): Promise<Reply> {
  const { principal, request } = ex;
  const { gateway } = edge;
  switch (request.method) {
    case 'tools/list': {
      const page = await gateway.pages.listToolsJson(principal, request.params?.cursor);
      return json(
        `{"jsonrpc":"2.0","id":${JSON.stringify(request.id)},"result":${ex.resultJson(page, edge.listCache)}}`,
      );
    }
    case 'prompts/list':
    case 'resources/list':
    case 'resources/templates/list': {
      const kind =
        request.method === 'prompts/list'
          ? 'prompts'
          : request.method === 'resources/list'
            ? 'resources'
            : 'templates';
      const page = await gateway.pages.listSurfaceJson(kind, principal, request.params?.cursor);
      return json(
        `{"jsonrpc":"2.0","id":${JSON.stringify(request.id)},"result":${ex.resultJson(page, edge.listCache)}}`,
      );
    }
    case 'tasks/get':
    case 'tasks/update':
    case 'tasks/cancel':
    case 'tasks/result':
    case 'tasks/list':
      return taskMethod(edge, ex);
    default:
      throw new ManifoldError('ERR_METHOD_NOT_FOUND', `Method not found: ${request.method.slice(0, 64)}`);
  }
}
