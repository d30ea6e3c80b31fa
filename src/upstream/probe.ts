/**
 * Which era an upstream speaks, found by the spec's backward-compatibility probe, and the session
 * opened in it (spec 2026-07-28: basic/versioning "Backward Compatibility"; streamable-http and
 * stdio "Backward Compatibility"):
 *
 * - Send `server/discover` with the gateway's modern version in `_meta`.
 * - A DiscoverResult, or a recognised modern error (HeaderMismatch, MissingRequiredClientCapability,
 *   UnsupportedProtocolVersion naming a version we share), means a modern server.
 * - Anything else (another error, a non-JSON 4xx, silence on stdio) means legacy: fall back to
 *   the initialize handshake, on the same stdio child.
 *
 * A server's `protocol` setting pins the era instead. The verdict is kept per upstream (the era is
 * a property of the server) until a connection in that era fails.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { ManifoldError } from '../errors.js';
import { onAbort } from '../lib/cancellation.js';
import { type Era, McpCode, MODERN_VERSIONS } from '../protocol/versions.js';
import { brief, httpStatusOf, UpstreamHttpError } from './call-errors.js';
import { LegacySession } from './legacy/session.js';
import { forwardingTransport } from './legacy/transport-wrap.js';
import {
  createTransport,
  markOverSse,
  reachedOverSse,
  SSE_FALLBACK_STATUSES,
  upstreamUrl,
} from './legacy/transports.js';
import { type DiscoverInfo, ModernSession, readDiscover } from './modern/session.js';
import { modernStamp, modernWire } from './modern/wire.js';
import type { SessionDeps, SessionEvents, UpstreamSession } from './session.js';
import { postJsonOf } from './wire/egress-fetch.js';
import { postMessage } from './wire/http.js';

const PROBE_ID = 'manifold:probe';
/** A stdio server that says nothing to the probe within this is taken as legacy. */
const STDIO_PROBE_MS = 3000;

/**
 * `retry`: the server refused our version with UnsupportedProtocolVersion and named one we share;
 * the probe is sent again with it (SEP-2575: a client retries with a supported version), since the
 * error alone says nothing of the server's capabilities.
 */
type Verdict = { era: 'modern'; info: DiscoverInfo; retry?: true } | { era: 'legacy'; reason: string };

/** The era a server setting asks for, or undefined for `auto`. */
function pinned(deps: SessionDeps): Era | undefined {
  const p = deps.config.protocol;
  if (deps.config.type === 'sse') return 'legacy';
  if (p === 'auto') return undefined;
  return (MODERN_VERSIONS as readonly string[]).includes(p) ? 'modern' : 'legacy';
}

/** Reads the probe's answer: a result, or an error body. */
function judge(message: Record<string, unknown> | undefined): Verdict {
  if (!message) return { era: 'legacy', reason: 'no answer to server/discover' };
  const info = readDiscover(message.result, MODERN_VERSIONS);
  if (info) return { era: 'modern', info };
  const error = message.error as { code?: unknown; data?: { supported?: unknown } } | undefined;
  if (error?.code === McpCode.UnsupportedProtocolVersion) {
    const shared = readDiscover({ supportedVersions: error.data?.supported }, MODERN_VERSIONS);
    if (shared) return { era: 'modern', info: shared, retry: true };
    return { era: 'legacy', reason: 'server/discover: no modern version in common' };
  }
  if (error?.code === McpCode.HeaderMismatch || error?.code === McpCode.MissingRequiredClientCapability) {
    return { era: 'modern', info: { version: MODERN_VERSIONS[0], capabilities: {} } };
  }
  return {
    era: 'legacy',
    reason: `server/discover answered ${brief(JSON.stringify(error ?? message.result))}`,
  };
}

function discoverMessage(deps: SessionDeps, version: string = MODERN_VERSIONS[0]) {
  const stamp = modernStamp(version, deps.clientVersion);
  return { jsonrpc: '2.0' as const, id: PROBE_ID, method: 'server/discover', params: stamp({}) };
}

/**
 * The probe's verdict after at most one retry with the version a refusal named. A retry that
 * fails again keeps the first verdict: the server did say it speaks that version.
 */
async function withRetry(first: Verdict, again: (version: string) => Promise<Verdict>): Promise<Verdict> {
  if (first.era !== 'modern' || !first.retry) return first;
  const second = await again(first.info.version);
  return second.era === 'modern' && !second.retry ? second : { era: 'modern', info: first.info };
}

async function probeHttp(deps: SessionDeps, version: string = MODERN_VERSIONS[0]): Promise<Verdict> {
  let answer: Record<string, unknown> | undefined;
  const timeout = AbortSignal.timeout(deps.gateway.connectTimeoutMs);
  try {
    await postMessage(
      {
        url: deps.config.url ?? '',
        post: postJsonOf(deps.platform),
        wire: modernWire(deps.config.headers, version, () => new Map()),
        log: deps.log,
        receive: (m) => {
          const msg = m as Record<string, unknown>;
          if (msg.id === PROBE_ID) answer = msg;
        },
      },
      discoverMessage(deps, version),
      deps.signal ? AbortSignal.any([deps.signal, timeout]) : timeout,
    );
  } catch (e) {
    // An HTTP error without a modern error body is a legacy server (or a legacy error: the
    // handshake will tell). A network failure is not an answer: it fails this attempt.
    if (e instanceof UpstreamHttpError) return { era: 'legacy', reason: `server/discover: HTTP ${e.status}` };
    deps.signal?.throwIfAborted();
    if (timeout.aborted) {
      const ms = deps.gateway.connectTimeoutMs;
      throw new ManifoldError('ERR_UPSTREAM_TIMEOUT', `server/discover timed out after ${ms} ms`);
    }
    throw e;
  }
  return judge(answer);
}

/** Probes a started stdio child; any answer but a modern one, or none, is legacy (transports/stdio). */
async function probeStdio(transport: Transport): Promise<Verdict> {
  return new Promise<Verdict>((resolve, reject) => {
    const timer = setTimeout(
      () => resolve({ era: 'legacy', reason: 'no answer to server/discover' }),
      STDIO_PROBE_MS,
    );
    transport.onmessage = (m: JSONRPCMessage) => {
      const msg = m as unknown as Record<string, unknown>;
      if (msg.id !== PROBE_ID) return;
      clearTimeout(timer);
      resolve(judge(msg));
    };
    transport.onclose = () => {
      clearTimeout(timer);
      reject(
        new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', 'the server exited while answering server/discover'),
      );
    };
  });
}

/**
 * Closes `transport` when the attempt is abandoned, so that whatever waits on it (the probe, the
 * handshake) fails at once and a stdio child goes with it (SECURITY F6, J2). Returns how to stop
 * watching, once the session owns the transport.
 */
function closeOnAbort(signal: AbortSignal | undefined, transport: Transport): () => void {
  return signal ? onAbort(signal, () => void transport.close().catch(() => {})) : () => {};
}

/** The initialize handshake on `transport`, abandoned with the attempt (`closeOnAbort`). */
async function openLegacy(deps: SessionDeps, transport: Transport, events: SessionEvents) {
  const unwatch = closeOnAbort(deps.signal, transport);
  try {
    deps.signal?.throwIfAborted();
    return await LegacySession.open(deps, transport, events);
  } finally {
    unwatch();
  }
}

/** A started transport the SDK client may "start" again: it only takes over the handlers. */
function alreadyStarted(t: Transport): Transport {
  return forwardingTransport(t, { start: async () => {} });
}

/**
 * Opens a session with the upstream in the era it speaks. `hint` is the verdict of an earlier
 * connection (skips the probe); the era chosen is returned with the session.
 */
export async function openSession(
  deps: SessionDeps,
  events: SessionEvents,
  hint: Era | undefined,
): Promise<UpstreamSession> {
  const pin = pinned(deps) ?? hint;
  if (deps.config.type === 'stdio') {
    const transport = createTransport(deps.config, deps.platform, deps.log);
    const unwatch = closeOnAbort(deps.signal, transport);
    await transport.start().catch((e: unknown) => {
      unwatch();
      throw e;
    });
    try {
      // Abandoned while the child was starting: it is closed here, having just started.
      deps.signal?.throwIfAborted();
      let verdict: Verdict | undefined;
      if (pin !== 'legacy') {
        const ask = (version?: string) => {
          transport.send(discoverMessage(deps, version) as JSONRPCMessage).catch(() => {});
          return probeStdio(transport);
        };
        verdict = await withRetry(await ask(), ask);
        if (pin === 'modern' && verdict.era === 'legacy') throw notModern(deps, verdict.reason);
      }
      if (verdict?.era === 'modern') return ModernSession.open(deps, verdict.info, events, transport);
      transport.onmessage = undefined;
      transport.onclose = undefined;
      return await LegacySession.open(deps, alreadyStarted(transport), events);
    } catch (e) {
      await transport.close().catch(() => {});
      throw e;
    } finally {
      unwatch();
    }
  }
  if (deps.config.sseFallback && reachedOverSse(deps.config)) return openOverSse(deps, events);
  if (deps.config.type === 'streamable-http' && pin !== 'legacy') {
    // A statically denied URL fails here, with its reason logged under the server's name.
    upstreamUrl(deps.config, deps.platform, deps.log);
    const verdict = await withRetry(await probeHttp(deps), (version) => probeHttp(deps, version));
    if (verdict.era === 'modern') return ModernSession.open(deps, verdict.info, events);
    if (pin === 'modern') throw notModern(deps, verdict.reason);
    deps.log.debug('upstream.legacy', { reason: verdict.reason });
  }
  try {
    return await openLegacy(deps, createTransport(deps.config, deps.platform, deps.log), events);
  } catch (e) {
    // transports, backwards compatibility: a POST of initialize refused with 400, 404 or 405 means
    // an HTTP+SSE server; open its GET stream instead. Only for a url given without a type.
    const status = httpStatusOf(e);
    if (!deps.config.sseFallback || status === undefined || !SSE_FALLBACK_STATUSES.has(status)) throw e;
    deps.log.info('upstream.sse_fallback', { status });
    let session: UpstreamSession;
    try {
      session = await openOverSse(deps, events);
    } catch (sseError) {
      // Not an SSE server either: the streamable-HTTP refusal is the one worth reporting.
      deps.log.debug('upstream.sse_fallback_failed', { error: brief(sseError) });
      throw e;
    }
    markOverSse(deps.config);
    return session;
  }
}

function openOverSse(deps: SessionDeps, events: SessionEvents): Promise<UpstreamSession> {
  const config = { ...deps.config, type: 'sse' as const };
  return openLegacy({ ...deps, config }, createTransport(config, deps.platform, deps.log), events);
}

function notModern(deps: SessionDeps, reason: string): ManifoldError {
  return new ManifoldError(
    'ERR_UPSTREAM_UNAVAILABLE',
    `server ${deps.config.name} is pinned to protocol ${deps.config.protocol} but did not answer as a 2026-07-28 server (${reason}); set "protocol": "auto" or "2025-11-25"`,
  );
}
