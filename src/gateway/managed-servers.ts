/**
 * Servers managed through the admin API (#52): kept in the store, merged over the config file's,
 * and applied through the same reload path as a change of the file (reload.ts), on every instance
 * that shares the store: each polls the store's `servers_epoch` and, when it moved, reads the list
 * and reloads. An entry is read exactly as the file's would be (the same messages, paths and
 * fixes), with the running gateway's settings for its defaults.
 *
 * The file stays the operator's: with `gateway.admin.fileServers` "locked" (the default) a file
 * server cannot be changed, overridden or removed through the API; "editable" lets a stored entry
 * of the same name replace it. Header values must be `${VAR}` references: the store never holds a
 * literal secret.
 */
import { parseConfigObject } from '../config/load.js';
import type { Config, ConfigIssue, ServerConfig } from '../config/types.js';
import { isObject } from '../lib/json.js';
import type { ServerStore, StoredServer } from '../store/stored-servers.js';
import type { Gateway } from './gateway.js';
import { planReload } from './reload-plan.js';

export type ServerSource = 'file' | 'api';

export type Parsed =
  | { ok: true; server: ServerConfig; secrets: string[] }
  | { ok: false; errors: ConfigIssue[] };

/** What a change would do to the running server: how it is applied, and which fields differ. */
export interface ServerDiff {
  change: 'added' | 'replaced' | 'retuned' | 'unchanged' | 'removed';
  fields: string[];
}

/** A placeholder-only value: `${NAME}` references and nothing else that could be a secret. */
const REFERENCE_ONLY = /^(?:[^$]*\$\{[A-Za-z_][A-Za-z0-9_]*\})+[^$]*$/;

export class ManagedServers {
  private stored: StoredServer[] = [];
  private epoch = -1;
  /** The config the file (or the host) gave, before the stored servers are merged over it. */
  fileConfig: Config;

  constructor(
    private readonly gateway: Gateway,
    readonly store: ServerStore,
  ) {
    this.fileConfig = gateway.config;
  }

  /** Where a running server comes from; undefined for one that is not configured. */
  source(name: string): ServerSource | undefined {
    if (
      this.stored.some((s) => s.name === name) &&
      this.gateway.config.servers.some((s) => s.name === name)
    ) {
      return 'api';
    }
    return this.fileConfig.servers.some((s) => s.name === name) ? 'file' : undefined;
  }

  storedEntry(name: string): StoredServer | undefined {
    return this.stored.find((s) => s.name === name);
  }

  /** Whether the file's servers are read-only through the API. */
  get fileLocked(): boolean {
    return (this.fileConfig.gateway.admin?.fileServers ?? 'locked') === 'locked';
  }

  /** Reads one entry as the config file would, with the running gateway's settings for its defaults. */
  parse(name: string, entry: unknown): Parsed {
    const g = this.fileConfig.gateway;
    const raw = {
      mcpServers: { [name]: entry },
      gateway: {
        callTimeoutMs: g.callTimeoutMs,
        maxCallTimeoutMs: g.maxCallTimeoutMs,
        maxResultBytes: g.maxResultBytes,
        maxUpstreamBodyBytes: g.maxUpstreamBodyBytes,
        disclosure: { budgetTokens: g.disclosure.budgetTokens, alwaysLoad: g.disclosure.alwaysLoad },
        allowedHosts: g.allowedHosts,
      },
    };
    const literal: ConfigIssue[] = [];
    const headers = isObject(entry) ? entry.headers : undefined;
    if (isObject(headers)) {
      for (const [key, value] of Object.entries(headers)) {
        if (typeof value === 'string' && !REFERENCE_ONLY.test(value)) {
          literal.push({
            path: `mcpServers.${name}.headers.${key}`,
            message:
              'is a literal value: a server added through the admin API is kept in the store, which never holds a secret',
            // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
            fix: 'put the value in an environment variable (or a Worker secret) and write "${NAME}"',
          });
        }
      }
    }
    const platform = this.gateway.platform;
    // `${VAR}` values come from where the host keeps them (Node: the environment), read when asked.
    const value = (key: string | symbol) =>
      typeof key === 'string' ? platform.readSecret?.(key) : undefined;
    const env = new Proxy({} as Record<string, string | undefined>, {
      get: (_t, key) => value(key),
      has: (_t, key) => value(key) !== undefined,
      getOwnPropertyDescriptor: (_t, key) => {
        const v = value(key);
        return v === undefined
          ? undefined
          : { value: v, enumerable: true, configurable: true, writable: false };
      },
    });
    const result = parseConfigObject(raw, env);
    if (!result.ok || literal.length > 0) {
      return { ok: false, errors: [...literal, ...(result.ok ? [] : result.errors)] };
    }
    const server = result.config.servers[0];
    if (!server) return { ok: false, errors: [{ path: `mcpServers.${name}`, message: 'is not a server' }] };
    return { ok: true, server, secrets: result.secrets };
  }

  /**
   * The file's config with the stored servers merged over it. A stored entry that no longer reads
   * (a variable gone, a rule tightened), that would shadow a locked file server, or whose prefix
   * another server holds is logged and left out: one bad entry never blocks the others.
   */
  merge(file: Config): { config: Config; secrets: string[] } {
    const locked = (file.gateway.admin?.fileServers ?? 'locked') === 'locked';
    const servers = [...file.servers];
    const secrets: string[] = [];
    for (const s of this.stored) {
      const at = servers.findIndex((o) => o.name === s.name);
      if (at >= 0 && locked) {
        this.gateway.log.warn('admin.server_shadowed', {
          server: s.name,
          message: 'the file has a server of this name and gateway.admin.fileServers is locked',
        });
        continue;
      }
      const parsed = this.parse(s.name, s.entry);
      if (!parsed.ok) {
        this.gateway.log.warn('admin.server_invalid', { server: s.name, errors: parsed.errors });
        continue;
      }
      const prefix = parsed.server.prefix;
      if (servers.some((o) => o.name !== s.name && prefix !== false && o.prefix === prefix)) {
        this.gateway.log.warn('admin.server_invalid', {
          server: s.name,
          errors: [
            {
              path: `mcpServers.${s.name}.prefix`,
              message: `is ${JSON.stringify(prefix)}, which another server uses`,
            },
          ],
        });
        continue;
      }
      secrets.push(...parsed.secrets);
      if (at >= 0) servers[at] = parsed.server;
      else servers.push(parsed.server);
    }
    return { config: { ...file, servers }, secrets };
  }

  /**
   * What changing `name` to `next` (or removing it: undefined) would do to the running server.
   * Field names only: values (headers, environment) are never shown.
   */
  diff(name: string, next: ServerConfig | undefined): ServerDiff {
    const running = this.gateway.config.servers.find((s) => s.name === name);
    if (!next) return { change: running ? 'removed' : 'unchanged', fields: [] };
    if (!running)
      return {
        change: 'added',
        fields: Object.keys(next)
          .filter((k) => k !== 'headerTemplates')
          .sort(),
      };
    const a = running as unknown as Record<string, unknown>;
    const b = next as unknown as Record<string, unknown>;
    const fields = [...new Set([...Object.keys(a), ...Object.keys(b)])]
      .filter((k) => k !== 'headerTemplates' && JSON.stringify(a[k]) !== JSON.stringify(b[k]))
      .sort();
    const plan = planReload(
      { ...this.gateway.config, servers: [running] },
      { ...this.gateway.config, servers: [next] },
    );
    const change = plan.replaced.length ? 'replaced' : plan.retuned.length ? 'retuned' : 'unchanged';
    return { change, fields };
  }

  /** Picks up a change any instance made: reads the epoch, and on a move the list, then reloads. */
  async poll(): Promise<void> {
    let epoch: number;
    try {
      epoch = await this.store.epoch();
      if (epoch === this.epoch) return;
      this.stored = await this.store.list();
    } catch {
      return; // The store is away: the running servers stay; the next poll tries again.
    }
    const first = this.epoch === -1;
    this.epoch = epoch;
    if (first && this.stored.length === 0) return;
    await this.gateway.reloader.apply(this.fileConfig).catch((e: unknown) => {
      this.gateway.log.warn('admin.servers_apply_failed', { error: String(e).slice(0, 200) });
    });
  }

  /** Stores one server, and applies it here at once (the other instances at their next poll). */
  async put(name: string, entry: Record<string, unknown>, by: string): Promise<void> {
    await this.store.put({ name, entry, updatedBy: by, updatedAt: this.gateway.platform.now() });
    await this.poll();
  }

  async remove(name: string): Promise<boolean> {
    const gone = await this.store.remove(name);
    if (gone) await this.poll();
    return gone;
  }
}
