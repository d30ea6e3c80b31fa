/**
 * The upstream side of #19: an Upstream instance's fetch, wrapped with its server's credentials
 * for one subject ('' = the deployment's identity; a principal key for a `user` server's own
 * instance). Everything else of the deps is shared (a reload's new gateway settings reach every
 * instance), so the wrapper is a child object that overrides `platform` alone.
 */
import type { ServerConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import { authRefusal, UpstreamAuthRequired } from './call-errors.js';
import { authFetch, authPost } from './oauth/auth-fetch.js';
import type { SubjectKey } from './oauth/types.js';
import type { UpstreamDeps } from './types.js';

export function withUpstreamAuth(
  deps: UpstreamDeps,
  config: ServerConfig,
  subject: SubjectKey,
): UpstreamDeps {
  const auth = deps.auths?.get(config.name);
  if (!auth || !config.url) return deps;
  const platform = {
    ...deps.platform,
    fetch: authFetch(deps.platform.fetch, { target: config.url, auth, subject }),
    // Where the direct caller has a POST of its own (Node), its requests carry the credentials too.
    ...(deps.platform.postJson ? { postJson: authPost(deps.platform.postJson, { auth, subject }) } : {}),
  };
  return Object.create(deps, { platform: { value: platform, enumerable: true } }) as UpstreamDeps;
}

/** Whose credentials an instance of this server uses: the caller's in mode `user`, else the deployment's. */
export function authSubject(config: ServerConfig, principalKey: string): SubjectKey {
  return config.auth?.mode === 'user' || config.auth?.mode === 'user-key' ? principalKey : '';
}

/**
 * A refusal by the server (HTTP 401/403, or ERR_UPSTREAM_AUTH) while the credentials need a login or were refused
 * for good: the error that says so, with its rule, instead of the bare HTTP refusal.
 */
export function authAware(
  e: unknown,
  deps: UpstreamDeps,
  config: ServerConfig,
  subject: SubjectKey,
): unknown {
  if (e instanceof UpstreamAuthRequired) return e;
  const refused = e instanceof ManifoldError ? e.code === 'ERR_UPSTREAM_AUTH' : authRefusal(e) !== undefined;
  if (!refused) return e;
  const auth = deps.auths?.get(config.name);
  const st = auth?.state(subject);
  if (!st || (st.state !== 'needs-login' && st.state !== 'refused')) return e;
  return new UpstreamAuthRequired(config.name, st.rule ?? 'login-required');
}
