/**
 * The plain relay (#18): a request that can only end in one answer goes to its upstream without
 * the answer streams and question handling of through.ts `start`. It is taken when nothing can
 * reach the client before the result: no progress token, no log level, no poll, no tracing, no
 * approval, no task, and no client capability an upstream request could use (so every question
 * from the server is refused, as `start` refuses it). Everything else `start` does for such a
 * call is done here the same way, with the same helpers: cancellation (the client's
 * notifications/cancelled, or a modern client closing the request), the drain count, the result
 * or failure answer, and the audit line (the Through's own callbacks).
 *
 * Why: the streams and closures `start` prepares per call cost as much as the rest of the relay
 * on a stdio upstream, and most calls never use them (measured in docs/design.md).
 */

import { ManifoldError } from '../../../errors.js';
import { checkInputRequests, explainMissing } from '../../../guards/client-features.js';
import { Cancellation } from '../../../lib/cancellation.js';
import { isObject } from '../../../lib/json.js';
import { errorMessage } from '../../../protocol/jsonrpc.js';
import type { InputHandler, InputRequests } from '../../../upstream/session.js';
import type { CallOptions } from '../../../upstream/types.js';
import type { Edge } from '../edge.js';
import type { Exchange } from '../exchange.js';
import type { Reply } from '../http-in.js';
import { json } from '../http-in.js';
import type { Through } from './relay.js';

type Result = Record<string, unknown>;

const NO_CAPABILITIES: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;

/** Whether this request's whole answer is its final message (nothing streams before it). */
export function plainEligible(ex: Exchange, t: Through): boolean {
  if (
    ex.trace ||
    ex.pollMs ||
    ex.logLevel !== undefined ||
    t.progressToken !== undefined ||
    t.tasks ||
    t.onTask ||
    t.approval ||
    t.relatedTask !== undefined
  ) {
    return false;
  }
  // A capability the gateway would relay means the server may ask, and the question needs a stream.
  const c = t.upstream.config.clientFeatures;
  const declared = ex.clientCapabilities;
  return !(
    (c.sampling && isObject(declared.sampling)) ||
    (c.elicitation && isObject(declared.elicitation)) ||
    (c.roots && isObject(declared.roots))
  );
}

/** Relays `t` as one upstream request; call only when `plainEligible(ex, t)`. */
export function plainRelay(edge: Edge, ex: Exchange, t: Through): Promise<Reply> {
  const { gateway } = edge;
  const id = ex.request.id;
  const server = t.upstream.config;
  const cancellation = new Cancellation();
  const done = ex.track(id, cancellation);
  let refused: ManifoldError | undefined;
  // Every question is refused (the client declared nothing the server may use), as `start` does:
  // one meant for this call ends it with the refusal; one only guessed to be its own does not.
  const onInput: InputHandler = (requests: InputRequests, guessed?: boolean) => {
    const v = checkInputRequests(server.name, server.clientFeatures, ex.clientCapabilities, requests);
    if (v.ok) return Promise.resolve({});
    if (!guessed) {
      refused = v.error;
      cancellation.abort(v.error);
    }
    return Promise.reject(v.error);
  };
  const options: CallOptions = {
    cancellation,
    caller: ex.principal.key,
    onInput,
    inputMode: ex.era === 'modern' ? 'relay' : 'ask',
    repeatable: t.repeatable,
    clientCapabilities: NO_CAPABILITIES,
    onInputRound: t.onInputRequired ? () => t.onInputRequired?.(0) : undefined,
  };
  const fail = (e: unknown): Reply => {
    const f = t.onError(e, id);
    return json(f.body, ex.era === 'modern' ? f.status : 200);
  };
  const settled = (result: Result): Reply => {
    try {
      if (result.resultType === 'input_required') {
        // Nothing the server may ask of this client: refused, as `start` refuses it.
        const requests = isObject(result.inputRequests) ? (result.inputRequests as InputRequests) : {};
        const v = checkInputRequests(server.name, server.clientFeatures, ex.clientCapabilities, requests);
        throw v.ok
          ? new ManifoldError('ERR_CLIENT_FEATURE', 'no request is waiting to carry the question')
          : v.error;
      }
      if (result.resultType === 'task') {
        throw new ManifoldError(
          'ERR_UPSTREAM_ERROR',
          `server ${server.name} answered with a task nobody asked for`,
        );
      }
      return json(t.onResult(result, id));
    } catch (e) {
      return fail(e);
    } finally {
      end();
    }
  };
  const failed = (e: unknown): Reply => {
    try {
      if (refused) return fail(refused);
      if (cancellation.aborted) {
        t.onCancelled();
        return json(errorMessage(id, -32800, 'request cancelled'));
      }
      return fail(explainFailure(server, ex, e));
    } catch (again) {
      return fail(again);
    } finally {
      end();
    }
  };
  let entered = false;
  const end = () => {
    done();
    if (entered) gateway.leave();
  };
  let work: Promise<Result>;
  try {
    gateway.enter();
    entered = true;
    work = t.upstream.request(t.method, t.params, options);
  } catch (e) {
    work = Promise.reject(e);
  }
  return work.then(settled, failed);
}

/** An upstream's MissingRequiredClientCapability, said from where the gateway stands. */
export function explainFailure(server: Through['upstream']['config'], ex: Exchange, e: unknown): unknown {
  if (!(e instanceof ManifoldError) || e.code !== 'ERR_MISSING_CAPABILITY') return e;
  const required = e.data?.requiredCapabilities;
  const why = explainMissing(server.name, server.clientFeatures, ex.clientCapabilities, required);
  if (!why) return e;
  return why.why === 'off'
    ? new ManifoldError('ERR_CLIENT_FEATURE', why.reason, { cause: e })
    : new ManifoldError('ERR_MISSING_CAPABILITY', why.reason, {
        cause: e,
        data: { requiredCapabilities: { [why.feature]: {} } },
      });
}
