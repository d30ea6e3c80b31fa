/**
 * The push half of the re-trust signal on Postgres: one dedicated connection per process LISTENs on
 * the channel a re-trust notifies, so every instance re-verifies within milliseconds instead of at
 * its next trust poll. The poll stays (gateway.ts `pollTrust`): a notification sent while this
 * connection was down is never replayed, so after every reconnect the listener fires once too,
 * and the gateway's epoch comparison decides whether anything changed.
 */
import pg from 'pg';

/** Reconnect delays: doubling from the first to the cap. */
const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 30_000;

export interface TrustListener {
  close(): Promise<void>;
}

/**
 * LISTENs on `channel` over its own connection (LISTEN is per session, so not from the pool), and
 * calls `onChange` for each notification and after each reconnect.
 */
export function listenForTrust(
  config: pg.ClientConfig,
  channel: string,
  /** The notification's payload; undefined after a reconnect (whatever was missed meanwhile). */
  onChange: (payload?: string) => void,
  /** Told when the connection is lost (it is then retried); the caller words the error safely. */
  lost?: (e: unknown) => void,
): TrustListener {
  let client: pg.Client | undefined;
  let closed = false;
  let retryMs = FIRST_RETRY_MS;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let connected = false;

  const retry = () => {
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, retryMs);
    timer.unref?.();
    retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
  };

  const connect = async () => {
    const c = new pg.Client(config);
    client = c;
    // Errors and ends after the connection was made both come here; one retry per connection.
    let dropped = false;
    const drop = (e?: unknown) => {
      if (dropped) return;
      dropped = true;
      if (!closed) lost?.(e);
      c.end().catch(() => {});
      retry();
    };
    c.on('error', drop);
    c.on('end', () => drop());
    c.on('notification', (n) => {
      if (n.channel === channel) onChange(n.payload);
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (e) {
      drop(e);
      return;
    }
    if (closed) {
      await c.end().catch(() => {});
      return;
    }
    retryMs = FIRST_RETRY_MS;
    // Whatever was notified while nobody listened: let the epoch decide.
    if (connected) onChange();
    connected = true;
  };

  void connect();
  return {
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      await client?.end().catch(() => {});
    },
  };
}
