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

/**
 * The sandbox a stdio child runs in (#53; config/sandbox.ts reads it, deploy/node/runtime/sandbox.ts
 * builds it). Declared here, at the seam, because the host is what must honour it.
 */
export interface SandboxSpec {
  /** `false`: no network at all. `egress`: only `allowHosts`, through the gateway's proxy. */
  network: false | 'egress';
  /** Host names (optionally `:port`) an `egress` server may reach; empty otherwise. */
  allowHosts: string[];
  filesystem: {
    /** Extra paths visible read-only (the server's own package and runtime are added by the host). */
    read: string[];
    /** Paths visible writable. Absent: the private data directory `dataDir`. */
    write?: string[];
  };
  limits: SandboxLimits;
  /**
   * The private data directory (writable, the server's HOME) when `write` is not given: filled by
   * the loader from `gateway.serverDataDir` and the server's name, and per instance when isolated.
   */
  dataDir?: string;
}

export interface SandboxLimits {
  /** Address space, in MiB (RLIMIT_AS). Node reserves about 1 GiB before it runs any code. */
  memoryMb: number;
  /** CPU time, in seconds (RLIMIT_CPU); 0: none. The server is stopped past it, and restarted when needed. */
  cpuSeconds: number;
  /** Processes and threads (RLIMIT_NPROC, counted in the sandbox's own user namespace). */
  processes: number;
  /** Open file descriptors (RLIMIT_NOFILE). */
  openFiles: number;
}

/** What a stdio upstream needs to start. Only Node can honour it. */
export interface StdioSpec {
  server: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  /** Run it contained (#53): the host refuses to start it when it cannot build this sandbox. */
  sandbox?: SandboxSpec;
}

/**
 * Starts a child process and returns an MCP transport over its stdin/stdout. `onExit` fires once
 * when the child is gone, whatever the reason, so the upstream can schedule a restart.
 */
export type StdioConnector = (spec: StdioSpec, log: Logger) => Transport;

/** One JSON-RPC request of the direct caller (src/upstream/wire/direct-call.ts), as one POST. */
export interface JsonPost {
  url: string | URL;
  headers: Record<string, string>;
  /** The JSON-RPC message, serialized. */
  body: string;
  /** Aborts the request at any stage: the call's deadline passed, or its client cancelled. */
  signal: AbortSignal;
}

/** What the direct caller reads of an answer. A web `Response` is one. */
export interface JsonAnswer {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  /** The whole body as UTF-8 text, a leading BOM dropped (as `Response.text`); refused past the body cap. */
  text(): Promise<string>;
  /** The body as it arrives (how an event stream is read), each event capped; null for a null-body status. */
  readonly body: ReadableStream<Uint8Array> | null;
}

/** Sends one `JsonPost` through the egress guard: the URL checked, redirects followed by hand. */
export type PostJson = (request: JsonPost) => Promise<JsonAnswer>;

/**
 * The one seam for runtime differences. The core asks its runtime for these and nothing more;
 * nothing under src/ imports node:* or cloudflare:*.
 */
export interface Platform {
  /**
   * The egress fetch: the SDK transports, JWKS and OAuth requests. A real fetch, egress-guarded
   * (upstream/wire/egress-fetch.ts); on Node each connection's address is also checked (D3).
   */
  fetch: typeof fetch;
  /**
   * The direct caller's POSTs, guarded as `fetch` is. Node's fetch builds a web Request, Headers and
   * body stream around every request, more CPU than the rest of a relayed call; this is the same
   * exchange without them. Absent (Workers, where fetch is the runtime's own): POSTed with `fetch`.
   */
  postJson?: PostJson;
  /** Absent on Workers: a stdio server then gets an `unsupported-transport` diagnostic. */
  connectStdio?: StdioConnector;
  /**
   * The runtime's EventTarget also calls a target's `onmessage` on dispatch, so an HTTP+SSE
   * upstream's events arrive twice unless deduplicated (workerd; legacy/transports.ts).
   */
  sseEventsTwice?: boolean;
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
  /**
   * Code mode's engine (#50), compiled by the host: Workers import the .wasm as a module and
   * cannot compile bytes at run time. Absent: the engine's package loads its own file (Node).
   */
  codeEngine?: () => Promise<WebAssembly.Module>;
}
