import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

export type OnMessage = NonNullable<Transport['onmessage']>;

/**
 * A Transport that forwards everything to `inner`, except a `start` of its own when given, and
 * each `onmessage` handler installed through `wrap` when given (the handler read back is the one
 * that was set, unwrapped).
 */
export function forwardingTransport(
  inner: Transport,
  o: { start?: () => Promise<void>; wrap?: (h: OnMessage) => OnMessage } = {},
): Transport {
  let handler: OnMessage | undefined;
  return {
    start: o.start ?? (() => inner.start()),
    send: (message, options) => inner.send(message, options),
    close: () => inner.close(),
    get onmessage() {
      return handler;
    },
    set onmessage(h) {
      handler = h;
      inner.onmessage = h && o.wrap ? o.wrap(h) : h;
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
