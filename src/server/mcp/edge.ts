import type { Gateway } from '../../gateway/gateway.js';
import { type Era, TASKS_EXTENSION } from '../../protocol/versions.js';
import type { CacheHint } from './exchange.js';
import type { Forwarder } from './forward.js';
import type { ListenRegistry } from './listen.js';
import type { ResourceWatch } from './resource-watch.js';
import type { HeldCalls } from './rounds/mrtr.js';
import type { SessionTable } from './sessions.js';
import type { SharedSessions } from './shared-sessions.js';
import type { TaskPumps } from './task-pumps.js';
import type { Tracing } from './tracing.js';

/**
 * What the MCP endpoint's handlers share across requests: the gateway and the edge's own bounded
 * tables (legacy sessions, listen streams, held calls, task pumps). Built once by the HTTP app.
 */
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
 * them for that client (2025 clients: 2025 servers' tasks; 2026 clients: any server's, tasks.ts),
 * or where a server's calls may wait in the approvals queue (#52: such a call is a task for a
 * client that takes them, rounds/queued-task.ts).
 */
export function serverCapabilities(gateway: Gateway, era: Era): Record<string, unknown> {
  const upstreams = gateway.pool.all().filter((u) => u.state === 'ready' && u.runsTasks);
  const queues = gateway.pool.all().some((u) => (u.config.approval.via ?? 'client') !== 'client');
  if (era === 'legacy') {
    return queues || upstreams.some((u) => u.era === 'legacy')
      ? { ...SERVER_CAPABILITIES, tasks: { cancel: {}, requests: { tools: { call: {} } } } }
      : SERVER_CAPABILITIES;
  }
  return queues || upstreams.length > 0
    ? { ...SERVER_CAPABILITIES, extensions: { [TASKS_EXTENSION]: {} } }
    : SERVER_CAPABILITIES;
}
