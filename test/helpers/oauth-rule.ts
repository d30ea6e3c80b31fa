import { OAuthError, type OAuthRule } from '../../src/upstream/oauth/types.js';

/** The rule of the OAuthError `p` rejects with; anything else (or no rejection) fails the test. */
export async function rule(p: Promise<unknown>): Promise<OAuthRule> {
  try {
    await p;
  } catch (e) {
    if (e instanceof OAuthError) return e.rule;
    throw e;
  }
  throw new Error('expected an OAuthError');
}
