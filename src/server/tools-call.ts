import type { CatalogEntry } from '../aggregate/catalog.js';
import { Cancellation } from '../cancellation.js';
import { ManifoldError } from '../errors.js';
import { isReservedMetaKey } from '../protocol/versions.js';
import { type Edge, failBody, json } from './dispatch.js';
import type { Exchange } from './exchange.js';
import { errorMessage, rawResultMessage, resultMessage } from './jsonrpc.js';
import { describeTool } from './local-tools.js';
import { SseStream, sseHeaders } from './sse.js';

type Result = Record<string, unknown>;
export type Verdict = 'allowed' | 'denied' | 'quarantined' | 'invalid' | 'error';

/**
 * Relays one tools/call to the upstream that owns it, with one audit line per call. The answer
 * is plain JSON unless the client asked for progress, in which case the POST becomes an SSE
 * stream carrying the upstream's progress (re-keyed to the client's token) and then the response.
 */
export async function toolsCall(edge: Edge, ex: Exchange): Promise<Response> {
  const { gateway } = edge;
  const { principal, request } = ex;
  const started = gateway.platform.now();
  const params = request.params ?? {};
  const bytesIn = ex.bytesIn;
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
  return relay(edge, ex, entry, audit);
}

async function relay(
  edge: Edge,
  ex: Exchange,
  entry: CatalogEntry,
  audit: (verdict: Verdict, bytesOut: number) => void,
): Promise<Response> {
  const { gateway } = edge;
  const { principal, request } = ex;
  const params = request.params ?? {};
  const args = params.arguments;
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
    audit('invalid', 0);
    throw new ManifoldError('ERR_INVALID_PARAMS', 'arguments must be an object');
  }
  const argsObject = (args ?? {}) as Record<string, unknown>;
  const respond = (verdict: Verdict, body: string) => {
    audit(verdict, body.length);
    return json(body);
  };
  const local = (r: Result) => resultMessage(request.id, ex.result(r));
  if (entry.meta === 'describe_tool') {
    return respond('allowed', local(describeTool(gateway, principal, argsObject)));
  }
  const refusal = gateway.guards.refuse(entry);
  if (refusal) return respond('quarantined', local(refusal));
  // Arguments are checked against the full schema before anything is sent.
  const invalid = gateway.guards.checkArguments(gateway.catalog, entry, argsObject);
  if (invalid) return respond('invalid', local(invalid));

  const upstream = gateway.pool.get(entry.server);
  if (!upstream) throw new ManifoldError('ERR_TOOL_UNKNOWN', `Unknown tool: ${entry.name}`);

  const upstreamParams: Record<string, unknown> = { name: entry.original, arguments: argsObject };
  const { progressToken, relayed } = splitMeta(params._meta);
  if (relayed) upstreamParams._meta = relayed;

  const cancellation = new Cancellation();
  const done = ex.track(request.id, cancellation);
  const validToken = typeof progressToken === 'string' || typeof progressToken === 'number';
  const answer = (result: Result) =>
    rawResultMessage(request.id, gateway.guards.capResult(entry, ex.result(result)));
  const failure = (e: unknown): { verdict: Verdict; body: string; status: number } => {
    const asResult = errorAsResult(entry, e);
    if (asResult) return { verdict: 'error', body: local(asResult), status: 200 };
    return { verdict: 'error', ...failBody(edge, request.id, e, ex.era) };
  };

  if (validToken && ex.canStream) {
    const stream = new SseStream();
    // A stream the client closes is a cancellation in 2026-07-28 (patterns/cancellation); in the
    // legacy era a disconnect is not (2025-11-25: transports), and the call runs to its end.
    if (ex.era === 'modern')
      stream.onclose = () => cancellation.abort(new Error('the client closed the stream'));
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
    audit(f.verdict, f.body.length);
    // A legacy client reads method errors inside a 200; a modern one also gets the statuses the
    // 2026-07-28 revision requires (400 for a missing client capability…).
    return json(f.body, ex.era === 'modern' ? f.status : 200);
  } finally {
    done();
  }
}

/**
 * The downstream `_meta`: its progress token is the gateway's to map, and keys under a reserved
 * MCP prefix describe the client's own request (version, capabilities, identity), so the upstream
 * edge writes its own instead. Everything else (trace context, vendor keys) is relayed.
 */
function splitMeta(meta: unknown): { progressToken: unknown; relayed: Record<string, unknown> | undefined } {
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) {
    return { progressToken: undefined, relayed: undefined };
  }
  let progressToken: unknown;
  let relayed: Record<string, unknown> | undefined;
  for (const [key, value] of Object.entries(meta)) {
    if (key === 'progressToken') progressToken = value;
    else if (!isReservedMetaKey(key)) {
      relayed ??= {};
      relayed[key] = value;
    }
  }
  return { progressToken, relayed };
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
