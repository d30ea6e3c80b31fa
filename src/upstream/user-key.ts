/**
 * A user's own key (#52): `auth: {"mode": "user-key"}` sends each caller's own personal access
 * token or API key to the server, in the configured header and format. The key is given once, on a
 * gateway page (server/http/user-key-page.ts) the caller reaches through a URL elicitation, and is
 * kept sealed per subject like a `user` server's OAuth tokens: AES-256-GCM under a key derived from
 * `gateway.oauth.secret` (SecretBox), bound to the server and the subject, in the credentials
 * store (`oauth_tokens`, issuer `user-key`). It is never logged, never shown again, never sent to
 * another server or for another subject. A 401 from the server drops it: the next call asks again.
 *
 * The page's link is sealed too: it names the server and the caller, and expires in minutes, so a
 * link can only ever store a key for the caller it was made for.
 */
import type { ServerConfig } from '../config/types.js';
import type { Logger } from '../lib/log.js';
import type { CredentialStore } from '../store/credentials-types.js';
import type { UpstreamAuth } from './oauth/auth-fetch.js';
import type { SecretBox } from './oauth/box.js';
import type { AuthState, SubjectKey } from './oauth/types.js';

/** The issuer column of a stored key (the credentials store also holds OAuth tokens). */
export const USER_KEY_ISSUER = 'user-key';
/** How long the page's link stays valid. */
export const KEY_LINK_TTL_MS = 10 * 60_000;
/** The longest key accepted. */
export const MAX_KEY_LENGTH = 8192;

interface LinkBody {
  k: 'user-key-link';
  s: string;
  p: SubjectKey;
  x: number;
}

export interface UserKeyOptions {
  credentials: CredentialStore;
  box: SecretBox;
  log: Logger;
  now(): number;
  /** Where the gateway's pages are reached (its origin). */
  base(): string;
}

export class UserKeyAuth implements UpstreamAuth {
  readonly server: string;
  private readonly header: string;
  private readonly format: string;
  /** What is known of each subject's key: a cache of the store, read afresh by `hasToken`. */
  private readonly known = new Map<SubjectKey, 'ready' | 'needs-login'>();
  private readonly listeners: ((subject: SubjectKey) => void)[] = [];

  constructor(
    config: ServerConfig,
    private readonly o: UserKeyOptions,
  ) {
    this.server = config.name;
    this.header = config.auth?.header ?? 'Authorization';
    this.format = config.auth?.format ?? 'Bearer {key}';
  }

  private aad(subject: SubjectKey): string {
    return `${this.server}\0${subject}\0${USER_KEY_ISSUER}`;
  }

  private async read(subject: SubjectKey): Promise<string | undefined> {
    const stored = await this.o.credentials.getToken(this.server, subject);
    if (stored?.issuer !== USER_KEY_ISSUER) return undefined;
    const key = await this.o.box.open(stored.sealed, this.aad(subject));
    return typeof key === 'string' ? key : undefined;
  }

  async authorize(subject: SubjectKey): Promise<Record<string, string>> {
    const key = subject === '' ? undefined : await this.read(subject);
    this.known.set(subject, key === undefined ? 'needs-login' : 'ready');
    return key === undefined ? {} : { [this.header]: this.format.replace('{key}', key) };
  }

  /** The server refused the key: it is dropped (never tried again), and the caller is asked anew. */
  async onRefused(subject: SubjectKey, status: 401 | 403): Promise<'retry' | 'stop'> {
    if (status === 401 && subject !== '') {
      const dropped = await this.o.credentials.deleteToken(this.server, subject);
      this.known.set(subject, 'needs-login');
      if (dropped > 0) {
        this.o.log.warn('user_key.refused', {
          server: this.server,
          message: 'the server refused a key: it was dropped',
        });
        for (const l of this.listeners) l(subject);
      }
    }
    return 'stop';
  }

  state(subject: SubjectKey): { state: AuthState; rule?: 'login-required' } {
    const known = this.known.get(subject) ?? 'needs-login';
    return known === 'ready' ? { state: 'ready' } : { state: 'needs-login', rule: 'login-required' };
  }

  async hasToken(subject: SubjectKey): Promise<boolean> {
    const has = (await this.read(subject)) !== undefined;
    this.known.set(subject, has ? 'ready' : 'needs-login');
    return has;
  }

  /** The page where `subject` gives their key, behind a link sealed for them and this server. */
  async beginLogin(subject: SubjectKey): Promise<{ url: string; expiresAt: number }> {
    const expiresAt = this.o.now() + KEY_LINK_TTL_MS;
    const body: LinkBody = { k: 'user-key-link', s: this.server, p: subject, x: expiresAt };
    const token = await this.o.box.seal(body, 'user-key-link');
    return {
      url: `${this.o.base()}/keys/${encodeURIComponent(this.server)}?t=${encodeURIComponent(token)}`,
      expiresAt,
    };
  }

  /** The caller a page link was made for, or undefined for a link that is altered, foreign or expired. */
  async openLink(token: unknown): Promise<SubjectKey | undefined> {
    if (typeof token !== 'string') return undefined;
    const body = (await this.o.box.open(token, 'user-key-link')) as Partial<LinkBody> | undefined;
    if (body?.k !== 'user-key-link' || body.s !== this.server || typeof body.p !== 'string') return undefined;
    if (typeof body.x !== 'number' || body.x <= this.o.now() || body.p === '') return undefined;
    return body.p;
  }

  /** Stores `key` for `subject`, sealed; replaces any key stored before. */
  async saveKey(subject: SubjectKey, key: string): Promise<void> {
    const sealed = await this.o.box.seal(key, this.aad(subject));
    await this.o.credentials.replaceToken(
      this.server,
      subject,
      { issuer: USER_KEY_ISSUER, resource: '', sealed, scope: [] },
      this.o.now(),
    );
    this.known.set(subject, 'ready');
    for (const l of this.listeners) l(subject);
  }

  async logout(subject?: SubjectKey): Promise<void> {
    await this.o.credentials.deleteToken(this.server, subject);
    if (subject === undefined) this.known.clear();
    else this.known.set(subject, 'needs-login');
  }

  onChange(listener: (subject: SubjectKey) => void): void {
    this.listeners.push(listener);
  }
}
