/**
 * Error classification for JWT verification: the key-source failure type and the mapping of
 * whatever jwtVerify throws onto the two public outcomes (401 ERR_UNAUTHORIZED, 503 ERR_AUTH_UNAVAILABLE).
 */
import { errors } from 'jose';
import { ManifoldError } from '../errors.js';

/**
 * Why a key source could not be used right now (network, timeout, non-200, redirect, bad body,
 * egress refusal, or a recent such failure). Becomes ERR_AUTH_UNAVAILABLE (503), never 401: the
 * token may be perfectly good, we just cannot tell.
 */
export class KeySourceError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'KeySourceError';
  }
}

/** Maps whatever jwtVerify threw onto the two public outcomes. */
export function classify(e: unknown): ManifoldError {
  if (e instanceof KeySourceError) {
    return new ManifoldError('ERR_AUTH_UNAVAILABLE', 'authorization keys unavailable', {
      data: { reason: e.reason },
    });
  }
  if (e instanceof errors.JOSEError) {
    // Defensive: with our fetch these should not surface, but a broken remote set is still the key
    // source's fault, not the token's.
    if (e instanceof errors.JWKSTimeout || e instanceof errors.JWKSInvalid) {
      return new ManifoldError('ERR_AUTH_UNAVAILABLE', 'authorization keys unavailable', {
        data: { reason: e.code },
      });
    }
    const claim = e instanceof errors.JWTClaimValidationFailed ? e.claim : undefined;
    return unauthorized(e.code, claim);
  }
  // Anything else (a TypeError from a malformed key or header deep inside jose, say) is still the
  // token's problem as far as the caller is concerned: 401, never 500 (A9).
  return unauthorized(e instanceof Error ? e.name : 'ERR_JWT_INVALID');
}

export function unauthorized(reason: string, claim?: string): ManifoldError {
  return new ManifoldError('ERR_UNAUTHORIZED', 'invalid token', {
    data: claim === undefined ? { reason } : { reason, claim },
  });
}
