/**
 * Who is calling. Every request is authenticated again; a session id alone grants nothing.
 * `key` is a stable identity for binding sessions and cursors to their owner.
 */
export interface Principal {
  subject: string;
  tenant: string;
  /** Globs over exposed tool names, or '*' when auth is off (everything config exposes). */
  grants: readonly string[] | '*';
  key: string;
}

/** The principal of a gateway that runs without auth (loopback only, or `auth: false`). */
export const anonymousPrincipal: Principal = Object.freeze({
  subject: 'anonymous',
  tenant: 'default',
  grants: '*',
  key: 'anonymous',
});

export type Authenticator = (request: Request) => Promise<Principal>;

/** No auth configured: everyone is the anonymous principal. */
export const noAuth: Authenticator = async () => anonymousPrincipal;
