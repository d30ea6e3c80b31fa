/**
 * The end of a browser login (#19): the callback's state opened, claimed once, and redeemed by
 * the manager of the server it names.
 */
import { sha256Hex } from '../../guards/canonical-json.js';
import type { UpstreamAuth } from './auth-fetch.js';
import { openCallback } from './flow.js';
import { OAuthManager } from './manager.js';
import { OAuthError, type SubjectKey } from './types.js';

/** A claim on a state outlives the state by this much (clock skew between instances). */
const CLAIM_GRACE_MS = 10 * 60_000;

/**
 * Completes a login for whichever server the state names (the callback route and the CLI): the
 * state is opened and checked (RFC 9207 iss table, `error`), claimed once in the store so a replay
 * is refused on any instance, then the code is redeemed.
 */
export async function completeLogin(
  registry: ReadonlyMap<string, UpstreamAuth>,
  query: URLSearchParams,
): Promise<{ server: string; subject: SubjectKey }> {
  const any = [...registry.values()].find((a): a is OAuthManager => a instanceof OAuthManager);
  if (!any) throw new OAuthError('state-invalid', 'no server signs in with OAuth here');
  const now = any.deps.now();
  const { pending, code } = await openCallback(query, any.deps.box, now);
  const m = registry.get(pending.server);
  if (!(m instanceof OAuthManager))
    throw new OAuthError('state-invalid', 'the sign-in names no OAuth server');
  const state = query.get('state') ?? '';
  const first = await m.deps.claims.claim(
    `oauth-state:${await sha256Hex(state)}`,
    pending.exp + CLAIM_GRACE_MS,
    now,
  );
  if (!first) throw new OAuthError('state-invalid', 'this sign-in link was already used');
  await m.finish(pending, code);
  return { server: pending.server, subject: pending.subject };
}
