/**
 * OpenTelemetry spans for the requests the gateway serves (docs/tracing.md): a SERVER span per
 * downstream request, a CLIENT span per upstream call under it, and the trace context carried to
 * the upstream in `params._meta`. Names and attributes follow the OTel semantic conventions for
 * MCP (gen-ai/mcp.md: span name `{mcp.method.name} {target}`, context in `params._meta`).
 *
 * Built once per edge, and only when a tracer was given: with tracing off nothing here runs.
 */
import {
  type Attributes,
  type Context,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { Principal } from '../../auth/principal.js';
import { ManifoldError } from '../../errors.js';
import { isObject } from '../../lib/json.js';
import type { RequestMeta } from '../../protocol/era.js';
import type { JsonRpcRequest } from '../../protocol/jsonrpc.js';
import { formatTraceparent, parseBaggage, parseTraceparent } from '../../protocol/trace-context.js';
import type { Era } from '../../protocol/versions.js';
import type { CallOptions } from '../../upstream/types.js';
import type { Upstream } from '../../upstream/upstream.js';
import { toRpcError } from './errors.js';

type Result = Record<string, unknown>;
/** An exposed or upstream name fit for a span name (low cardinality, no free text). */
const NAME = /^[a-zA-Z0-9_./-]{1,128}$/;

/** The part of a span's target that goes in its name: tool and prompt names, never URIs (gen-ai/mcp.md). */
function targetAttributes(
  method: string,
  params: Result | undefined,
): { name: string; attributes: Attributes } {
  const attributes: Attributes = { 'mcp.method.name': method };
  let name = method;
  if (method === 'tools/call' && typeof params?.name === 'string') {
    attributes['gen_ai.tool.name'] = params.name.slice(0, 128);
    attributes['gen_ai.operation.name'] = 'execute_tool';
    if (NAME.test(params.name)) name = `${method} ${params.name}`;
  } else if (method === 'prompts/get' && typeof params?.name === 'string') {
    attributes['gen_ai.prompt.name'] = params.name.slice(0, 128);
    if (NAME.test(params.name)) name = `${method} ${params.name}`;
  } else if (typeof params?.uri === 'string') {
    attributes['mcp.resource.uri'] = params.uri.slice(0, 1024);
  }
  return { name, attributes };
}

/** `error.type` and the span's error status: the JSON-RPC code, and our stable code as the description. */
function recordError(span: Span, e: unknown): void {
  const err = toRpcError(e);
  span.setAttribute('error.type', String(err.code));
  span.setAttribute('rpc.response.status_code', String(err.code));
  // Never the message: it can carry an upstream's words or echo a configured secret (#13.4).
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: e instanceof ManifoldError ? e.code : err.data.manifold,
  });
}

function toolError(span: Span): void {
  span.setAttribute('error.type', 'tool_error');
  span.setStatus({ code: SpanStatusCode.ERROR, message: 'tool_error' });
}

/** What a request's span is made from (an Exchange, exchange.ts). */
interface Traced {
  request: JsonRpcRequest;
  meta: RequestMeta;
  http?: { header(name: string): string | undefined } | undefined;
  protocolVersion: string;
  era: Era;
  principal: Principal;
}

/** The tracer of one edge: starts each request's span. */
export class Tracing {
  constructor(private readonly tracer: Tracer) {}

  /**
   * The SERVER span of one request. Its parent is the trace context in the request's `_meta`, else
   * the one in its HTTP headers (an MCP request's context outranks its transport's: gen-ai/mcp.md,
   * "Context propagation"); when both are there and differ, the HTTP one is a link.
   */
  begin(ex: Traced): RequestTrace {
    const params = ex.request.params;
    // The client's trace context is not a reserved key: it is among the keys relayed upstream.
    const meta = ex.meta.relayed;
    const http = ex.http;
    const fromMeta = meta ? parseTraceparent(meta.traceparent, meta.tracestate) : undefined;
    const fromHttp = http
      ? parseTraceparent(http.header('traceparent'), http.header('tracestate'))
      : undefined;
    const parent = fromMeta ?? fromHttp;
    const baggage = parseBaggage(meta?.baggage) ?? parseBaggage(http?.header('baggage'));
    const { name, attributes } = targetAttributes(ex.request.method, params);
    attributes['jsonrpc.request.id'] = String(ex.request.id);
    attributes['mcp.protocol.version'] = ex.protocolVersion;
    attributes['network.transport'] = 'tcp';
    attributes['network.protocol.name'] = 'http';
    attributes['manifold.era'] = ex.era;
    attributes['manifold.tenant'] = ex.principal.tenant;
    const links: Link[] =
      fromMeta && fromHttp && fromHttp.spanId !== fromMeta.spanId ? [{ context: fromHttp }] : [];
    const span = this.tracer.startSpan(
      name,
      { kind: SpanKind.SERVER, attributes, links },
      parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT,
    );
    return new RequestTrace(this.tracer, span, baggage);
  }
}

/** One downstream request's span, and the upstream calls made for it. */
export class RequestTrace {
  /** Ended by the relay when its upstream call settles, not when the first reply is handed over. */
  held = false;
  private ended = false;
  private failed = false;
  private readonly context: Context;

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    /** The client's baggage, checked and bounded: it goes on to the upstream (W3C Baggage §3). */
    private readonly baggage: string | undefined,
  ) {
    this.context = trace.setSpan(ROOT_CONTEXT, span);
  }

  /** Ended by the relay rather than by dispatch (relay/relay.ts): returns itself. */
  hold(): this {
    this.held = true;
    return this;
  }

  /** The audit line's facts: its verdict, the server, and the reason of a refusal. */
  verdict(verdict: string, server: string | null, reason?: string): void {
    if (this.ended) return;
    this.span.setAttribute('manifold.verdict', verdict);
    if (server) this.span.setAttribute('manifold.server', server);
    if (reason) this.span.setAttribute('manifold.reason', reason);
    // A refusal is an error of this request; an upstream failure was recorded by `fail` already.
    if (verdict !== 'allowed' && !this.failed) {
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: reason ?? verdict });
    }
  }

  /** The request failed with `e` (thrown, or answered as an error). */
  fail(e: unknown): void {
    if (this.ended) return;
    this.failed = true;
    recordError(this.span, e);
  }

  /** The tool answered with `isError`: the request succeeded, the tool did not. */
  toolError(): void {
    if (!this.ended && !this.failed) toolError(this.span);
  }

  finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end();
  }

  /**
   * `upstream.request` inside a CLIENT span, ended when it settles (one more promise reaction,
   * only with tracing on). `_meta` carries this span's context instead of whatever the client sent
   * (its own span is this call's grandparent now). A cancelled call is `cancelled`; a refusal (the
   * cancellation's reason is ours) is that error; anything else is the upstream's.
   */
  call(upstream: Upstream, method: string, params: Result, options: CallOptions): Promise<Result> {
    const { name, attributes } = targetAttributes(method, params);
    attributes['manifold.server'] = upstream.name;
    attributes['manifold.upstream.era'] = upstream.era ?? 'unknown';
    attributes['network.transport'] = upstream.config.type === 'stdio' ? 'pipe' : 'tcp';
    const span = this.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, this.context);
    const meta: Result = isObject(params._meta) ? { ...params._meta } : {};
    const context: SpanContext = span.spanContext();
    meta.traceparent = formatTraceparent(context);
    const state = context.traceState?.serialize();
    if (state) meta.tracestate = state;
    else delete meta.tracestate;
    if (this.baggage) meta.baggage = this.baggage;
    else delete meta.baggage;
    const work = upstream.request(method, { ...params, _meta: meta }, options);
    work.then(
      (result) => {
        // A tool's own failure (`isError`) is `tool_error` (gen-ai/mcp.md, error.type).
        if (result.isError === true) {
          toolError(span);
          this.toolError();
        }
        span.end();
      },
      (e: unknown) => {
        const c = options.cancellation;
        if (c?.aborted && !(c.reason instanceof ManifoldError)) {
          // The client cancelled, or went away from a modern call: not the upstream's failure.
          span.setAttribute('error.type', 'cancelled');
          span.setStatus({ code: SpanStatusCode.ERROR, message: 'cancelled' });
        } else recordError(span, c?.aborted ? c.reason : e);
        span.end();
      },
    );
    return work;
  }
}
