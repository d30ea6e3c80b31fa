import type { LogLevel } from '../log.js';

export type TransportKind = 'stdio' | 'streamable-http' | 'sse';

/** One upstream, after validation, interpolation and defaults. */
export interface ServerConfig {
  /** The key under `mcpServers`: 1-32 of [A-Za-z0-9_-], no `__`, not `manifold`. */
  name: string;
  type: TransportKind;
  /** stdio only. */
  command?: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  /** streamable-http and sse only. */
  url?: string;
  headers: Record<string, string>;
  /** The name prefix; defaults to `name`. `false` mounts tools unprefixed. */
  prefix: string | false;
  /** Globs over the upstream's own tool names. Deny wins. `allow` absent means all. */
  tools: { allow?: string[]; deny: string[] };
  /** Idle deadline for one tools/call; defaults to gateway.callTimeoutMs. */
  timeoutMs: number;
  disabled: boolean;
}

export interface GatewayConfig {
  host: string;
  port: number;
  logLevel: LogLevel;
  /** Extra browser origins allowed to call /mcp. Loopback origins are always allowed. */
  allowedOrigins: string[];
  /** Host header values accepted besides loopback names. Empty and bound to loopback: loopback only. */
  hostnames: string[];
  maxBodyBytes: number;
  maxSessions: number;
  sessionIdleSeconds: number;
  callTimeoutMs: number;
  maxCallTimeoutMs: number;
  connectTimeoutMs: number;
  listTimeoutMs: number;
  maxListPages: number;
  pageSize: number;
  shutdownGraceMs: number;
}

export interface Config {
  gateway: GatewayConfig;
  /** In config-file order; the merged catalog follows this order. */
  servers: ServerConfig[];
}

/** One problem found in a config file. `path` is a JSON path such as `mcpServers.github.url`. */
export interface ConfigIssue {
  path: string;
  message: string;
  /** What to change, in one sentence. */
  fix?: string;
}

export type ConfigResult =
  | { ok: true; config: Config; warnings: ConfigIssue[]; secrets: string[] }
  | { ok: false; errors: ConfigIssue[]; warnings: ConfigIssue[] };
