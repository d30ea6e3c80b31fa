import type { AuthConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import { extractBearer, principalFromClaims } from './grants.js';
import { createVerifier } from './jwt.js';
import type { Authenticator } from './principal.js';

/**
 * Every request is authenticated again (SECURITY A4): the bearer token from the Authorization
 * header only (A3), verified by jose, turned into a Principal. A session id grants nothing.
 *
 * @example const authenticate = createAuthenticator(config.gateway.auth, platform.fetch)
 */
export function createAuthenticator(auth: AuthConfig, fetch: typeof globalThis.fetch): Authenticator {
  const verify = createVerifier({ auth, fetch });
  return async function authenticate(request) {
    const { token, presented } = extractBearer(request);
    if (!token) {
      throw new ManifoldError('ERR_UNAUTHORIZED', presented ? 'invalid token' : 'authentication required', {
        data: { presented },
      });
    }
    return principalFromClaims(await verify(token), auth);
  };
}
