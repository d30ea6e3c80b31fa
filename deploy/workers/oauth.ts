/**
 * Upstream OAuth on Workers (#19): mode `gateway` (one identity for the deployment)
 * and mode `user` (a token per caller, keyed by the principal's key).
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
 * - `user-key` servers (#52) the same way: the object holds each caller's key (sealed, in its
 *   store) and serves the page where it is given; other places ask it for the caller's headers.
 * - `static` servers with a `${VAR}` header get the core's static auth in every place: after a 401
 *   the binding is read again (`Platform.readSecret`).
 *
 * The access token crosses only the Worker's own object stubs (never a client's request); it is
 * never logged.
 */

import { OAUTH_DEFAULTS } from '../../src/config/defaults.js';
import type { Config, ServerConfig } from '../../src/config/types.js';
import type { StateStore } from '../../src/store/state.js';
import type { UpstreamAuth } from '../../src/upstream/oauth/auth-fetch.js';
import { SecretBox } from '../../src/upstream/oauth/box.js';
import { STATE_AAD } from '../../src/upstream/oauth/flow.js';
import { CREDENTIALS_LABEL, createUpstreamAuths, isProtected } from '../../src/upstream/oauth/registry.js';
import { createStaticAuth } from '../../src/upstream/oauth/static-auth.js';
import { OAuthError, type OAuthRule, type SubjectKey } from '../../src/upstream/oauth/types.js';
import { type Booted, type Env, INTERNAL, INTERNAL_ORIGIN, SERVER_HEADER } from './boot.js';
import { durableObjectCredentials } from './do-store.js';
import { workersPlatform } from './platform.js';
import { type Snapshot, snapshotTtl } from './snapshot.js';

type AuthView = ReturnType<UpstreamAuth['state']>;

/** The object routes of the credential RPC (the Worker answers 404 for them from outside). */
export const CREDENTIAL_PATH = `${INTERNAL}credential`;
export const REFUSED_PATH = `${INTERNAL}refused`;
export const HAS_TOKEN_PATH = `${INTERNAL}has-token`;
export const LOGIN_PATH = `${INTERNAL}begin-login`;
const RPC_PATHS = new Set([CREDENTIAL_PATH, REFUSED_PATH, HAS_TOKEN_PATH, LOGIN_PATH]);

const oauthMode = (s: ServerConfig) => s.auth?.mode === 'gateway' || s.auth?.mode === 'user';
/**
 * Credentials only the server's object holds: OAuth tokens, and (#52) callers' own keys, which the
 * object keeps sealed in its store and serves on its key page (`/keys/<server>`, worker.ts).
 */
const delegated = (s: ServerConfig) => oauthMode(s) || s.auth?.mode === 'user-key';

/** The public origin an object last saw (the Worker forwards clients' requests with their URL). */
export class SeenOrigin {
  private origin: string | undefined;
  note(request: Request): void {
    this.noteOrigin(new URL(request.url).origin);
  }
  /** An origin another place saw (a tenant object beginning a caller's login). */
  noteOrigin(o: unknown): void {
    if (typeof o === 'string' && o !== INTERNAL_ORIGIN && /^https?:\/\/[^/]+$/.test(o)) this.origin = o;
  }
  get current(): string | undefined {
    return this.origin;
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
export function remoteAuths(booted: Booted, env: Env, origin: SeenOrigin): Map<string, UpstreamAuth> {
  const { config } = booted;
  const platform = workersPlatform(booted.log, config.gateway, booted.env);
  const out = new Map<string, UpstreamAuth>();
  const skewMs = { ...OAUTH_DEFAULTS, ...config.gateway.oauth }.refreshSkewSeconds * 1000;
  const keepMs = snapshotTtl(env.MANIFOLD_SNAPSHOT_TTL_MS);
  for (const s of config.servers) {
    if (!isProtected(s, platform)) continue;
    if (delegated(s)) {
      out.set(s.name, new RemoteAuth(s.name, env.UPSTREAMS, skewMs, keepMs, () => Date.now(), origin));
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
 * A server's credentials as seen from a place that does not own them, per subject ('' = the
 * deployment's identity; a principal key in mode `user`): the current headers from the server's
 * object, kept until the token is within the refresh skew of its expiry, and never longer than the
 * snapshot ttl; nothing is kept while a login is needed.
 */
export class RemoteAuth implements UpstreamAuth {
  private readonly cached = new Map<
    SubjectKey,
    { headers: Record<string, string>; until: number; expiresAt?: number }
  >();
  private readonly flights = new Map<SubjectKey, Promise<Record<string, string>>>();
  private readonly last = new Map<SubjectKey, AuthView>();

  constructor(
    readonly server: string,
    private readonly upstreams: DurableObjectNamespace,
    private readonly skewMs: number,
    /** At most this long between two reads of the token from the object (the snapshot ttl). */
    private readonly keepMs: number,
    private readonly now: () => number,
    /** Where this place's clients come from: the callback URL of a login begun for one of them. */
    private readonly origin?: SeenOrigin,
  ) {}

  private async ask<T>(path: string, subject: SubjectKey, body?: unknown): Promise<T | undefined> {
    const stub = this.upstreams.get(this.upstreams.idFromName(this.server));
    const res = await stub.fetch(`${INTERNAL_ORIGIN}${path}`, {
      method: 'POST',
      headers: { [SERVER_HEADER]: this.server, 'content-type': 'application/json' },
      body: JSON.stringify({ subject, ...(body as object) }),
    });
    if (!res.ok) {
      await res.body?.cancel();
      return undefined;
    }
    const a = (await res.json()) as T & { state?: AuthView };
    if (a.state) this.last.set(subject, a.state);
    return a;
  }

  authorize(subject: SubjectKey): Promise<Record<string, string>> {
    const c = this.cached.get(subject);
    if (c && this.now() < c.until) return Promise.resolve(c.headers);
    let f = this.flights.get(subject);
    if (!f) {
      f = this.fetchCredential(subject).finally(() => this.flights.delete(subject));
      this.flights.set(subject, f);
    }
    return f;
  }

  private async fetchCredential(subject: SubjectKey): Promise<Record<string, string>> {
    const a = await this.ask<CredentialAnswer>(CREDENTIAL_PATH, subject);
    if (!a) return {};
    // A token, or a caller's own key in the header its server names.
    if (Object.keys(a.headers).length > 0) {
      const exp = a.state.expiresAt;
      this.cached.set(subject, {
        headers: a.headers,
        // As the manager does, never more than half of the token's remaining life early.
        // and never longer than a snapshot is kept: a logout in the object (of any subject) reaches
        // every place within that bound, as a re-trust does.
        until: Math.min(
          exp !== undefined ? exp - Math.min(this.skewMs, (exp - this.now()) / 2) : Number.POSITIVE_INFINITY,
          this.now() + this.keepMs,
        ),
        ...(exp !== undefined ? { expiresAt: exp } : {}),
      });
    } else this.cached.delete(subject);
    return a.headers;
  }

  async onRefused(
    subject: SubjectKey,
    status: 401 | 403,
    wwwAuthenticate: string | null,
    sent?: string | null,
  ): Promise<'retry' | 'stop'> {
    this.cached.delete(subject);
    const a = await this.ask<{ decision: string }>(REFUSED_PATH, subject, {
      status,
      wwwAuthenticate,
      sent: sent ?? null,
    });
    return a?.decision === 'retry' ? 'retry' : 'stop';
  }

  state(subject: SubjectKey): AuthView {
    return this.last.get(subject) ?? { state: 'needs-login', rule: 'login-required' };
  }

  /** What the object's snapshot said of the deployment identity's credentials (no token in it). */
  observe(view: AuthView | undefined): void {
    if (!view) return;
    this.last.set('', view);
    // A logout, a refusal or a newer token in the object: the kept headers are not the current ones.
    if (view.state !== 'ready' || view.expiresAt !== this.cached.get('')?.expiresAt) this.cached.delete('');
  }

  /** Whether the object holds a token for the subject now (its state comes back with the answer). */
  async hasToken(subject: SubjectKey): Promise<boolean> {
    const a = await this.ask<{ has: boolean }>(HAS_TOKEN_PATH, subject);
    if (!a?.has) this.cached.delete(subject);
    return a?.has === true;
  }

  /** A caller's own login link (mode user), begun in the object that will take the callback. */
  async beginLogin(subject: SubjectKey): Promise<{ url: string; expiresAt: number }> {
    const a = await this.ask<{ url?: string; expiresAt?: number; rule?: OAuthRule }>(LOGIN_PATH, subject, {
      origin: this.origin?.current,
    });
    if (a?.url && a.expiresAt !== undefined) return { url: a.url, expiresAt: a.expiresAt };
    throw new OAuthError(a?.rule ?? 'login-required', `server ${this.server} could not begin a sign-in`);
  }

  async logout(subject?: SubjectKey): Promise<void> {
    if (subject === undefined) this.cached.clear();
    else this.cached.delete(subject);
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
  origin: SeenOrigin,
): Promise<Response | undefined> {
  const path = new URL(request.url).pathname;
  if (!RPC_PATHS.has(path)) return undefined;
  const auth = auths.get(server);
  if (!auth) return json({ error: `server ${server} has no credentials` }, 404);
  let body: {
    subject?: unknown;
    status?: unknown;
    wwwAuthenticate?: unknown;
    sent?: unknown;
    origin?: unknown;
  };
  try {
    body = (await request.json()) as typeof body;
  } catch {
    return json({ error: 'bad request' }, 400);
  }
  const subject = typeof body.subject === 'string' ? body.subject : '';
  switch (path) {
    case CREDENTIAL_PATH: {
      const headers = await auth.authorize(subject);
      return json({ headers, state: auth.state(subject) } satisfies CredentialAnswer);
    }
    case HAS_TOKEN_PATH: {
      const has = (await auth.hasToken?.(subject)) ?? false;
      return json({ has, state: auth.state(subject) });
    }
    case LOGIN_PATH:
      origin.noteOrigin(body.origin);
      try {
        const begun = await auth.beginLogin(subject);
        return json({ ...begun, state: auth.state(subject) });
      } catch (e) {
        return json({
          rule: e instanceof OAuthError ? e.rule : 'login-required',
          state: auth.state(subject),
        });
      }
    default: {
      const status = body.status === 403 ? 403 : 401;
      const www = typeof body.wwwAuthenticate === 'string' ? body.wwwAuthenticate : null;
      const sent = typeof body.sent === 'string' ? body.sent : null;
      const decision = await auth.onRefused(subject, status, www, sent);
      return json({ decision, state: auth.state(subject) });
    }
  }
}

/** The OAuth servers of a config (those whose callback and metadata the objects serve). */
export function oauthServers(config: Config): ServerConfig[] {
  return config.servers.filter((s) => oauthMode(s) && s.url && !s.disabled);
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
