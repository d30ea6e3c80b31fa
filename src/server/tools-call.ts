import type { CatalogEntry } from '../aggregate/catalog.js';
import type { Principal } from '../auth/principal.js';
import { ManifoldError } from '../errors.js';
import type { Gateway } from '../gateway.js';
import { errorMessage, type JsonRpcRequest, resultMessage } from './jsonrpc.js';
import { describeTool } from './local-tools.js';
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

type Result = Record<string, unknown>;

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
  const argsObject = (args ?? {}) as Record<string, unknown>;
  if (entry.meta === 'describe_tool') {
    return ctx.json(resultMessage(request.id, describeTool(gateway, principal, argsObject)));
  }
  // Arguments are checked against the full schema before anything is sent (B9 stays with the
  // upstream only for what a schema cannot express).
  const invalid = gateway.checkArguments(entry, argsObject);
  if (invalid) return ctx.json(resultMessage(request.id, invalid));

  const upstream = gateway.pool.get(entry.server);
  if (!upstream) throw new ManifoldError('ERR_TOOL_UNKNOWN', `Unknown tool: ${entry.name}`);

  const { progressToken, ...restMeta } = (params._meta ?? {}) as Record<string, unknown>;
  const upstreamParams: Record<string, unknown> = { name: entry.original, arguments: argsObject };
  if (Object.keys(restMeta).length > 0) upstreamParams._meta = restMeta;

  const controller = new AbortController();
  const key = inflightKey(request.id);
  session.inflight.set(key, controller);
  const done = () => session.inflight.delete(key);
  const validToken = typeof progressToken === 'string' || typeof progressToken === 'number';
  const finish = (result: Result) => gateway.capResult(entry, result);

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
        (result) => stream.send(resultMessage(request.id, finish(result))),
        (e) => {
          // A cancelled request gets no response (spec: utilities/cancellation).
          if (controller.signal.aborted) return;
          const asResult = errorAsResult(entry, e);
          stream.send(asResult ? resultMessage(request.id, asResult) : ctx.fail(request.id, e));
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
    return ctx.json(resultMessage(request.id, finish(result)));
  } catch (e) {
    if (controller.signal.aborted) {
      return ctx.json(errorMessage(request.id, -32800, 'request cancelled'));
    }
    const asResult = errorAsResult(entry, e);
    return ctx.json(asResult ? resultMessage(request.id, asResult) : ctx.fail(request.id, e));
  } finally {
    done();
  }
}

/** Failures that belong to the tool's answer rather than to the protocol become isError results. */
function errorAsResult(entry: CatalogEntry, e: unknown): Result | undefined {
  if (e instanceof ManifoldError && e.code === 'ERR_UPSTREAM_BODY_TOO_LARGE') {
    return {
      content: [
        {
          type: 'text',
          text: `The answer of ${entry.name} was too large: ${e.publicMessage}. Ask for less.`,
        },
      ],
      isError: true,
      _meta: { 'manifold/truncated': true },
    };
  }
  return undefined;
}
