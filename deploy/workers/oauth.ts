/**
 * Upstream OAuth on Workers (#19, design §4.6), mode `gateway`: one identity for the deployment.
 *
 * - The server's `ManifoldUpstream` object owns its credentials: the real `OAuthManager` over the
 *   object's own SQLite (`durableObjectCredentials`, the same tables as Node's store), so the
 *   token, its refresh (single-flight there) and the single-use claim of a callback's state all
 *   live in one place. The object's app serves `POST /admin/servers/<n>/login|logout` and the
 *   callback (the Worker forwards them there).
 * - Isolates and tenant objects call the server too (the modern direct path; a legacy client's
 *   calls over snapshots): their `UpstreamAuth` is a `RemoteAuth` that asks the server's object for
 *   the current access token (`credential`, cached until near expiry) and tells it of a refusal
 *   (`refused`), so a refresh happens once, in the object, whichever place was refused.
 * - `static` servers with a `${VAR}` header get the core's static auth in every place: after a 401
 *   the binding is read again (`Platform.readSecret`).
 *
 * The access token crosses only the Worker's own object stubs (never a client's request); it is
 * never logged.
 */

import type { Config, ServerConfig } from '../../src/config/types.js';
import type { UpstreamAuth } from '../../src/oauth/auth-fetch.js';
import { SecretBox } from '../../src/oauth/box.js';
import { STATE_AAD } from '../../src/oauth/flow.js';
import {
  CREDENTIALS_LABEL,
  createUpstreamAuths,
  isProtected,
  OAUTH_DEFAULTS,
} from '../../src/oauth/registry.js';
import { createStaticAuth } from '../../src/oauth/static-auth.js';
import { OAuthError, type SubjectKey } from '../../src/oauth/types.js';
import type { StateStore } from '../../src/store/state.js';
import { type Booted, type Env, INTERNAL, INTERNAL_ORIGIN, SERVER_HEADER } from './boot.js';
import { durableObjectCredentials } from './do-store.js';
import { workersPlatform } from './platform.js';
import type { Snapshot } from './snapshot.js';

type AuthView = ReturnType<UpstreamAuth['state']>;

/** The object routes of the credential RPC (the Worker answers 404 for them from outside). */
export const CREDENTIAL_PATH = `${INTERNAL}credential`;
export const REFUSED_PATH = `${INTERNAL}refused`;

const delegated = (s: ServerConfig) => s.auth?.mode === 'gateway' || s.auth?.mode === 'user';

/** The public origin an object last saw (the Worker forwards clients' requests with their URL). */
export class SeenOrigin {
  private origin: string | undefined;
  note(request: Request): void {
    const o = new URL(request.url).origin;
    if (o !== INTERNAL_ORIGIN) this.origin = o;
  }
  /** The callback URL: configured (`oauth.redirectUri`, `advertiseUrl`), else the origin clients use. */
  redirectUri(config: Config): string {
    const g = config.gateway;
    if (g.oauth?.redirectUri) return g.oauth.redirectUri;
    if (g.advertiseUrl) return `${new URL(g.advertiseUrl).origin}/oauth/callback`;
    return `${this.origin ?? INTERNAL_ORIGIN}/oauth/callback`;
  }
}

/** In the object that owns a server's state (or the single object): the real credentials. */
export async function objectAuths(
  booted: Booted,
  config: Config,
  storage: unknown,
  claims: Pick<StateStore, 'claim'>,
  origin: SeenOrigin,
): Promise<Map<string, UpstreamAuth>> {
  const platform = workersPlatform(booted.log, config.gateway, booted.env);
  if (!config.servers.some((s) => isProtected(s, platform))) return new Map();
  return createUpstreamAuths(config, {
    platform,
    credentials: durableObjectCredentials(storage as never),
    claims,
    redirectUri: () => origin.redirectUri(config),
    addSecret: addSecretTo(booted),
  });
}

/** In an isolate or a tenant object: static auths here, OAuth servers' tokens from their objects. */
export function remoteAuths(booted: Booted, env: Env): Map<string, UpstreamAuth> {
  const { config } = booted;
  const platform = workersPlatform(booted.log, config.gateway, booted.env);
  const out = new Map<string, UpstreamAuth>();
  const skewMs = { ...OAUTH_DEFAULTS, ...config.gateway.oauth }.refreshSkewSeconds * 1000;
  for (const s of config.servers) {
    if (!isProtected(s, platform)) continue;
    if (delegated(s)) {
      out.set(s.name, new RemoteAuth(s.name, env.UPSTREAMS, skewMs, () => Date.now()));
      continue;
    }
    const readSecret = platform.readSecret;
    out.set(
      s.name,
      createStaticAuth(s, {
        log: platform.log,
        ...(readSecret ? { readSecret } : {}),
        addSecret: addSecretTo(booted),
      }),
    );
  }
  return out;
}

/** Hands each snapshot's credentials state (no token) to the server's RemoteAuth. */
export function observeAuth(auths: ReadonlyMap<string, UpstreamAuth>): (snap: Snapshot) => void {
  return (snap) => {
    const a = auths.get(snap.server);
    if (a instanceof RemoteAuth) a.observe(snap.auth as AuthView | undefined);
  };
}

/** A value read again at run time joins the log's redaction list (the logger keeps that array). */
function addSecretTo(booted: Booted): (v: string) => void {
  return (v) => {
    const list = booted.secrets as string[];
    if (!list.includes(v) && Object.isExtensible(list)) list.push(v);
  };
}

interface CredentialAnswer {
  headers: Record<string, string>;
  state: AuthView;
}

/**
 * A server's credentials as seen from a place that does not own them: the current headers from
 * the server's object, kept until the token is within the refresh skew of its expiry (a token
 * without an expiry is asked for again after a minute); nothing is kept while a login is needed.
 */
export class RemoteAuth implements UpstreamAuth {
  private cached: { headers: Record<string, string>; until: number; expiresAt?: number } | undefined;
  private flight: Promise<Record<string, string>> | undefined;
  private last: AuthView = { state: 'needs-login', rule: 'login-required' };

  constructor(
    readonly server: string,
    private readonly upstreams: DurableObjectNamespace,
    private readonly skewMs: number,
    private readonly now: () => number,
  ) {}

  private ask(path: string, init?: RequestInit): Promise<Response> {
    const stub = this.upstreams.get(this.upstreams.idFromName(this.server));
    const headers = new Headers(init?.headers);
    headers.set(SERVER_HEADER, this.server);
    return stub.fetch(`${INTERNAL_ORIGIN}${path}`, { ...init, headers });
  }

  async authorize(subject: SubjectKey): Promise<Record<string, string>> {
    // Mode gateway only: no other subject has credentials on Workers (boot refuses mode user).
    if (subject !== '') return {};
    const c = this.cached;
    if (c && this.now() < c.until) return c.headers;
    this.flight ??= this.fetchCredential().finally(() => {
      this.flight = undefined;
    });
    return this.flight;
  }

  private async fetchCredential(): Promise<Record<string, string>> {
    const res = await this.ask(CREDENTIAL_PATH);
    if (!res.ok) {
      await res.body?.cancel();
      return {};
    }
    const a = (await res.json()) as CredentialAnswer;
    this.last = a.state;
    if (a.headers.authorization) {
      const until = a.state.expiresAt !== undefined ? a.state.expiresAt - this.skewMs : this.now() + 60_000;
      this.cached = {
        headers: a.headers,
        until,
        ...(a.state.expiresAt !== undefined ? { expiresAt: a.state.expiresAt } : {}),
      };
    } else this.cached = undefined;
    return a.headers;
  }

  async onRefused(
    subject: SubjectKey,
    status: 401 | 403,
    wwwAuthenticate: string | null,
    sent?: string | null,
  ): Promise<'retry' | 'stop'> {
    if (subject !== '') return 'stop';
    this.cached = undefined;
    const res = await this.ask(REFUSED_PATH, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ status, wwwAuthenticate, sent: sent ?? null }),
    });
    if (!res.ok) {
      await res.body?.cancel();
      return 'stop';
    }
    const a = (await res.json()) as { decision: 'retry' | 'stop'; state: AuthView };
    this.last = a.state;
    return a.decision === 'retry' ? 'retry' : 'stop';
  }

  state(_subject: SubjectKey): AuthView {
    return this.last;
  }

  /** What the object's snapshot said of the server's credentials (no token in it). */
  observe(view: AuthView | undefined): void {
    if (!view) return;
    this.last = view;
    // A logout, a refusal or a newer token in the object: the kept headers are not the current ones.
    if (view.state !== 'ready' || view.expiresAt !== this.cached?.expiresAt) this.cached = undefined;
  }

  beginLogin(): Promise<{ url: string; expiresAt: number }> {
    return Promise.reject(
      new OAuthError('login-required', `server ${this.server} signs in through its own object`),
    );
  }

  async logout(): Promise<void> {
    this.cached = undefined;
  }

  onChange(): void {}
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
  });

/** The object's side of the credential RPC; undefined when the request is not one. */
export async function answerCredential(
  request: Request,
  auths: ReadonlyMap<string, UpstreamAuth>,
  server: string,
): Promise<Response | undefined> {
  const path = new URL(request.url).pathname;
  if (path !== CREDENTIAL_PATH && path !== REFUSED_PATH) return undefined;
  const auth = auths.get(server);
  if (!auth) return json({ error: `server ${server} has no credentials` }, 404);
  if (path === CREDENTIAL_PATH) {
    const headers = await auth.authorize('');
    return json({ headers, state: auth.state('') } satisfies CredentialAnswer);
  }
  let body: { status?: unknown; wwwAuthenticate?: unknown; sent?: unknown };
  try {
    body = (await request.json()) as typeof body;
  } catch {
    return json({ error: 'bad request' }, 400);
  }
  const status = body.status === 403 ? 403 : 401;
  const www = typeof body.wwwAuthenticate === 'string' ? body.wwwAuthenticate : null;
  const sent = typeof body.sent === 'string' ? body.sent : null;
  const decision = await auth.onRefused('', status, www, sent);
  return json({ decision, state: auth.state('') });
}

/** The OAuth servers of a config (those whose callback and metadata the objects serve). */
export function oauthServers(config: Config): ServerConfig[] {
  return config.servers.filter((s) => delegated(s) && s.url && !s.disabled);
}

/**
 * The server a callback's sealed state names, read in the isolate so the callback can go to that
 * server's object (which opens it again, claims it once and redeems the code). undefined: the
 * state does not open under this deployment's key.
 */
export async function callbackServer(config: Config, query: URLSearchParams): Promise<string | undefined> {
  const secret = config.gateway.oauth?.secret;
  const state = query.get('state');
  if (!secret || !state) return undefined;
  const box = await SecretBox.create(new TextEncoder().encode(secret), CREDENTIALS_LABEL);
  const pending = (await box.open(state, STATE_AAD).catch(() => undefined)) as
    | { server?: unknown }
    | undefined;
  return typeof pending?.server === 'string' ? pending.server : undefined;
}

export function plain(status: number, text: string): Response {
  return new Response(`${text}\n`, {
    status,
    headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' },
  });
}
