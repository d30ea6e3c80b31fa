/**
 * The tokens of one server, per subject (#19): the in-memory slot (state, challenge, step-up
 * counts, the refresh in flight) over the sealed row in the CredentialStore. A row opens only
 * under its own (server, subject, issuer) AAD; a write is compare-and-set on the row's version,
 * and the slot is read back after it, so whichever instance wrote first wins and everyone uses it.
 */
import type { Logger } from '../log.js';
import type { CredentialStore } from '../store/credentials-types.js';
import type { SecretBox } from './box.js';
import type { AuthState, Challenge, OAuthRule, SubjectKey, TokenSet } from './types.js';

export interface Slot {
  loaded?: Promise<void>;
  token?: TokenSet;
  version?: number;
  state: AuthState;
  rule?: OAuthRule;
  challenge?: Challenge;
  /** The scopes the last authorization asked for (step-up unions from them). */
  requested: string[];
  /** The union a step-up needs (SEP-2350), for the next authorization. */
  pendingScopes?: string[];
  /** Re-authorizations per challenged scope set. */
  stepUps: Map<string, number>;
  flight?: Promise<boolean>;
  /** The access token a 401 made this gateway renew: refused again, it is not renewed again. */
  renewed?: string;
  /** When this process stored the current token (its lifetime bounds the refresh skew). */
  obtainedAt?: number;
}

export const hostOf = (url: string) => {
  try {
    return new URL(url).host;
  } catch {
    return 'invalid';
  }
};
export const union = (a: readonly string[], b: readonly string[]) => [...new Set([...a, ...b])];

export function need(s: Slot, rule: OAuthRule, state: AuthState = 'needs-login'): void {
  s.state = state;
  s.rule = rule;
}

export class TokenSlots {
  private readonly slots = new Map<SubjectKey, Slot>();

  constructor(
    private readonly server: string,
    private readonly deps: { credentials: CredentialStore; box: SecretBox; now(): number },
    private readonly log: Logger,
  ) {}

  peek(subject: SubjectKey): Slot | undefined {
    return this.slots.get(subject);
  }

  reset(subject: SubjectKey, s: Slot): void {
    this.slots.set(subject, s);
  }

  slot(subject: SubjectKey): Slot {
    let s = this.slots.get(subject);
    if (!s) {
      s = { state: 'needs-login', rule: 'login-required', requested: [], stepUps: new Map() };
      this.slots.set(subject, s);
    }
    return s;
  }

  private aad(subject: SubjectKey, issuer: string): string {
    return `${this.server}\0${subject}\0${issuer}`;
  }

  /** The subject's row, read (again) from the store. */
  async read(subject: SubjectKey, s: Slot): Promise<void> {
    const row = await this.deps.credentials.getToken(this.server, subject);
    s.version = row?.version;
    const opened = row ? await this.deps.box.open(row.sealed, this.aad(subject, row.issuer)) : undefined;
    const o = opened as { accessToken?: unknown; refreshToken?: unknown; tokenType?: unknown } | undefined;
    if (!row || typeof o?.accessToken !== 'string') {
      s.token = undefined;
      if (s.state === 'ready') need(s, 'login-required');
      return;
    }
    s.token = {
      issuer: row.issuer,
      resource: row.resource,
      accessToken: o.accessToken,
      tokenType: typeof o.tokenType === 'string' ? o.tokenType : 'Bearer',
      ...(typeof o.refreshToken === 'string' ? { refreshToken: o.refreshToken } : {}),
      ...(row.expiresAt !== undefined ? { expiresAt: row.expiresAt } : {}),
      scope: row.scope,
    };
    // A step-up still waiting for its login, or a refusal, outlasts a re-read.
    if (s.state !== 'refused' && s.pendingScopes === undefined) {
      s.state = 'ready';
      s.rule = undefined;
    }
  }

  load(subject: SubjectKey): Promise<void> {
    const s = this.slot(subject);
    s.loaded ??= this.read(subject, s).catch((e) => {
      s.loaded = undefined;
      throw e;
    });
    return s.loaded;
  }

  /** Stores a token under compare-and-set; when another instance wrote first, theirs is kept. */
  async write(subject: SubjectKey, s: Slot, t: TokenSet): Promise<void> {
    const sealed = await this.deps.box.seal(
      {
        accessToken: t.accessToken,
        ...(t.refreshToken ? { refreshToken: t.refreshToken } : {}),
        tokenType: t.tokenType,
      },
      this.aad(subject, t.issuer),
    );
    const row = {
      issuer: t.issuer,
      resource: t.resource,
      sealed,
      scope: t.scope,
      ...(t.expiresAt !== undefined ? { expiresAt: t.expiresAt } : {}),
    };
    const ok = await this.deps.credentials.putToken(this.server, subject, row, s.version, this.deps.now());
    await this.read(subject, s);
    if (ok) s.obtainedAt = this.deps.now();
    if (!ok) this.log.info('oauth.token_superseded', { issuer: hostOf(t.issuer) });
  }
}
