/**
 * Who is calling. Every request is authenticated again; a session id alone grants nothing.
 * `key` is a stable identity for binding sessions and cursors to their owner.
 */
export interface Principal {
  subject: string;
  tenant: string;
  /** Globs over exposed tool names, or '*' when auth is off (everything config exposes). */
  grants: readonly string[] | '*';
  /** The tenant's cap from config: a tool must match `grants` AND `cap`. Absent: no cap. */
  cap?: readonly string[];
  /** Holds the scope `manifold:admin` (health detail, metrics). */
  admin?: boolean;
  /** The token's scopes (policy rules read `principal.scopes`, #51). */
  scopes?: readonly string[];
  /** The token's verified claims (policy rules read `principal.claims`, #51). */
  claims?: Readonly<Record<string, unknown>>;
  /** Stable identity of the caller (tenant + subject): owns sessions. */
  key: string;
  /** Identity of what the caller can see (key + grants + cap): cursors and later pages bind to it. */
  viewKey: string;
  /**
   * What the caller can see without who it is (tenant, grants, cap, admin, profile): principals
   * with the same one share their views and first tools/list page. Absent: `viewKey`.
   */
  shareKey?: string;
  /** The profile its token is bound to (`auth.profileClaim`), if any. */
  boundProfile?: string;
  /**
   * The profile this request is served (#17), from the path `/mcp/<profile>` or the token, and
   * the servers it shows (absent: every server). `key` and `viewKey` then name the profile too,
   * so sessions, request states and cursors of one profile never serve another.
   */
  profile?: string;
  servers?: ReadonlySet<string>;
  /**
   * The token's id (#52): its `jti`, or a digest of the token when it has none; what the admin API
   * lists and revokes. Absent without auth.
   */
  tokenId?: string;
  /** When the token expires (ms since the epoch). */
  tokenExpiresAt?: number;
}

/** The key views are shared under: `shareKey`, or `viewKey` where there is none. */
export const shareKeyOf = (principal: Principal): string => principal.shareKey ?? principal.viewKey;

/** The principal of a gateway that runs without auth (loopback only, or `auth: false`). */
export const anonymousPrincipal: Principal = Object.freeze({
  subject: 'anonymous',
  tenant: 'default',
  grants: '*',
  admin: true,
  key: 'anonymous',
  viewKey: 'anonymous',
});

/** The headers of a request, as much as authentication reads: a Request's, or the Node lane's. */
export interface HeaderBag {
  get(name: string): string | null;
}

export type Authenticator = (request: { readonly headers: HeaderBag }) => Promise<Principal>;

/** No auth configured: everyone is the anonymous principal. */
export const noAuth: Authenticator = async () => anonymousPrincipal;
