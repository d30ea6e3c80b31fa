/**
 * The egress guard every upstream request, JWKS and metadata fetch goes through. Runtime-neutral:
 * it wraps whatever the runtime sends requests with (on Node, undici on connections whose address
 * is checked at connect time, deploy/node/runtime/egress.ts) and adds what every runtime needs:
 *
 * - the URL check (scheme, credentials, allowlist, IP literals) before every hop;
 * - redirects followed by hand, at most `maxRedirects` hops, each hop checked again, so a public
 *   upstream cannot bounce the gateway to 169.254.169.254 (SECURITY D5);
 * - the body cap, applied while the body streams, so a huge answer never sits whole in memory.
 *
 * Two entries share these rules: `guardedFetch` (a real fetch, for the SDK transports, jose and
 * OAuth) and `guardedPost` (the direct caller's `Platform.postJson`).
 */
import { findCause, ManifoldError } from '../../errors.js';
import { type EgressPolicy, egressDeniedError } from '../../guards/egress/policy.js';
import type { JsonAnswer, JsonPost, Platform, PostJson } from '../../platform.js';

export interface GuardedFetchOptions {
  policy: EgressPolicy;
  /** Redirect hops followed (each checked again); one more is refused. Default 3. */
  maxRedirects?: number;
  /**
   * Cap on one response body while it streams. For `text/event-stream` responses, which stay open
   * for the life of a session, it caps each event instead (the bytes between two blank lines).
   */
  maxBodyBytes: number;
  /** Told the log-only reason whenever egress is refused (the thrown error stays generic). */
  onDenied?: (reason: string) => void;
}

// Fetch Standard: the redirect statuses and null body statuses (§2.2.3).
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
export const NULL_BODY_STATUSES: ReadonlySet<number> = new Set([101, 103, 204, 205, 304]);
const REQUEST_BODY_HEADERS = [
  'content-encoding',
  'content-language',
  'content-location',
  'content-type',
  'content-length',
];
// The Fetch Standard drops only Authorization on a cross-origin redirect. Configured upstream
// headers often carry secrets under other names (x-api-key …), so a hop to another origin keeps
// only the protocol's own headers and drops everything else.
const CROSS_ORIGIN_KEPT = new Set([
  'accept',
  'content-type',
  'content-length',
  'mcp-protocol-version',
  'user-agent',
]);

const policies = new WeakMap<object, EgressPolicy>();

/**
 * The policy a fetch built by `guardedFetch` checks against, or undefined for any other fetch.
 * Lets a transport refuse a statically denied URL before it builds anything, and lets it leave
 * redirects to this fetch only when the fetch really checks them.
 */
export function egressPolicyOf(f: unknown): EgressPolicy | undefined {
  return typeof f === 'function' ? policies.get(f) : undefined;
}

/** Marks `f` as checking `policy` on every request, as a fetch from `guardedFetch` does: for a wrapper around one. */
export function checksEgress<F extends object>(f: F, policy: EgressPolicy): F {
  policies.set(f, policy);
  return f;
}

/** One request on its way: where it goes now, and what it carries (a redirect may change both). */
interface Hop {
  url: URL;
  method: string;
  headers: HeadersInit | undefined;
  body: BodyInit | null;
}

/** What the guard reads of an answer to follow it: a Response, or a JsonAnswer. */
interface Answer {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  readonly body: ReadableStream<Uint8Array> | null;
}

type RedirectMode = NonNullable<RequestInit['redirect']>;

/** The URL check and redirect rules, validated once; `follow` runs one request through them. */
function egressGuard(options: Omit<GuardedFetchOptions, 'maxBodyBytes'>, what: string) {
  const { policy, onDenied } = options;
  const maxRedirects = options.maxRedirects ?? 3;
  if (!policy || typeof policy.checkUrl !== 'function' || typeof policy.checkAddress !== 'function') {
    throw new ManifoldError('ERR_CONFIG', `${what}: policy must be an egress policy`);
  }
  if (!Number.isInteger(maxRedirects) || maxRedirects < 0 || maxRedirects > 20) {
    throw new ManifoldError('ERR_CONFIG', `${what}: maxRedirects must be an integer from 0 to 20`);
  }
  const refuse = (reason: string): ManifoldError => {
    onDenied?.(reason);
    return egressDeniedError(reason);
  };

  /** Sends `hop` with `send`, and each redirect after it that the rules allow; the last answer. */
  async function follow<A extends Answer>(
    hop: Hop,
    mode: RedirectMode,
    send: (hop: Hop) => Promise<A>,
  ): Promise<A> {
    let { url, method, headers, body } = hop;
    for (let hops = 0; ; hops++) {
      const verdict = policy.checkUrl(url);
      if (!verdict.ok) throw refuse(verdict.reason);
      let answer: A;
      try {
        answer = await send({ url, method, headers, body });
      } catch (e) {
        // A guard below (the Node connect-time DNS check) refused: surface its own error, not the
        // runtime's generic "fetch failed" around it.
        const denied = findCause(e, (x) =>
          x instanceof ManifoldError && x.code === 'ERR_EGRESS_DENIED' ? x : undefined,
        );
        if (denied) {
          onDenied?.(String(denied.data?.reason ?? 'refused at connect time'));
          throw denied;
        }
        throw e;
      }
      const location = REDIRECT_STATUSES.has(answer.status) ? answer.headers.get('location') : null;
      // A 3xx without Location is a final response (Fetch Standard §4.4, HTTP-redirect fetch).
      if (location === null || mode === 'manual') return answer;
      await answer.body?.cancel().catch(() => {});
      if (mode === 'error') throw new TypeError('fetch failed: redirect received with redirect mode "error"');
      if (hops >= maxRedirects) throw refuse(`more than ${maxRedirects} redirects`);
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new ManifoldError('ERR_UPSTREAM_ERROR', 'the upstream answered with an invalid redirect');
      }
      const status = answer.status;
      // HTTP-redirect fetch: 301/302 turn POST into GET, 303 turns anything but GET/HEAD into
      // GET, and the body and its headers go. 307/308 keep method and body.
      if (
        ((status === 301 || status === 302) && method === 'POST') ||
        (status === 303 && method !== 'GET' && method !== 'HEAD')
      ) {
        method = 'GET';
        body = null;
        const edited = new Headers(headers);
        for (const h of REQUEST_BODY_HEADERS) edited.delete(h);
        headers = edited;
      } else if (body instanceof ReadableStream) {
        // HTTP-redirect fetch: a streamed body was consumed by the first request; no replay.
        throw new ManifoldError(
          'ERR_UPSTREAM_ERROR',
          'the upstream redirected a request whose body cannot be re-sent',
        );
      }
      // HTTP-redirect fetch drops Authorization when the redirect leaves the origin; see above.
      if (next.origin !== url.origin) {
        const edited = new Headers(headers);
        for (const h of [...edited.keys()]) if (!CROSS_ORIGIN_KEPT.has(h)) edited.delete(h);
        headers = edited;
      }
      url = next;
    }
  }
  return { follow };
}

function validCap(maxBodyBytes: number, what: string): number {
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1) {
    throw new ManifoldError('ERR_CONFIG', `${what}: maxBodyBytes must be a positive integer`);
  }
  return maxBodyBytes;
}

/**
 * Wraps a fetch with the egress policy, hand-followed redirects and the streaming body cap.
 * Request bodies given as strings or bytes (what the MCP SDK sends) can be re-sent on 307/308.
 *
 * @example
 * const policy = egressPolicy({ allowedHosts: ['mcp.example.com'] });
 * const f = guardedFetch(fetch, { policy, maxBodyBytes: 8 * 1024 * 1024 });
 * await f('https://mcp.example.com/mcp', { method: 'POST', body: '{}' }); // checked at each hop
 * await f('http://169.254.169.254/'); // throws ManifoldError ERR_EGRESS_DENIED, nothing sent
 */
export function guardedFetch(base: typeof fetch, options: GuardedFetchOptions): typeof fetch {
  const guard = egressGuard(options, 'guardedFetch');
  const maxBodyBytes = validCap(options.maxBodyBytes, 'guardedFetch');
  const egressFetch = async function egressFetch(
    input: RequestInfo | URL,
    init?: RequestInit,
  ): Promise<Response> {
    const { hop, mode, rest } = await outgoing(input, init);
    const response = await guard.follow(hop, mode, ({ url, method, headers, body }) =>
      base(url.href, {
        ...rest,
        method,
        headers,
        body,
        redirect: 'manual',
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
      } as RequestInit),
    );
    return capBody(response, maxBodyBytes);
  };
  policies.set(egressFetch, options.policy);
  return egressFetch;
}

/** One exchange as a runtime sends it, without the guard: what `guardedPost` wraps. */
export type SendHop = (request: {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body: string | null;
  signal: AbortSignal;
}) => Promise<JsonAnswer>;

/**
 * `Platform.postJson` over a runtime's own exchange: the URL check and hand-followed redirects of
 * `guardedFetch`. The body cap is `send`'s to apply while it reads, since the answer never passes
 * through a web stream here.
 *
 * @example
 * const post = guardedPost(undiciExchange, { policy });
 * await post({ url: 'https://mcp.example.com/mcp', headers, body: '{}', signal }); // checked at each hop
 */
export function guardedPost(send: SendHop, options: Omit<GuardedFetchOptions, 'maxBodyBytes'>): PostJson {
  const guard = egressGuard(options, 'guardedPost');
  return (request) => {
    const { signal } = request;
    const hop: Hop = {
      url: request.url instanceof URL ? request.url : new URL(request.url),
      method: 'POST',
      headers: request.headers,
      body: request.body,
    };
    return guard.follow(hop, 'follow', ({ url, method, headers, body }) =>
      send({ url, method, headers: headerRecord(headers), body: body as string | null, signal }),
    );
  };
}

/** The headers as a record, as given until a redirect edited them into a Headers. */
function headerRecord(headers: HeadersInit | undefined): Record<string, string> {
  if (headers instanceof Headers) return Object.fromEntries(headers);
  return (headers ?? {}) as Record<string, string>;
}

/** How the direct caller POSTs: the platform's `postJson`, or its `fetch` where it has none (a Response is a JsonAnswer). */
export function postJsonOf(platform: Pick<Platform, 'fetch' | 'postJson'>): PostJson {
  const { fetch } = platform;
  return (
    platform.postJson ??
    (({ url, headers, body, signal }: JsonPost) => fetch(url, { method: 'POST', headers, body, signal }))
  );
}

async function outgoing(
  input: RequestInfo | URL,
  init: RequestInit | undefined,
): Promise<{ hop: Hop; mode: RedirectMode; rest: RequestInit }> {
  if (typeof input === 'string' || input instanceof URL) {
    const { method, headers, body, redirect, ...rest } = init ?? {};
    return {
      hop: { url: new URL(input), method: normalizeMethod(method ?? 'GET'), headers, body: body ?? null },
      mode: redirect ?? 'follow',
      rest,
    };
  }
  // A Request: its body is a one-shot stream, so read it once into bytes that can be re-sent.
  const request = new Request(input, init);
  const body = request.body === null ? null : await request.arrayBuffer();
  return {
    hop: { url: new URL(request.url), method: request.method, headers: new Headers(request.headers), body },
    mode: request.redirect,
    rest: { signal: request.signal },
  };
}

/** Fetch Standard "normalize a method": the standard names are matched case-insensitively. */
function normalizeMethod(method: string): string {
  const upper = method.toUpperCase();
  return ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT'].includes(upper) ? upper : method;
}

// ---------------------------------------------------------------------------------------------
// Body cap

export function bodyTooLarge(max: number, what = 'the upstream response'): ManifoldError {
  return new ManifoldError(
    'ERR_UPSTREAM_BODY_TOO_LARGE',
    `${what} exceeded maxUpstreamBodyBytes (${max} bytes)`,
  );
}

/** Whether a Content-Type is an event stream (HTML Standard §9.2: `text/event-stream`). */
export function isEventStream(contentType: string | null | undefined): boolean {
  return /^\s*text\/event-stream\s*(;|$)/i.test(contentType ?? '');
}

/** A declared Content-Length over `max`; a length that is not plain digits is left to the reader. */
export function declaredOver(contentLength: string | null | undefined, max: number): boolean {
  const declared = contentLength?.trim();
  return declared !== undefined && /^[0-9]+$/.test(declared) && Number(declared) > max;
}

/**
 * Re-wraps a response so its body errors once it exceeds the cap. The check runs chunk by chunk
 * as the consumer reads, with backpressure, so at most about one chunk beyond the cap is ever
 * held. A declared Content-Length over the cap is refused before reading anything.
 */
function capBody(response: Response, max: number): Response {
  if (NULL_BODY_STATUSES.has(response.status)) return response;
  const eventStream = isEventStream(response.headers.get('content-type'));
  if (!eventStream) {
    const length = response.headers.get('content-length');
    if (declaredOver(length, max)) {
      void response.body?.cancel().catch(() => {});
      throw bodyTooLarge(max);
    }
    // A declared length within the cap needs no counting: HTTP framing (enforced by undici and
    // by Workers' fetch) ends the body there, so it cannot grow past what was declared.
    if (length !== null && /^[0-9]+$/.test(length.trim())) return response;
  }
  if (response.body === null) return response;
  const body = response.body.pipeThrough(eventStream ? eventCap(max) : totalCap(max));
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

function totalCap(max: number): TransformStream<Uint8Array, Uint8Array> {
  let seen = 0;
  return new TransformStream({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (seen > max) controller.error(bodyTooLarge(max));
      else controller.enqueue(chunk);
    },
  });
}

const CR = 0x0d;
const LF = 0x0a;

/**
 * An event stream is long-lived by design (the standalone GET stream lasts as long as the session),
 * so a total cap would eventually cut every healthy session. What must stay bounded is what a
 * parser has to buffer: one event. Per the HTML Standard's event-stream format (§9.2.5-6), lines end
 * in CRLF, LF or CR and an empty line ends an event, so this counts the bytes since the last empty
 * line and errors when one event grows past the cap.
 */
export function eventCap(max: number): TransformStream<Uint8Array, Uint8Array> {
  let eventBytes = 0;
  let lineEmpty = true;
  let afterCR = false;
  return new TransformStream({
    transform(chunk, controller) {
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i]!;
        eventBytes++;
        if (b === LF && afterCR) {
          // The LF of a CRLF: the line already ended at the CR.
          afterCR = false;
          continue;
        }
        afterCR = b === CR;
        if (b === CR || b === LF) {
          if (lineEmpty) eventBytes = 0;
          lineEmpty = true;
          continue;
        }
        lineEmpty = false;
        if (eventBytes > max) {
          controller.error(bodyTooLarge(max, 'one upstream event-stream event'));
          return;
        }
      }
      controller.enqueue(chunk);
    },
  });
}
