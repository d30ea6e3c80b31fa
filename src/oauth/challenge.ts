import type { Challenge } from './types.js';

/** Every challenge of a WWW-Authenticate header (RFC 9110 §11.6.1). Junk never throws. */
export function parseChallenges(header: string | null): Challenge[] {
  void header;
  throw new Error('todo');
}

/** The Bearer challenge of a WWW-Authenticate header, if any (RFC 6750 §3, RFC 9728 §5.1). */
export function bearerChallenge(header: string | null): Challenge | undefined {
  return parseChallenges(header).find((c) => c.scheme === 'bearer');
}
