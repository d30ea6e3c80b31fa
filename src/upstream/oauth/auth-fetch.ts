/**
 * The one seam where an upstream's credentials meet its requests (#19): a fetch that
 * adds what the server's UpstreamAuth says (a bearer token, or a re-read static header) to
 * requests for the server's own origin, and runs the 401/403 loop once per request. Discovery,
 * registration and token requests never go through it: they use the unwrapped fetch, so they
 * never carry the bearer. Cross-origin redirects are still the base fetch's to follow, and it
 * drops `authorization` on such a hop.
 */
import type { PostJson } from '../../platform.js';
import { checksEgress, egressPolicyOf } from '../wire/egress-fetch.js';
import type { AuthState, Fetch, OAuthRule, SubjectKey } from './types.js';

/** A server's credentials, per subject ('' = the deployment's identity). See manager.ts. */
export interface UpstreamAuth {
  readonly server: string;
  /** Headers to add to a request now; may refresh or re-issue first; `{}` when a login is needed. */
  authorize(subject: SubjectKey): Promise<Record<string, string>>;
  /** The server refused: `'retry'` when something changed (a refresh, a re-read secret), else `'stop'`. */
  onRefused(
    subject: SubjectKey,
    status: 401 | 403,
    wwwAuthenticate: string | null,
    /** The `Authorization` the refused request carried (null: none), to tell a stale token from the current one. */
    sent?: string | null,
  ): Promise<'retry' | 'stop'>;
  state(subject: SubjectKey): {
    state: AuthState;
    rule?: OAuthRule;
    issuer?: string;
    scopes?: string[];
    expiresAt?: number;
  };
  beginLogin(subject: SubjectKey, redirectUri?: string): Promise<{ url: string; expiresAt: number }>;
  /** Whether a token is stored for the subject now (read afresh: another instance may have signed in). */
  hasToken?(subject: SubjectKey): Promise<boolean>;
  logout(subject?: SubjectKey): Promise<void>;
  /** A subject's credentials changed (a login, a logout): its upstream instances reopen. */
  onChange(listener: (subject: SubjectKey) => void): void;
}

function urlOf(input: Parameters<Fetch>[0]): string {
  if (typeof input === 'string') return input;
  return input instanceof URL ? input.href : input.url;
}

/** A body that can be sent twice (what the SDK and the direct wire send): not a stream. */
function resendable(body: unknown): boolean {
  return body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array;
}

/**
 * @example
 * const f = authFetch(platform.fetch, { target: 'https://mcp.example.com/mcp', auth, subject: '' });
 * await f('https://mcp.example.com/mcp', { method: 'POST', body }); // Authorization: Bearer …
 * await f('https://other.example.com/x'); // sent as it is, no credentials
 */
export function authFetch(
  base: Fetch,
  o: { target: string; auth: UpstreamAuth; subject: SubjectKey },
): Fetch {
  const origin = new URL(o.target).origin;
  const { auth, subject } = o;
  const wrapped = (async (input: Parameters<Fetch>[0], init?: RequestInit) => {
    let own = false;
    try {
      own = new URL(urlOf(input)).origin === origin;
    } catch {
      own = false;
    }
    if (!own) return base(input, init);
    let sent: string | null = null;
    const send = async () => {
      const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
      for (const [k, v] of Object.entries(await auth.authorize(subject))) headers.set(k, v);
      sent = headers.get('authorization');
      return base(input, { ...init, headers });
    };
    const first = await send();
    if (first.status !== 401 && first.status !== 403) return first;
    const decision = await auth.onRefused(subject, first.status, first.headers.get('www-authenticate'), sent);
    // At most one retry per request; a body that cannot be sent again leaves the refusal standing.
    if (decision !== 'retry' || !resendable(init?.body)) return first;
    await first.body?.cancel().catch(() => {});
    return send();
  }) as Fetch;
  // transports.ts reads the policy off the function: the wrapper checks what its base checks.
  const policy = egressPolicyOf(base);
  return policy ? checksEgress(wrapped, policy) : wrapped;
}

/**
 * `authFetch` for the direct caller's `Platform.postJson`: its requests go to the server's own
 * URL, so each carries the credentials, with the same one retry after a 401/403.
 */
export function authPost(base: PostJson, o: { auth: UpstreamAuth; subject: SubjectKey }): PostJson {
  const { auth, subject } = o;
  return async (request) => {
    let sent: string | null = null;
    const send = async () => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(request.headers)) headers[k.toLowerCase()] = v;
      for (const [k, v] of Object.entries(await auth.authorize(subject))) headers[k.toLowerCase()] = v;
      sent = headers.authorization ?? null;
      return base({ ...request, headers });
    };
    const first = await send();
    if (first.status !== 401 && first.status !== 403) return first;
    const decision = await auth.onRefused(subject, first.status, first.headers.get('www-authenticate'), sent);
    if (decision !== 'retry') return first;
    await first.body?.cancel().catch(() => {});
    return send();
  };
}
