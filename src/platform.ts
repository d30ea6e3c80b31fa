import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Tracer } from '@opentelemetry/api';
import type { Logger } from './lib/log.js';

/**
 * Lets `timer` not hold the process, where the host's timers can (Node's `unref`): true if it
 * could. A Workers timer is a number and stays as it is.
 */
export function unrefTimer(timer: unknown): boolean {
  const unref = (timer as { unref?: () => void } | undefined)?.unref;
  if (typeof unref !== 'function') return false;
  unref.call(timer);
  return true;
}

/** What a stdio upstream needs to start. Only Node can honour it. */
export interface StdioSpec {
  server: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
}

/**
 * Starts a child process and returns an MCP transport over its stdin/stdout. `onExit` fires once
 * when the child is gone, whatever the reason, so the upstream can schedule a restart.
 */
export type StdioConnector = (spec: StdioSpec, log: Logger) => Transport;

/**
 * The one seam for runtime differences. The core asks its runtime for these and nothing more;
 * nothing under src/ imports node:* or cloudflare:*.
 */
export interface Platform {
  /** Egress fetch for upstream HTTP and JWKS. On Node it is guarded at connect time. */
  fetch: typeof fetch;
  /** Absent on Workers: a stdio server then gets an `unsupported-transport` diagnostic. */
  connectStdio?: StdioConnector;
  /** The runtime's name, for diagnostics only (never for branching inside src/). */
  runtime: 'node' | 'workers' | 'test';
  now(): number;
  log: Logger;
  /** At most this many upstreams connect at once (Workers: 6 subrequests). Absent: all at once. */
  maxConcurrentConnects?: number;
  /** Spans for requests and upstream calls (docs/tracing.md). Absent: tracing is off, and costs nothing. */
  tracer?: Tracer;
  /**
   * Reads a secret again (#19: a `static` server's `${VAR}` after a 401). Node: the variable, or the
   * file named by `NAME_FILE` read afresh each time; Workers: the binding. Absent: not re-readable.
   */
  readSecret?(name: string): string | undefined;
}
