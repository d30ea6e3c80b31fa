/**
 * The remote JWK Set source (`auth.jwksUrl`): jose's createRemoteJWKSet behind our own fetch,
 * which refuses redirects and non-200 answers, caps and time-bounds the body read, and adds a
 * failure cooldown.
 */

import { createRemoteJWKSet, customFetch, type FetchImplementation, type JWTVerifyGetKey } from 'jose';
import type { AuthConfig } from '../config/types.js';
import { describeError } from '../errors.js';
import { onAbort } from '../lib/cancellation.js';
import { isObject } from '../lib/json.js';
import { readTextCapped } from '../lib/read-capped.js';
import { KeySourceError } from './jwt-errors.js';

const DEFAULT_JWKS_COOLDOWN_SECONDS = 30;
const DEFAULT_JWKS_TIMEOUT_MS = 5000;
/** A11: "within a bounded time" means bounded by config too, not just by default. */
const MAX_JWKS_TIMEOUT_MS = 60_000;
/** A JWK Set is a few KiB; anything larger than this is not one (and is not held in memory). */
const MAX_JWKS_BYTES = 512 * 1024;

/** RFC 7517 §5: an object whose `keys` is an array of JWK objects (what jose's isJwkSet accepts). */
export function isJwkSetShape(v: unknown): v is { keys: Record<string, unknown>[] } {
  const keys = isObject(v) ? v.keys : undefined;
  return Array.isArray(keys) && keys.every(isObject);
}

/**
 * The remote JWK Set. Built once per verifier, never per request: jose's cache, cooldown and
 * in-flight deduplication live inside this one object (A10).
 *
 * What jose gives us (jose/src/jwks/remote.ts):
 * - an unknown `kid` triggers a refetch only when the last successful fetch is older than the
 *   cooldown, so a new key verifies after at most one refetch and a flood of random `kid`s costs at
 *   most one fetch per cooldown;
 * - keys are refetched anyway after `cacheMaxAge` (10 min), so a key removed from the set stops
 *   verifying; if that refetch fails, tokens are 503 until it succeeds;
 * - on Node one in-flight refetch is shared by every request that waits for it. On Workers jose
 *   deliberately does not share it (it detects the runtime): Cloudflare forbids awaiting another
 *   request's I/O, so there concurrent cold requests each fetch until one lands. Only plain data (the
 *   parsed keys, timestamps) crosses requests, which Workers allow.
 *
 * What we add in the fetch we hand jose:
 * - `redirect: 'manual'` and any non-200 is a failure (A11: a JWKS is never followed through a
 *   redirect, so an open redirect on the IdP cannot point us at attacker keys);
 * - the body is read here, capped at MAX_JWKS_BYTES and bounded by jose's timeout signal, so a
 *   hanging or endless body fails within `jwksTimeoutMs` whatever the runtime's fetch does;
 * - a failure cooldown: jose's cooldown counts from the last *success*, so against a failing
 *   endpoint every unknown `kid` would refetch. After a failure we answer 503 without fetching
 *   until the cooldown has passed, keeping A10's one-fetch-per-cooldown true when the IdP is down
 *   (and not hammering it while it recovers).
 */
export function remoteSource(auth: AuthConfig, fetchImpl: typeof fetch): JWTVerifyGetKey {
  if (typeof auth.jwksUrl !== 'string') throw new TypeError('"auth.jwksUrl" must be a URL string');
  if (typeof fetchImpl !== 'function') throw new TypeError('"fetch" option must be a function');
  let url: URL;
  try {
    url = new URL(auth.jwksUrl);
  } catch {
    throw new TypeError('"auth.jwksUrl" must be an absolute URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new TypeError('"auth.jwksUrl" must be an http(s) URL');
  }
  if (url.username || url.password) throw new TypeError('"auth.jwksUrl" must not contain credentials');
  const cooldownSeconds = auth.jwksCooldownSeconds ?? DEFAULT_JWKS_COOLDOWN_SECONDS;
  if (typeof cooldownSeconds !== 'number' || !Number.isFinite(cooldownSeconds) || cooldownSeconds < 0) {
    throw new TypeError('"auth.jwksCooldownSeconds" must be a non-negative number');
  }
  const timeoutMs = auth.jwksTimeoutMs ?? DEFAULT_JWKS_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_JWKS_TIMEOUT_MS) {
    throw new TypeError(`"auth.jwksTimeoutMs" must be an integer from 1 to ${MAX_JWKS_TIMEOUT_MS}`);
  }
  const cooldownMs = cooldownSeconds * 1000;
  // jose measures its cooldown with Date.now(); ours uses the same clock so the two agree.
  let failedAt: number | undefined;

  const jwksFetch: FetchImplementation = async function jwksFetch(href, init) {
    if (failedAt !== undefined && Date.now() - failedAt < cooldownMs) {
      throw new KeySourceError('JWKS fetch failed recently; waiting for the cooldown');
    }
    try {
      const text = await bounded(init.signal, async () => {
        const response = await fetchImpl(href, { ...init, redirect: 'manual' });
        if (response.status !== 200) {
          await response.body?.cancel().catch(() => {});
          // A 3xx lands here too: with redirect 'manual' it is a plain (or opaque, status 0) answer.
          throw new KeySourceError(`JWKS endpoint answered HTTP ${response.status}`);
        }
        return readCapped(response, MAX_JWKS_BYTES);
      });
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new KeySourceError('JWKS endpoint answered something that is not JSON');
      }
      if (!isJwkSetShape(json)) {
        throw new KeySourceError('JWKS endpoint answered something that is not a JWK Set');
      }
      failedAt = undefined;
      return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } });
    } catch (e) {
      failedAt = Date.now();
      if (e instanceof KeySourceError) throw e;
      // Never the URL or the runtime's cause chain (A15): the first line of the message only.
      throw new KeySourceError(`JWKS fetch failed: ${describeError(e)}`);
    }
  };

  return createRemoteJWKSet(url, {
    cooldownDuration: cooldownMs,
    timeoutDuration: timeoutMs,
    [customFetch]: jwksFetch,
  });
}

/** Runs `work`, but settles no later than `signal` aborts, even if the runtime's fetch ignores it. */
function bounded<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  const timedOut = () => new KeySourceError('JWKS fetch timed out');
  if (signal.aborted) return Promise.reject(timedOut());
  return new Promise<T>((resolve, reject) => {
    const off = onAbort(signal, () => reject(timedOut()));
    work()
      .then(resolve, (e: unknown) => reject(signal.aborted ? timedOut() : e))
      .finally(off);
  });
}

/** Reads a body as UTF-8, refusing it once it passes `max` bytes (never holding more). */
async function readCapped(response: Response, max: number): Promise<string> {
  return readTextCapped(
    response.body,
    max,
    () => new KeySourceError(`JWKS response is larger than ${max} bytes`),
  );
}
