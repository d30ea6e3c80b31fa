import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../../config/types.js';
import { ManifoldError } from '../../errors.js';
import { egressDeniedError } from '../../guards/egress/policy.js';
import type { Logger } from '../../lib/log.js';
import type { Platform } from '../../platform.js';
import { egressPolicyOf } from '../wire/egress-fetch.js';
import { forwardingTransport, type OnMessage } from './transport-wrap.js';

/**
 * Builds the transport for one configured server. HTTP transports use the platform's egress
 * fetch; stdio is only possible where the platform provides a connector (Node).
 */
export function createTransport(server: ServerConfig, platform: Platform, log: Logger): Transport {
  switch (server.type) {
    case 'stdio': {
      if (!platform.connectStdio) {
        throw new ManifoldError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `stdio servers cannot run on ${platform.runtime}`,
          {
            data: { rule: 'unsupported-transport' },
          },
        );
      }
      return platform.connectStdio(
        {
          server: server.name,
          command: server.command ?? '',
          args: server.args,
          env: server.env,
          ...(server.cwd ? { cwd: server.cwd } : {}),
          ...(server.sandbox ? { sandbox: server.sandbox } : {}),
        },
        log,
      );
    }
    case 'streamable-http':
      return new StreamableHTTPClientTransport(upstreamUrl(server, platform, log), {
        fetch: platform.fetch,
        requestInit: { headers: server.headers },
        redirectPolicy: redirectPolicy(platform),
        reconnectionOptions: {
          initialReconnectionDelay: 1000,
          maxReconnectionDelay: 30_000,
          reconnectionDelayGrowFactor: 2,
          maxRetries: 2,
        },
      });
    case 'sse': {
      const sse = new SSEClientTransport(upstreamUrl(server, platform, log), {
        fetch: platform.fetch,
        requestInit: { headers: server.headers },
        redirectPolicy: redirectPolicy(platform),
      });
      return platform.sseEventsTwice ? deliveredOnce(sse) : sse;
    }
  }
}

/**
 * The upstream URL, refused up front when the platform's egress policy denies it outright. The
 * guarded fetch would refuse the first request anyway; this fails before a transport exists and
 * logs the detailed reason under the server's name (the error itself stays generic).
 */
export function upstreamUrl(server: ServerConfig, platform: Platform, log: Logger): URL {
  const url = new URL(server.url ?? '');
  const verdict = egressPolicyOf(platform.fetch)?.checkUrl(url);
  if (verdict && !verdict.ok) {
    log.warn('egress.denied', { reason: verdict.reason });
    throw egressDeniedError(verdict.reason);
  }
  return url;
}

/**
 * 'follow' hands redirects to the platform fetch, which follows them by hand and checks every hop
 * against the egress policy. A fetch without that guard keeps the SDK's own 'same-origin' policy,
 * so an unguarded runtime never follows a redirect off the configured origin.
 */
function redirectPolicy(platform: Platform): 'follow' | 'same-origin' {
  return egressPolicyOf(platform.fetch) ? 'follow' : 'same-origin';
}

/**
 * Servers configured by `url` alone that refused the streamable-HTTP initialize (400, 404 or 405)
 * and answered over HTTP+SSE instead (transports, backwards compatibility). Keyed by the server's
 * config object: reconnects go straight to SSE, and status reports the transport in use.
 */
const overSse = new WeakSet<object>();

/** Refusals of a streamable-HTTP initialize that mean "try the HTTP+SSE transport". */
export const SSE_FALLBACK_STATUSES: ReadonlySet<number> = new Set([400, 404, 405]);

export function markOverSse(config: object): void {
  overSse.add(config);
}

export function reachedOverSse(config: object): boolean {
  return overSse.has(config);
}

/**
 * The `eventsource` package (under the SDK's HTTP+SSE transport) calls its `onmessage` handler
 * itself and then dispatches the same event, and workerd's `EventTarget` calls a target's
 * `onmessage` property on dispatch too: on Workers every message of an HTTP+SSE upstream arrived
 * twice (progress `[1, 1, 2, 2, …]`, #16). The second delivery is the same event within the same
 * synchronous turn, so a message identical to the one delivered just before it, with no task in
 * between, is dropped (two identical messages back to back in one turn could at most be a repeated
 * notification, which is idempotent). Used where the platform says `sseEventsTwice`.
 */
function deliveredOnce(inner: Transport): Transport {
  let last: string | undefined;
  const once =
    (h: OnMessage): OnMessage =>
    (message: JSONRPCMessage, extra) => {
      const text = JSON.stringify(message);
      if (text === last) return;
      last = text;
      queueMicrotask(() => {
        if (last === text) last = undefined;
      });
      h(message, extra);
    };
  return forwardingTransport(inner, { wrap: once });
}
