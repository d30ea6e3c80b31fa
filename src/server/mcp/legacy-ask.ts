/**
 * Requests the gateway relays to a legacy client (sampling, elicitation, roots): sent on the
 * stream of the call they belong to, answered by the client's POST of a JSON-RPC response
 * (legacy.ts `onResponse` hands it to the waiting entry in `session.replies`).
 */

import { ManifoldError } from '../../errors.js';
import { stripUnsafe } from '../../guards/text.js';
import type { Cancellation } from '../../lib/cancellation.js';
import { unrefTimer } from '../../platform.js';
import type { Answer } from './relay/answer.js';
import type { Session } from './sessions.js';

/** How long a legacy client may take to answer a relayed request. */
const ASK_TIMEOUT_MS = 10 * 60_000;
/** Relayed requests a session may have waiting at once. */
const MAX_ASKS = 64;

/**
 * Sends a request to the client on the stream of the call it belongs to (spec 2025-11-25:
 * transports, "the server MAY send JSON-RPC requests and notifications before sending the
 * response"), and resolves with its answer. A client that takes only JSON cannot be asked.
 */
export function askClient(
  session: Session,
  answer: Answer,
  method: string,
  params: Record<string, unknown>,
  cancellation: Cancellation,
): Promise<Record<string, unknown>> {
  if (session.replies.size >= MAX_ASKS) {
    return Promise.reject(
      new ManifoldError('ERR_CLIENT_FEATURE', `too many requests are waiting for this client's answers`),
    );
  }
  const id = `manifold-${crypto.randomUUID()}`;
  return new Promise((resolve, reject) => {
    const settle = () => {
      clearTimeout(timer);
      off();
      session.replies.delete(id);
    };
    const timer = setTimeout(() => {
      settle();
      reject(new ManifoldError('ERR_CLIENT_FEATURE', `the client did not answer ${method} in time`));
    }, ASK_TIMEOUT_MS);
    unrefTimer(timer);
    const off = cancellation.onAbort((reason) => {
      settle();
      reject(reason);
    });
    session.replies.set(id, (message) => {
      settle();
      if (message.error !== undefined) {
        const e = message.error as { code?: unknown; message?: unknown };
        reject(
          new ManifoldError(
            'ERR_CLIENT_FEATURE',
            `the client refused ${method}: ${typeof e.message === 'string' ? stripUnsafe(e.message).slice(0, 512) : 'no reason given'}`,
            {
              data: { clientCode: typeof e.code === 'number' ? e.code : -32603 },
            },
          ),
        );
      } else if (
        typeof message.result === 'object' &&
        message.result !== null &&
        !Array.isArray(message.result)
      ) {
        resolve(message.result as Record<string, unknown>);
      } else {
        reject(
          new ManifoldError('ERR_CLIENT_FEATURE', `the client answered ${method} without a result object`),
        );
      }
    });
    if (!answer.push(JSON.stringify({ jsonrpc: '2.0', id, method, params }))) {
      settle();
      reject(
        new ManifoldError(
          'ERR_CLIENT_FEATURE',
          `the server asked for ${method}, which needs a stream to reach the client: send Accept: application/json, text/event-stream`,
        ),
      );
    }
  });
}
