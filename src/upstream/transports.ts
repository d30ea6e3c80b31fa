import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { ServerConfig } from '../config/types.js';
import { ManifoldError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Platform } from '../platform.js';

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
        },
        log,
      );
    }
    case 'streamable-http':
      return new StreamableHTTPClientTransport(new URL(server.url ?? ''), {
        fetch: platform.fetch,
        requestInit: { headers: server.headers },
        // Redirects are the egress guard's job (followed by hand, each hop checked).
        redirectPolicy: 'same-origin',
        reconnectionOptions: {
          initialReconnectionDelay: 1000,
          maxReconnectionDelay: 30_000,
          reconnectionDelayGrowFactor: 2,
          maxRetries: 2,
        },
      });
    case 'sse':
      return new SSEClientTransport(new URL(server.url ?? ''), {
        fetch: platform.fetch,
        requestInit: { headers: server.headers },
        redirectPolicy: 'same-origin',
      });
  }
}
