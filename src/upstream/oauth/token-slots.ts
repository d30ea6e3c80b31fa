/**
 * The tokens of one server, per subject (#19): the in-memory slot (state, challenge, step-up
 * counts, the refresh in flight) over the sealed row in the CredentialStore, which is the truth
 * that every process sharing the store (instances, the CLI) reads. A row opens only under its own
 * (server, subject, issuer) AAD. Beside the token, the row holds the scopes its authorization
 * asked for and the union a scope step-up waits for, so that a login anywhere asks for every
 * scope asked so far.
 *
 * Writes are ordered by the row's version, which the store assigns: a login takes the next one
 * over whatever is stored (the newest sign-in wins, wherever it finished); a refresh or a re-issue
 * writes only over the version it continues, so it never undoes a login that landed meanwhile.
 * A slot reads its row again when it is older than REREAD_MS, so a token written by another
 * process is in use here within that long.
 */
import type { Logger } from '../../lib/log.js';
import type { CredentialStore } from '../../store/credentials-types.js';
import type { SecretBox } from './box.js';
import { hostOf } from './http.js';
import type { AuthState, Challenge, OAuthRule, SubjectKey, TokenSet } from './types.js';

/**
 * How long a slot trusts its last read of the row. The same bound as the re-trust poll: a login
 * in the CLI or on another instance reaches this one within it, at one store read per subject
 * per window, never one per request.
 */
export const REREAD_MS = 2000;

export interface Slot {
  token?: TokenSet;
  version?: number;
  state: AuthState;
  rule?: OAuthRule;
  challenge?: Challenge;
  /** The scopes the current token's authorization asked for (a step-up unions from them). */
  requested: string[];
  /** The union a step-up needs (SEP-2350), for the next authorization; stored with the token. */
  pendingScopes?: string[];
  /** Re-authorizations per challenged scope set. */
  stepUps: Map<string, number>;
  /** The Authorization whose 403 last asked for a step-up: refused again, it is the same step-up. */
  steppedUp?: string;
  flight?: Promise<boolean>;
  /** The access token a 401 made this gateway renew: refused again, it is not renewed again. */
  renewed?: string;
  /** When the current token was obtained, by whichever process (its lifetime bounds the refresh skew). */
  obtainedAt?: number;
  /** When the row was last read; undefined until the first read succeeds. */
  readAt?: number;
  /** The re-read that requests finding the row stale share. */
  reading?: Promise<void>;
  /** Reads started and the latest one applied: an older read never overwrites a newer one. */
  reads: number;
  applied: number;
}

/** What a token's row says besides the token: the scopes asked for, and a step-up's union. */
export interface AskedScopes {
  asked: readonly string[];
  stepUp?: readonly string[];
}

/** Over the version a refresh continues (undefined: no row yet), or over whatever a login finds. */
export type WriteRule = { expect: number | undefined } | 'replace';

export const union = (a: readonly string[], b: readonly string[]) => [...new Set([...a, ...b])];

export function need(s: Slot, rule: OAuthRule, state: AuthState = 'needs-login'): void {
  s.state = state;
  s.rule = rule;
}

/** The sealed payload's scope list, or undefined when absent or not a list of strings. */
function scopesOf(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((x) => typeof x === 'string') ? [...v] : undefined;
}

/** How many times a step-up's union is merged into a row that other writers keep changing. */
const STEP_UP_WRITES = 3;

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

  /** A new slot for the subject (after a logout), known to have no row as of now. */
  forget(subject: SubjectKey): void {
    const s = TokenSlots.empty();
    s.readAt = this.deps.now();
    this.slots.set(subject, s);
  }

  slot(subject: SubjectKey): Slot {
    let s = this.slots.get(subject);
    if (!s) {
      s = TokenSlots.empty();
      this.slots.set(subject, s);
    }
    return s;
  }

  private static empty(): Slot {
    return {
      state: 'needs-login',
      rule: 'login-required',
      requested: [],
      stepUps: new Map(),
      reads: 0,
      applied: 0,
    };
  }

  private aad(subject: SubjectKey, issuer: string): string {
    return `${this.server}\0${subject}\0${issuer}`;
  }

  /** The subject's row, read (again) from the store now. */
  async read(subject: SubjectKey, s: Slot): Promise<void> {
    const seq = ++s.reads;
    const row = await this.deps.credentials.getToken(this.server, subject);
    const opened = row ? await this.deps.box.open(row.sealed, this.aad(subject, row.issuer)) : undefined;
    // A read that started before another one finished says less than it: dropped.
    if (seq < s.applied) return;
    s.applied = seq;
    s.readAt = this.deps.now();
    s.version = row?.version;
    const o = opened as
      | {
          accessToken?: unknown;
          refreshToken?: unknown;
          tokenType?: unknown;
          obtainedAt?: unknown;
          clientId?: unknown;
          asked?: unknown;
          stepUp?: unknown;
        }
      | undefined;
    if (!row || typeof o?.accessToken !== 'string') {
      // No row to keep a step-up's union in: this process keeps it for the next login.
      s.token = undefined;
      if (s.state === 'ready') need(s, 'login-required');
      return;
    }
    // When its writer obtained it, so that every process renews it at the same point of its life.
    s.obtainedAt =
      typeof o.obtainedAt === 'number' && Number.isFinite(o.obtainedAt) ? o.obtainedAt : undefined;
    s.token = {
      issuer: row.issuer,
      resource: row.resource,
      accessToken: o.accessToken,
      tokenType: typeof o.tokenType === 'string' ? o.tokenType : 'Bearer',
      ...(typeof o.refreshToken === 'string' ? { refreshToken: o.refreshToken } : {}),
      ...(row.expiresAt !== undefined ? { expiresAt: row.expiresAt } : {}),
      scope: row.scope,
      ...(typeof o.clientId === 'string' ? { clientId: o.clientId } : {}),
    };
    // A row written before the asked scopes were stored: what was granted is the best guess.
    s.requested = scopesOf(o.asked) ?? row.scope;
    s.pendingScopes = scopesOf(o.stepUp);
    // A refusal outlasts a re-read; a step-up waits for a login that asks for its union.
    if (s.state === 'refused') return;
    if (s.pendingScopes) need(s, 'login-required');
    else {
      s.state = 'ready';
      s.rule = undefined;
    }
  }

  /** The slot, its row read again first when never read or older than REREAD_MS. */
  async fresh(subject: SubjectKey): Promise<Slot> {
    const s = this.slot(subject);
    if (s.readAt !== undefined && this.deps.now() - s.readAt < REREAD_MS) return s;
    s.reading ??= this.read(subject, s).finally(() => {
      s.reading = undefined;
    });
    try {
      await s.reading;
    } catch (e) {
      // Never read: nothing to go on. Read before: the token held is used until the next window.
      if (s.readAt === undefined) throw e;
      s.readAt = this.deps.now();
      this.log.warn('oauth.store_unreadable', { error: String(e).slice(0, 200) });
    }
    return s;
  }

  /** The row of a token obtained at `obtainedAt` (this process's clock, as its `expiresAt`). */
  private async row(subject: SubjectKey, t: TokenSet, scopes: AskedScopes, obtainedAt: number | undefined) {
    const sealed = await this.deps.box.seal(
      {
        accessToken: t.accessToken,
        ...(obtainedAt !== undefined ? { obtainedAt } : {}),
        ...(t.refreshToken ? { refreshToken: t.refreshToken } : {}),
        tokenType: t.tokenType,
        ...(t.clientId !== undefined ? { clientId: t.clientId } : {}),
        asked: [...scopes.asked],
        ...(scopes.stepUp ? { stepUp: [...scopes.stepUp] } : {}),
      },
      this.aad(subject, t.issuer),
    );
    return {
      issuer: t.issuer,
      resource: t.resource,
      sealed,
      scope: t.scope,
      ...(t.expiresAt !== undefined ? { expiresAt: t.expiresAt } : {}),
    };
  }

  /**
   * Stores a token by `rule` (see WriteRule) and reads the row back, so this process uses whatever
   * the store kept: false when another writer's token was kept instead.
   */
  async write(
    subject: SubjectKey,
    s: Slot,
    t: TokenSet,
    scopes: AskedScopes,
    rule: WriteRule,
  ): Promise<boolean> {
    const now = this.deps.now();
    const row = await this.row(subject, t, scopes, now);
    let ok = true;
    if (rule === 'replace') await this.deps.credentials.replaceToken(this.server, subject, row, now);
    else ok = await this.deps.credentials.putToken(this.server, subject, row, rule.expect, now);
    await this.read(subject, s);
    if (!ok) this.log.info('oauth.token_superseded', { issuer: hostOf(t.issuer) });
    return ok;
  }

  /**
   * Adds `scopes` to the union a step-up waits for, in the row of the token the server refused
   * (`refused`, the Authorization it was sent with), so that the next login, in this process or
   * any other, asks for it. Nothing is written when the stored token is another one by now: the
   * caller sends the request again with it.
   */
  async stepUp(
    subject: SubjectKey,
    s: Slot,
    scopes: readonly string[],
    refused: string | null,
  ): Promise<void> {
    for (let i = 0; i < STEP_UP_WRITES; i++) {
      await this.read(subject, s);
      const t = s.token;
      if (!t) break;
      if (refused !== `Bearer ${t.accessToken}`) return;
      const stepUp = union(s.pendingScopes ?? [], scopes);
      const row = await this.row(subject, t, { asked: s.requested, stepUp }, s.obtainedAt);
      const now = this.deps.now();
      if (await this.deps.credentials.putToken(this.server, subject, row, s.version, now)) {
        await this.read(subject, s);
        return;
      }
    }
    // No row to hold it (or a row that kept changing): this process remembers it.
    s.pendingScopes = union(s.pendingScopes ?? [], scopes);
    if (s.state !== 'refused') need(s, 'login-required');
  }
}
