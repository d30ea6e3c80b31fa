/**
 * Per-tenant and per-subject instances of a server (`isolation`, #13): a stateful upstream such as
 * server-memory or a browser must not let tenant A read what tenant B wrote, so each tenant (or
 * tenant and subject) gets its own stdio child or HTTP session. The shared instance still lists
 * the server for the catalog and drift; calls, reads and prompts go to the caller's own instance,
 * started on first use. Instances of one server are bounded (`maxInstances`: past it the least
 * recently used idle one closes; when none is idle the request is refused) and closed after
 * `instanceIdleSeconds` without use. Two keys never share an instance.
 */

import type { Principal } from '../auth/principal.js';
import { SUBJECT_PLACEHOLDER, TENANT_PLACEHOLDER } from '../config/placeholders.js';
import type { ServerConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import { unrefTimer } from '../platform.js';
import { authSubject } from './auth-deps.js';
import { UpstreamAuthRequired } from './call-errors.js';
import type { OAuthRule } from './oauth/types.js';
import type { UpstreamDeps } from './types.js';
import { Upstream } from './upstream.js';

interface Instance {
  upstream: Upstream;
  lastUsed: number;
  /** Whose instance it is (a reload that retunes the server fills its config in again). */
  principal: Principal;
  /** Its first start, once there was room for it (#53). */
  started?: Promise<void>;
}

/**
 * A tenant or subject as a safe path and name segment: letters, digits, `_` and `-` kept, every
 * other UTF-16 unit written `.xxxx` (hex). Injective, and never `/`, `..` or empty, so a tenant
 * named `../../etc` cannot point an instance at another's files.
 */
export function identitySegment(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    out += /[A-Za-z0-9_-]/.test(c) ? c : `.${text.charCodeAt(i).toString(16).padStart(4, '0')}`;
  }
  return out === '' ? '.' : out;
}

/**
 * The server's config for one principal's instance: `{{tenant}}` and `{{subject}}` in `args`,
 * `env` values, `cwd`, `url` and `headers` values become that principal's identity segments, so
 * each instance can keep its state apart (a memory file per tenant, say). The config refuses a
 * placeholder the server's isolation cannot fill with the caller (config/placeholders.ts).
 */
function forIdentity(config: ServerConfig, principal: Principal): ServerConfig {
  const tenant = identitySegment(principal.tenant);
  const subject = identitySegment(principal.subject);
  const fill = (s: string) =>
    s.replaceAll(TENANT_PLACEHOLDER, tenant).replaceAll(SUBJECT_PLACEHOLDER, subject);
  const map = (r: Record<string, string>) =>
    Object.fromEntries(Object.entries(r).map(([k, v]) => [k, fill(v)]));
  // #52: a user-key server's configured key header is the deployment's (to list its tools); a
  // caller's own instance never carries it: the caller's key, or nothing.
  const own =
    config.auth?.mode === 'user-key' ? (config.auth.header ?? 'Authorization').toLowerCase() : undefined;
  const headers = own
    ? Object.fromEntries(Object.entries(config.headers).filter(([k]) => k.toLowerCase() !== own))
    : config.headers;
  return {
    ...config,
    args: config.args.map(fill),
    env: map(config.env),
    headers: map(headers),
    ...(config.cwd !== undefined ? { cwd: fill(config.cwd) } : {}),
    ...(config.url !== undefined ? { url: fill(config.url) } : {}),
    ...(config.sandbox ? { sandbox: sandboxFor(config, config.sandbox, tenant, subject, fill) } : {}),
  };
}

/** An instance's sandbox (#53): placeholders filled in its paths, and a private data directory of its own. */
function sandboxFor(
  config: ServerConfig,
  sandbox: NonNullable<ServerConfig['sandbox']> & object,
  tenant: string,
  subject: string,
  fill: (s: string) => string,
): NonNullable<ServerConfig['sandbox']> {
  const own = config.isolation === 'per-subject' ? `${tenant}/${subject}` : tenant;
  return {
    ...sandbox,
    filesystem: {
      read: sandbox.filesystem.read.map(fill),
      ...(sandbox.filesystem.write ? { write: sandbox.filesystem.write.map(fill) } : {}),
    },
    ...(sandbox.dataDir !== undefined ? { dataDir: `${sandbox.dataDir}/${own}` } : {}),
  };
}

export class IsolatedInstances {
  /** Key -> instance, least recently used first (re-inserted on every use). */
  private readonly instances = new Map<string, Instance>();
  private reaper: ReturnType<typeof setInterval> | undefined;
  private closed = false;

  constructor(private readonly deps: UpstreamDeps) {
    // A login or logout (#19) reopens the instances that use that subject's credentials.
    for (const [name, auth] of deps.auths ?? []) {
      auth.onChange((subject) => {
        for (const { upstream } of this.instances.values()) {
          if (upstream.name === name && upstream.subject === subject) void upstream.reopen();
        }
      });
    }
  }

  /** Whose instance a principal uses on this server, or undefined when the server is shared. */
  static keyOf(config: ServerConfig, principal: Principal): string | undefined {
    if (config.isolation === 'per-tenant') return `${config.name}\0t\0${principal.tenant}`;
    if (config.isolation === 'per-subject') return `${config.name}\0s\0${principal.key}`;
    return undefined;
  }

  /** The caller's own instance of the server, connected (started on first use). */
  async instance(config: ServerConfig, principal: Principal): Promise<Upstream> {
    const key = IsolatedInstances.keyOf(config, principal);
    if (key === undefined) throw new TypeError('IsolatedInstances: the server is shared');
    if (this.closed) throw new ManifoldError('ERR_SHUTTING_DOWN', 'the gateway is shutting down');
    const now = this.deps.platform.now();
    let inst = this.instances.get(key);
    if (inst) {
      this.instances.delete(key);
    } else {
      this.makeRoom(config);
      const subject = authSubject(config, principal.key);
      inst = {
        upstream: new Upstream(forIdentity(config, principal), this.deps, subject),
        lastUsed: now,
        principal,
      };
      // Within gateway.maxRunningServers, like any server (#53).
      const fresh = inst.upstream;
      inst.started = this.deps.running?.admit(fresh, () => fresh.start()) ?? fresh.start();
      this.startReaper();
    }
    inst.lastUsed = now;
    this.instances.set(key, inst);
    const { upstream } = inst;
    try {
      await inst.started;
    } catch (e) {
      // No room under gateway.maxRunningServers: the instance never started, and goes.
      if (this.instances.get(key) === inst) this.drop(key);
      throw e;
    }
    if (upstream.state === 'connecting') await upstream.firstAttempt;
    // Stopped while unused (#53): started again for this caller.
    if (upstream.state === 'idle') await upstream.wake();
    // Only a `user` server's instance has credentials of its own to check: no await for the others.
    if (perCaller(config)) await this.authorizeInstance(config, upstream);
    if (upstream.state !== 'ready') {
      throw new ManifoldError(
        'ERR_UPSTREAM_UNAVAILABLE',
        `server ${config.name} (your own instance) is not available: ${upstream.lastError ?? upstream.state}`,
      );
    }
    return upstream;
  }

  /**
   * A `user` server's instance that is not serving (#19): connected again when the caller's token
   * arrived meanwhile (a login on any instance sharing the store), or refused with the caller's own
   * login link (server/mcp/rounds/login.ts turns it into a URL elicitation).
   */
  private async authorizeInstance(config: ServerConfig, upstream: Upstream): Promise<void> {
    const auth = this.deps.auths?.get(config.name);
    if (!auth || !perCaller(config)) return;
    const { subject } = upstream;
    const waiting = (s: string) => s === 'needs-login' || s === 'refused';
    if (upstream.state === 'ready' && !waiting(auth.state(subject).state)) return;
    if (
      upstream.state !== 'ready' &&
      auth.state(subject).state !== 'refused' &&
      (await auth.hasToken?.(subject))
    ) {
      if (auth.state(subject).state === 'ready') await upstream.reopen();
      if ((upstream.state as string) === 'ready') return; // reopen() changed it
    }
    const st = auth.state(subject);
    if (st.state === 'refused') throw new UpstreamAuthRequired(config.name, st.rule ?? 'step-up-exhausted');
    if (st.state !== 'needs-login') return;
    const begun = await auth
      .beginLogin(subject)
      .catch((e: unknown) => ({ rule: (e as { rule?: OAuthRule })?.rule }));
    if ('url' in begun) throw new UpstreamAuthRequired(config.name, st.rule ?? 'login-required', begun.url);
    // Discovery or registration failed: the rule says why, with no link to follow.
    throw new UpstreamAuthRequired(config.name, begun.rule ?? 'login-required');
  }

  /** The gateway settings instances read at each use (a reload changes them). */
  set gateway(gateway: UpstreamDeps['gateway']) {
    this.deps.gateway = gateway;
  }

  /**
   * A reload removed or replaced the server: its instances leave the table now (the next call
   * starts one from the new config) and are returned for the caller to close once they are idle.
   */
  retire(server: string): Upstream[] {
    const gone: Upstream[] = [];
    for (const [key, inst] of [...this.instances]) {
      if (inst.upstream.name !== server) continue;
      this.instances.delete(key);
      gone.push(inst.upstream);
    }
    return gone;
  }

  /** A reload changed only the server's view fields: each instance keeps its connection, with the new config. */
  retune(config: ServerConfig): void {
    for (const inst of this.instances.values()) {
      if (inst.upstream.name === config.name) inst.upstream.config = forIdentity(config, inst.principal);
    }
  }

  /** Instances of a server now, for /healthz and tests. */
  count(server: string): number {
    let n = 0;
    for (const { upstream } of this.instances.values()) if (upstream.name === server) n++;
    return n;
  }

  /** Frees a slot for one more instance of `config`, or refuses when every one is busy. */
  private makeRoom(config: ServerConfig): void {
    const mine = [...this.instances.entries()].filter(([, i]) => i.upstream.name === config.name);
    if (mine.length < config.maxInstances) return;
    const idle = mine.find(([, i]) => i.upstream.inflight === 0);
    if (!idle) {
      throw new ManifoldError(
        'ERR_UPSTREAM_UNAVAILABLE',
        `server ${config.name} has no free instance (maxInstances ${config.maxInstances}, all busy); try again shortly`,
      );
    }
    this.drop(idle[0]);
  }

  private drop(key: string): void {
    const inst = this.instances.get(key);
    if (!inst) return;
    this.instances.delete(key);
    void inst.upstream.close();
  }

  private startReaper(): void {
    if (this.reaper) return;
    this.reaper = setInterval(() => this.reap(), 5_000);
    unrefTimer(this.reaper);
  }

  /** Closes every instance idle past its server's instanceIdleSeconds. */
  reap(now = this.deps.platform.now()): void {
    for (const [key, inst] of [...this.instances]) {
      const idleMs = inst.upstream.config.instanceIdleSeconds * 1000;
      if (inst.upstream.inflight === 0 && now - inst.lastUsed >= idleMs) this.drop(key);
    }
    if (this.instances.size === 0 && this.reaper) {
      clearInterval(this.reaper);
      this.reaper = undefined;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reaper) clearInterval(this.reaper);
    const all = [...this.instances.values()];
    this.instances.clear();
    await Promise.allSettled(all.map((i) => i.upstream.close()));
  }
}

/** A server whose instance carries each caller's own credentials: an OAuth sign-in, or a key (#52). */
function perCaller(config: ServerConfig): boolean {
  return config.auth?.mode === 'user' || config.auth?.mode === 'user-key';
}
