import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { forwardingTransport, type OnMessage } from './transport-wrap.js';

/**
 * The `eventsource` package (under the SDK's HTTP+SSE transport) calls its `onmessage` handler
 * itself and then dispatches the same event, and workerd's `EventTarget` calls a target's
 * `onmessage` property on dispatch too: on Workers every message of an HTTP+SSE upstream arrived
 * twice (progress `[1, 1, 2, 2, …]`, #16). The second delivery is the same event within the same
 * synchronous turn, so a message identical to the one delivered just before it, with no task in
 * between, is dropped (two identical messages back to back in one turn could at most be a repeated
 * notification, which is idempotent). Used on Workers only.
 */
export function deliveredOnce(inner: Transport): Transport {
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
