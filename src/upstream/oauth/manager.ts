/**
 * The gateway as an OAuth 2.1 client of one protected upstream (#19): per
 * (server, subject) it holds the token (sealed in the CredentialStore), refreshes it before it
 * expires (single-flight in the process, compare-and-set on the row's version across instances),
 * re-issues client_credentials tokens, answers the 401/403 loop of auth-fetch.ts, counts step-ups,
 * and begins and completes browser logins. Subject '' is the deployment's identity (mode
 * `gateway`, and the catalog listing of mode `user`); a principal key otherwise. It never falls
 * back from a subject to ''. Log lines name the server, the issuer's host and the rule, never a
 * token, a secret or a URL with its query.
 */
import type { GatewayOAuthConfig, ServerAuthConfig, ServerConfig } from '../../config/types.js';
import type { Logger } from '../../lib/log.js';
import type { CredentialStore } from '../../store/credentials-types.js';
import type { StateStore } from '../../store/state.js';
import type { UpstreamAuth } from './auth-fetch.js';
import type { SecretBox } from './box.js';
import { bearerChallenge } from './challenge.js';
import { ClientBook } from './clients.js';
import { discoverAuthorizationServer, discoverResource } from './discovery.js';
import { redeemCode, selectScopes, startAuthorization } from './flow.js';
import { hostOf } from './http.js';
import { createStaticAuth } from './static-auth.js';
import { clientCredentials, refresh, revoke } from './token.js';
import { type AskedScopes, need, type Slot, TokenSlots, union } from './token-slots.js';
import {
  type AsMetadata,
  type Challenge,
  type Fetch,
  OAuthError,
  type PendingFlow,
  type SubjectKey,
  type TokenSet,
} from './types.js';

export interface OAuthDeps {
  /** The unwrapped, egress-guarded fetch: discovery, registration and tokens never carry the bearer. */
  fetch: Fetch;
  credentials: CredentialStore;
  claims: Pick<StateStore, 'claim'>;
  box: SecretBox;
  gateway: GatewayOAuthConfig & { redirectUri: string };
  log: Logger;
  now(): number;
  readSecret?(name: string): string | undefined;
  /** Adds a value re-read at run time to the log redaction set. */
  addSecret?(value: string): void;
}

/**
 * Whether the slot holds another token than the refused request carried (none, or an older one):
 * a login or refresh landed meanwhile, and the request deserves a try with it.
 */
function replaced(s: Slot, sent: string | null | undefined): boolean {
  return s.token !== undefined && sent !== undefined && sent !== `Bearer ${s.token.accessToken}`;
}

export function createUpstreamAuth(config: ServerConfig, deps: OAuthDeps): UpstreamAuth {
  const auth = config.auth;
  if (!auth || auth.mode === 'static' || !config.url) return createStaticAuth(config, deps);
  return new OAuthManager(config, auth, config.url, deps);
}

export class OAuthManager implements UpstreamAuth {
  readonly server: string;
  private readonly slots: TokenSlots;
  private readonly listeners: ((subject: SubjectKey) => void)[] = [];
  private readonly metadataCache = new Map<string, Promise<AsMetadata>>();
  private readonly clients: ClientBook;
  private readonly log: Logger;

  constructor(
    readonly config: ServerConfig,
    readonly auth: ServerAuthConfig,
    private readonly url: string,
    readonly deps: OAuthDeps,
  ) {
    this.server = config.name;
    this.log = deps.log.child({ server: config.name });
    this.slots = new TokenSlots(config.name, deps, this.log);
    this.clients = new ClientBook(auth, {
      fetch: deps.fetch,
      credentials: deps.credentials,
      box: deps.box,
      ...(deps.gateway.clientMetadataUrl ? { cimdUrl: deps.gateway.clientMetadataUrl } : {}),
      clientName: deps.gateway.clientName,
      now: () => deps.now(),
    });
  }

  private async metadata(issuer: string): Promise<AsMetadata> {
    let p = this.metadataCache.get(issuer);
    if (!p) {
      p = discoverAuthorizationServer(this.deps.fetch, issuer);
      this.metadataCache.set(issuer, p);
      p.catch(() => this.metadataCache.delete(issuer));
    }
    return p;
  }

  /**
   * Due for renewal: within the skew of its expiry, but never earlier than half its life (a token
   * that lives less than the skew would otherwise be renewed before every request).
   */
  private expiring(t: TokenSet, s: Slot): boolean {
    if (t.expiresAt === undefined) return false;
    let skew = this.deps.gateway.refreshSkewSeconds * 1000;
    if (s.obtainedAt !== undefined) skew = Math.min(skew, (t.expiresAt - s.obtainedAt) / 2);
    return t.expiresAt - skew <= this.deps.now();
  }

  async authorize(subject: SubjectKey): Promise<Record<string, string>> {
    // A login in another process (the CLI, another instance) is in use here within REREAD_MS.
    const s = await this.slots.fresh(subject);
    if (!s.token && this.auth.grant === 'client_credentials') await this.renew(subject, s);
    else if (s.token && this.expiring(s.token, s)) await this.renew(subject, s);
    const t = s.token;
    // An access token past its expiry is still sent when renewal failed: the server decides.
    return t ? { authorization: `Bearer ${t.accessToken}` } : {};
  }

  /** Refresh, or a new client_credentials token: one at a time per subject in this process. */
  private renew(subject: SubjectKey, s: Slot, scopes?: string[]): Promise<boolean> {
    s.flight ??= this.doRenew(subject, s, scopes).finally(() => {
      s.flight = undefined;
    });
    return s.flight;
  }

  private async doRenew(subject: SubjectKey, s: Slot, scopes?: string[]): Promise<boolean> {
    // The row this renewal continues: it is written only over that version, never over a login
    // that landed meanwhile (whatever a re-read puts in the slot while the AS answers).
    const before = s.version;
    const held = s.token?.accessToken;
    const carried: AskedScopes = {
      asked: s.requested,
      ...(s.pendingScopes ? { stepUp: s.pendingScopes } : {}),
    };
    try {
      if (this.auth.grant === 'client_credentials') {
        const prm = await discoverResource(this.deps.fetch, this.url, s.challenge);
        const issuer = this.auth.issuer ?? prm.authorizationServers[0];
        if (!issuer)
          throw new OAuthError('no-as-metadata', 'the resource metadata names no authorization server');
        const as = await this.metadata(issuer);
        const client = await this.clients.get(this.server, as, this.deps.gateway.redirectUri);
        const asked = scopes ?? selectScopes(s.challenge, prm, as, s.requested, this.auth.scopes);
        const t = await clientCredentials(this.deps.fetch, as, client, prm.resource, asked, this.deps.now());
        await this.slots.write(subject, s, t, { asked: asked ?? [] }, { expect: before });
        this.log.info('oauth.token', { grant: 'client_credentials', issuer: hostOf(issuer) });
        return s.token !== undefined;
      }
      const t = s.token;
      if (!t?.refreshToken) return false;
      const as = await this.metadata(t.issuer);
      const client = await this.clients.forToken(this.server, as, this.deps.gateway.redirectUri, t.clientId);
      if (!client) throw new OAuthError('refresh-failed', 'no client registration for the token');
      const next = await refresh(this.deps.fetch, as, client, t, this.deps.now());
      await this.slots.write(subject, s, next, carried, { expect: before });
      this.log.info('oauth.refresh', { issuer: hostOf(t.issuer) });
      return s.token !== undefined;
    } catch (e) {
      // Only the AS's own refusal ends a token; an unreachable AS leaves it for the next attempt.
      const rule = e instanceof OAuthError ? e.rule : undefined;
      // Another instance may have rotated the refresh token first, or a login landed: theirs is good.
      await this.slots.read(subject, s).catch(() => {});
      if (s.token && s.token.accessToken !== held) return true;
      if (this.auth.grant !== 'client_credentials' && rule === 'refresh-failed' && s.version === before) {
        await this.drop(subject, s);
      }
      if (!s.token || this.auth.grant === 'client_credentials') need(s, 'login-required');
      this.log.warn('oauth.refused', { rule: rule ?? 'as-unreachable' });
      return false;
    }
  }

  async onRefused(
    subject: SubjectKey,
    status: 401 | 403,
    wwwAuthenticate: string | null,
    sent?: string | null,
  ): Promise<'retry' | 'stop'> {
    const s = this.slots.slot(subject);
    const c = bearerChallenge(wwwAuthenticate);
    if (status === 401) {
      if (c) s.challenge = c;
      const had = s.token?.accessToken;
      await this.slots.read(subject, s);
      // Another instance (or the CLI) stored a newer token meanwhile.
      if (s.token && s.token.accessToken !== had) return 'retry';
      // The refused request carried no token or an older one (a login landed while it was in
      // flight): the current token was never refused, so it is neither deleted nor given up on.
      if (replaced(s, sent)) return 'retry';
      const cc = this.auth.grant === 'client_credentials';
      // The token this gateway just renewed for a 401 was refused too: renewing again would loop.
      const renewedRefused = s.token !== undefined && s.token.accessToken === s.renewed;
      if (cc && renewedRefused) return 'stop';
      // SEP-2352: the resource now names another AS; its tokens are not ours to refresh.
      const moved = !renewedRefused && s.token !== undefined && (await this.issuerMoved(s, s.token.issuer));
      if (!renewedRefused && !moved && (s.token?.refreshToken || cc)) {
        if (!(await this.renew(subject, s))) return 'stop';
        s.renewed = s.token?.accessToken;
        return 'retry';
      }
      // Refused and not renewable: the token is of no more use; a login replaces it.
      if (s.token && s.version !== undefined) await this.drop(subject, s);
      need(s, 'login-required');
      this.log.info('oauth.refused', { rule: 'login-required', status });
      return 'stop';
    }
    if (c?.error !== 'insufficient_scope') return 'stop';
    s.challenge = c;
    // RFC 6750 §3.1: the token lacks a scope. A token stored since (a login in the CLI or on
    // another instance) may hold it: the request goes again with that one, and counts no step-up.
    await this.slots.read(subject, s);
    if (replaced(s, sent)) return 'retry';
    const challenged = c.scope ?? [];
    const pending = s.pendingScopes ?? [];
    // The token a step-up was asked for, refused again for what it waits for: the same step-up.
    if (sent && sent === s.steppedUp && challenged.every((x) => pending.includes(x))) return 'stop';
    const key = [...challenged].sort().join(' ');
    const n = (s.stepUps.get(key) ?? 0) + 1;
    s.stepUps.set(key, n);
    // SEP-2350: the next authorization asks for every scope asked so far and the challenge's.
    const wanted = union(union(s.pendingScopes ?? s.requested, s.token?.scope ?? []), challenged);
    const cc = this.auth.grant === 'client_credentials';
    if (!cc) {
      // Kept with the token, so a login anywhere (the CLI, another instance) asks for all of it.
      await this.slots.stepUp(subject, s, wanted, sent ?? null);
      if (replaced(s, sent)) return 'retry';
      s.steppedUp = sent ?? undefined;
    }
    if (n > this.auth.maxStepUps || (cc && n > 1)) {
      need(s, 'step-up-exhausted', 'refused');
      this.log.warn('oauth.refused', { rule: 'step-up-exhausted', status });
      return 'stop';
    }
    if (cc) return (await this.renew(subject, s, wanted)) ? 'retry' : 'stop';
    need(s, 'login-required');
    this.log.info('oauth.step_up', { scopes: wanted.length });
    return 'stop';
  }

  /** Whether the resource's metadata now names another authorization server than `issuer`. */
  private async issuerMoved(s: Slot, issuer: string): Promise<boolean> {
    try {
      const prm = await discoverResource(this.deps.fetch, this.url, s.challenge);
      const now = prm.authorizationServers[0];
      return now !== undefined && now !== issuer;
    } catch {
      return false;
    }
  }

  state(subject: SubjectKey): ReturnType<UpstreamAuth['state']> {
    const s = this.slots.peek(subject);
    if (!s) return { state: 'needs-login', rule: 'login-required' };
    const t = s.token;
    return {
      state: s.state,
      ...(s.rule ? { rule: s.rule } : {}),
      ...(t ? { issuer: t.issuer, scopes: t.scope } : {}),
      ...(t?.expiresAt !== undefined ? { expiresAt: t.expiresAt } : {}),
    };
  }

  /** Reads the stored token of a subject (the deployment's, at start) so its state is known. */
  async preload(subject: SubjectKey = ''): Promise<void> {
    await this.slots
      .fresh(subject)
      .catch((e) => this.log.warn('oauth.store_unreadable', { error: String(e).slice(0, 200) }));
  }

  /** Whether a subject has a stored token now (read from the store, so another instance's login counts). */
  async hasToken(subject: SubjectKey): Promise<boolean> {
    const s = this.slots.slot(subject);
    await this.slots.read(subject, s);
    return s.token !== undefined;
  }

  async beginLogin(subject: SubjectKey, redirectUri?: string): Promise<{ url: string; expiresAt: number }> {
    const s = this.slots.slot(subject);
    if (s.state === 'refused')
      throw new OAuthError(s.rule ?? 'step-up-exhausted', 'the server refused every authorization so far');
    if (this.auth.grant === 'client_credentials')
      throw new OAuthError('login-required', 'this server uses client_credentials: no browser login');
    const redirect = redirectUri ?? this.deps.gateway.redirectUri;
    try {
      s.challenge ??= await probeChallenge(this.deps.fetch, this.url);
      const prm = await discoverResource(this.deps.fetch, this.url, s.challenge);
      const issuer = prm.authorizationServers[0];
      if (!issuer)
        throw new OAuthError('no-as-metadata', 'the resource metadata names no authorization server');
      if (this.auth.issuer && this.auth.issuer !== issuer) {
        throw new OAuthError(
          'issuer-not-configured',
          `the server now names another authorization server (${hostOf(issuer)})`,
        );
      }
      await this.rebind(subject, s, issuer);
      const as = await this.metadata(issuer);
      const client = await this.clients.get(this.clientKey(redirect), as, redirect);
      // The row was read again just now (rebind): a step-up seen by any process is asked for.
      const scopes =
        selectScopes(s.challenge, prm, as, s.pendingScopes ?? s.requested, this.auth.scopes) ?? [];
      const r = await startAuthorization(
        as,
        client,
        { server: this.server, subject, issuer, resource: prm.resource, scopes },
        this.deps.box,
        this.deps.gateway.flowTtlSeconds * 1000,
        this.deps.now(),
      );
      this.log.info('oauth.login_started', { issuer: hostOf(issuer) });
      return { url: r.url, expiresAt: r.exp };
    } catch (e) {
      if (e instanceof OAuthError) this.log.warn('oauth.refused', { rule: e.rule });
      throw e;
    }
  }

  /** Whose client registration a redirect URI is: the gateway's callback, or the CLI's loopback one. */
  private clientKey(redirectUri: string): string {
    return redirectUri === this.deps.gateway.redirectUri ? this.server : `${this.server}#cli`;
  }

  /** SEP-2352: a new issuer drops the registrations and the subject's token of the old one. */
  private async rebind(subject: SubjectKey, s: Slot, issuer: string): Promise<void> {
    await this.clients.rebind(this.server, issuer);
    await this.slots.read(subject, s);
    if (s.token && s.token.issuer !== issuer) {
      await this.drop(subject, s);
      this.log.info('oauth.issuer_changed', { issuer: hostOf(issuer) });
    }
  }

  /** Deletes the subject's stored token, here and in the store. */
  private async drop(subject: SubjectKey, s: Slot): Promise<void> {
    await this.deps.credentials.deleteToken(this.server, subject);
    s.token = undefined;
    s.version = undefined;
  }

  /** The callback's second half, once the state is opened and claimed: redeem and store. */
  async finish(pending: PendingFlow, code: string): Promise<void> {
    const s = this.slots.slot(pending.subject);
    const as = await this.metadata(pending.issuer);
    const client = await this.clients.get(this.clientKey(pending.redirectUri), as, pending.redirectUri);
    if (client.clientId !== pending.clientId)
      throw new OAuthError('state-invalid', 'the sign-in was started with another client');
    const t = await redeemCode(this.deps.fetch, as, client, pending, code, this.deps.now());
    // A completed login ends a refusal; the row read back says whether a step-up still waits.
    if (s.state === 'refused') need(s, 'login-required');
    // The newest sign-in wins over whatever is stored, whichever process (or CLI) wrote it.
    await this.slots.write(pending.subject, s, t, { asked: pending.scopes }, 'replace');
    if (!s.token) throw new OAuthError('token-failed', 'the token could not be stored');
    this.log.info('oauth.login', { issuer: hostOf(pending.issuer) });
    this.emit(pending.subject);
  }

  async logout(subject?: SubjectKey): Promise<void> {
    const subjects =
      subject !== undefined
        ? [subject]
        : (await this.deps.credentials.listTokens(this.server)).map((r) => r.subject);
    for (const sub of subjects) {
      const s = this.slots.slot(sub);
      await this.slots.read(sub, s).catch(() => {});
      const t = s.token;
      if (t) {
        try {
          const as = await this.metadata(t.issuer);
          const client = as.revocationEndpoint
            ? await this.clients.forToken(this.server, as, this.deps.gateway.redirectUri, t.clientId)
            : undefined;
          if (client) await revoke(this.deps.fetch, as, client, t);
        } catch (e) {
          this.log.warn('oauth.revoke_failed', { rule: e instanceof OAuthError ? e.rule : 'error' });
        }
      }
      await this.deps.credentials.deleteToken(this.server, sub);
      this.slots.forget(sub);
      this.log.info('oauth.logout', {});
      this.emit(sub);
    }
    if (subject === undefined) await this.deps.credentials.deleteToken(this.server);
  }

  onChange(listener: (subject: SubjectKey) => void): void {
    this.listeners.push(listener);
  }

  private emit(subject: SubjectKey): void {
    for (const l of this.listeners) l(subject);
  }
}

/**
 * The server's 401 challenge to a request without a token: its `scope` is what the first
 * authorization asks for (2026-07-28 scope selection), and its `resource_metadata` where PRM is.
 */
export async function probeChallenge(f: Fetch, url: string): Promise<Challenge | undefined> {
  try {
    const res = await f(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":0,"method":"ping"}',
    });
    await res.body?.cancel().catch(() => {});
    return res.status === 401 ? bearerChallenge(res.headers.get('www-authenticate')) : undefined;
  } catch {
    // Unreachable now: discovery says so in its own words.
    return undefined;
  }
}
