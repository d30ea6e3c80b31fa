import type { CatalogEntry } from '../aggregate/catalog.js';
import type { Principal } from '../auth/principal.js';
import { Cancellation } from '../cancellation.js';
import { ManifoldError } from '../errors.js';
import type { Gateway } from '../gateway.js';
import { errorMessage, type JsonRpcRequest, rawResultMessage, resultMessage } from './jsonrpc.js';
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
  /** Size of the request as received (for the audit line; arguments are never logged). */
  bytesIn: number;
  json: (body: string, status?: number) => Response;
  fail: (id: JsonRpcRequest['id'], e: unknown) => string;
}

type Result = Record<string, unknown>;
export type Verdict = 'allowed' | 'denied' | 'quarantined' | 'invalid' | 'error';

/**
 * Relays one tools/call to the upstream that owns it, with one audit line per call. The answer
 * is plain JSON unless the client asked for progress, in which case the POST becomes an SSE
 * stream carrying the upstream's progress (re-keyed to the client's token) and then the response.
 */
export async function toolsCall(ctx: CallContext): Promise<Response> {
  const { gateway, principal, request } = ctx;
  const started = gateway.platform.now();
  const params = request.params ?? {};
  const bytesIn = ctx.bytesIn;
  let entry: CatalogEntry | undefined;
  // Argument values are never logged: only sizes, names and the verdict.
  const audit = (verdict: Verdict, bytesOut: number) =>
    gateway.log.info('audit.tools_call', {
      tenant: principal.tenant,
      subject: principal.subject,
      tool: entry?.name ?? (typeof params.name === 'string' ? params.name.slice(0, 128) : null),
      server: entry?.server ?? null,
      verdict,
      durationMs: gateway.platform.now() - started,
      bytesIn,
      bytesOut,
    });
  try {
    // A client may call a tool it already knows without listing first: wait for the first
    // catalog like tools/list does, and for the owning upstream's first connection attempt.
    await gateway.ready;
    entry = gateway.resolve(principal, params.name);
    const owner = gateway.pool.get(entry.server);
    if (owner?.state === 'connecting') await owner.firstAttempt;
    const limit = gateway.takeCall(principal.tenant);
    if (!limit.ok) {
      throw new ManifoldError(
        'ERR_RATE_LIMITED',
        `rate limit for tenant exceeded: retry after ${limit.retryAfterSeconds} s`,
        { data: { retryAfterSeconds: limit.retryAfterSeconds } },
      );
    }
  } catch (e) {
    audit('denied', 0);
    throw e;
  }
  return relay(ctx, entry, audit);
}

async function relay(
  ctx: CallContext,
  entry: CatalogEntry,
  audit: (verdict: Verdict, bytesOut: number) => void,
): Promise<Response> {
  const { gateway, session, principal, request } = ctx;
  const params = request.params ?? {};
  const args = params.arguments;
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
    audit('invalid', 0);
    throw new ManifoldError('ERR_INVALID_PARAMS', 'arguments must be an object');
  }
  const argsObject = (args ?? {}) as Record<string, unknown>;
  const respond = (verdict: Verdict, body: string) => {
    audit(verdict, body.length);
    return ctx.json(body);
  };
  if (entry.meta === 'describe_tool') {
    return respond('allowed', resultMessage(request.id, describeTool(gateway, principal, argsObject)));
  }
  const refusal = gateway.guards.refuse(entry);
  if (refusal) return respond('quarantined', resultMessage(request.id, refusal));
  // Arguments are checked against the full schema before anything is sent.
  const invalid = gateway.guards.checkArguments(gateway.catalog, entry, argsObject);
  if (invalid) return respond('invalid', resultMessage(request.id, invalid));

  const upstream = gateway.pool.get(entry.server);
  if (!upstream) throw new ManifoldError('ERR_TOOL_UNKNOWN', `Unknown tool: ${entry.name}`);

  const { progressToken, ...restMeta } = (params._meta ?? {}) as Record<string, unknown>;
  const upstreamParams: Record<string, unknown> = { name: entry.original, arguments: argsObject };
  if (Object.keys(restMeta).length > 0) upstreamParams._meta = restMeta;

  const cancellation = new Cancellation();
  const key = inflightKey(request.id);
  session.inflight.set(key, cancellation);
  const done = () => session.inflight.delete(key);
  const validToken = typeof progressToken === 'string' || typeof progressToken === 'number';
  const answer = (result: Result) => rawResultMessage(request.id, gateway.guards.capResult(entry, result));
  const failure = (e: unknown): { verdict: Verdict; body: string } => {
    const asResult = errorAsResult(entry, e);
    return asResult
      ? { verdict: 'error', body: resultMessage(request.id, asResult) }
      : { verdict: 'error', body: ctx.fail(request.id, e) };
  };

  if (validToken && ctx.canStream) {
    const stream = new SseStream();
    void gateway
      .track(() =>
        upstream.callTool(upstreamParams, {
          cancellation,
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
        (result) => {
          const body = answer(result);
          audit('allowed', body.length);
          stream.send(body);
        },
        (e) => {
          // A cancelled request gets no response (spec: utilities/cancellation).
          if (cancellation.aborted) {
            audit('error', 0);
            return;
          }
          const f = failure(e);
          audit(f.verdict, f.body.length);
          stream.send(f.body);
        },
      )
      .finally(() => {
        done();
        stream.close();
      });
    return new Response(stream.readable, { status: 200, headers: sseHeaders });
  }

  try {
    const result = await gateway.track(() => upstream.callTool(upstreamParams, { cancellation }));
    return respond('allowed', answer(result));
  } catch (e) {
    if (cancellation.aborted) return respond('error', errorMessage(request.id, -32800, 'request cancelled'));
    const f = failure(e);
    return respond(f.verdict, f.body);
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
