import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

type OnMessage = NonNullable<Transport['onmessage']>;

/**
 * The `eventsource` package (under the SDK's HTTP+SSE transport) calls its `onmessage` handler
 * itself and then dispatches the same event, and workerd's `EventTarget` calls a target's
 * `onmessage` property on dispatch too: on Workers every message of an HTTP+SSE upstream arrived
 * twice (progress `[1, 1, 2, 2, …]`, #16). The second delivery is the same event within the same
 * synchronous turn, so a message identical to the one delivered just before it, with no task in
 * between, is dropped. Elsewhere nothing changes: two identical messages back to back in one turn
 * are at most a repeated notification, which is idempotent.
 */
export function deliveredOnce(inner: Transport): Transport {
  let handler: OnMessage | undefined;
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
  return {
    start: () => inner.start(),
    send: (message, options) => inner.send(message, options),
    close: () => inner.close(),
    get onmessage() {
      return handler;
    },
    set onmessage(h) {
      handler = h;
      inner.onmessage = h ? once(h) : undefined;
    },
    get onclose() {
      return inner.onclose;
    },
    set onclose(h) {
      inner.onclose = h;
    },
    get onerror() {
      return inner.onerror;
    },
    set onerror(h) {
      inner.onerror = h;
    },
    setProtocolVersion: (v: string) => inner.setProtocolVersion?.(v),
  };
}
