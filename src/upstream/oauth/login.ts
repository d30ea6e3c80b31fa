/**
 * The two ends of a browser login that need no manager state (#19): the server's own challenge,
 * probed when a login begins before any request saw one, and the callback's completion.
 */
import { sha256Hex } from '../../guards/canonical-json.js';
import type { UpstreamAuth } from './auth-fetch.js';
import { bearerChallenge } from './challenge.js';
import { openCallback } from './flow.js';
import { OAuthManager } from './manager.js';
import { type Challenge, type Fetch, OAuthError, type SubjectKey } from './types.js';

/** A claim on a state outlives the state by this much (clock skew between instances). */
const CLAIM_GRACE_MS = 10 * 60_000;

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
