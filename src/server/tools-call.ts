import type { Principal } from '../auth/principal.js';
import { ManifoldError } from '../errors.js';
import type { Gateway } from '../gateway.js';
import { errorMessage, type JsonRpcRequest, resultMessage } from './jsonrpc.js';
import { inflightKey, type Session } from './sessions.js';
import { SseStream, sseHeaders } from './sse.js';

export interface CallContext {
  gateway: Gateway;
  session: Session;
  principal: Principal;
  request: JsonRpcRequest;
  /** The client accepts text/event-stream on this POST. */
  canStream: boolean;
  json: (body: string, status?: number) => Response;
  fail: (id: JsonRpcRequest['id'], e: unknown) => string;
}

/**
 * Relays one tools/call to the upstream that owns it. The answer is plain JSON unless the
 * client asked for progress, in which case the POST becomes an SSE stream carrying the
 * upstream's progress (re-keyed to the client's token) and then the response.
 */
export async function toolsCall(ctx: CallContext): Promise<Response> {
  const { gateway, session, principal, request } = ctx;
  const params = request.params ?? {};
  const args = params.arguments;
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
    throw new ManifoldError('ERR_INVALID_PARAMS', 'arguments must be an object');
  }
  const entry = gateway.resolve(principal, params.name);
  const upstream = gateway.pool.get(entry.server);
  if (!upstream) throw new ManifoldError('ERR_TOOL_UNKNOWN', `Unknown tool: ${entry.name}`);

  const { progressToken, ...restMeta } = (params._meta ?? {}) as Record<string, unknown>;
  const upstreamParams: Record<string, unknown> = { name: entry.original, arguments: args ?? {} };
  if (Object.keys(restMeta).length > 0) upstreamParams._meta = restMeta;

  const controller = new AbortController();
  const key = inflightKey(request.id);
  session.inflight.set(key, controller);
  const done = () => session.inflight.delete(key);
  const validToken = typeof progressToken === 'string' || typeof progressToken === 'number';

  if (validToken && ctx.canStream) {
    const stream = new SseStream();
    void gateway
      .track(() =>
        upstream.callTool(upstreamParams, {
          signal: controller.signal,
          onprogress: (p) => {
            stream.send(
              JSON.stringify({
                jsonrpc: '2.0',
                method: 'notifications/progress',
                params: { ...p, progressToken },
              }),
            );
          },
        }),
      )
      .then(
        (result) => stream.send(resultMessage(request.id, result)),
        (e) => {
          // A cancelled request gets no response (spec: utilities/cancellation).
          if (!controller.signal.aborted) stream.send(ctx.fail(request.id, e));
        },
      )
      .finally(() => {
        done();
        stream.close();
      });
    return new Response(stream.readable, { status: 200, headers: sseHeaders });
  }

  try {
    const result = await gateway.track(() =>
      upstream.callTool(upstreamParams, { signal: controller.signal }),
    );
    return ctx.json(resultMessage(request.id, result));
  } catch (e) {
    if (controller.signal.aborted) {
      return ctx.json(errorMessage(request.id, -32800, 'request cancelled'));
    }
    return ctx.json(ctx.fail(request.id, e));
  } finally {
    done();
  }
}
