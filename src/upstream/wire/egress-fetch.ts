/**
 * The egress fetch every upstream request, JWKS and metadata fetch goes through. Runtime-neutral:
 * it wraps whatever fetch the runtime has (on Node one whose connect-time DNS check is built in,
 * see deploy/node/egress.ts) and adds what every runtime needs:
 *
 * - the URL check (scheme, credentials, allowlist, IP literals) before the first request;
 * - redirects followed by hand, at most `maxRedirects` hops, each hop checked again, so a public
 *   upstream cannot bounce the gateway to 169.254.169.254 (SECURITY D5);
 * - the body cap, applied while the body streams, so a huge answer never sits whole in memory.
 */
import { ManifoldError } from '../../errors.js';
import { type EgressPolicy, egressDeniedError, type Verdict } from '../../guards/egress/policy.js';

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
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
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

/**
 * Marks `f` as checking `policy` on every request, as a fetch from `guardedFetch` does: for a
 * wrapper that defers to one (Node's, which loads undici on the first request).
 */
export function checksEgress<F extends object>(f: F, policy: EgressPolicy): F {
  policies.set(f, policy);
  return f;
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
  const { policy, onDenied } = options;
  const maxRedirects = options.maxRedirects ?? 3;
  const maxBodyBytes = options.maxBodyBytes;
  if (!policy || typeof policy.checkUrl !== 'function' || typeof policy.checkAddress !== 'function') {
    throw new ManifoldError('ERR_CONFIG', 'guardedFetch: policy must be an egress policy');
  }
  if (!Number.isInteger(maxRedirects) || maxRedirects < 0 || maxRedirects > 20) {
    throw new ManifoldError('ERR_CONFIG', 'guardedFetch: maxRedirects must be an integer from 0 to 20');
  }
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1) {
    throw new ManifoldError('ERR_CONFIG', 'guardedFetch: maxBodyBytes must be a positive integer');
  }

  const refuse = (reason: string): ManifoldError => {
    onDenied?.(reason);
    return egressDeniedError(reason);
  };

  // The URL check is pure, and an upstream's endpoint is the same string on every call: remember
  // verdicts per href (bounded), so the hot path does not re-run the allowlist and IP rules.
  const verdicts = new Map<string, Verdict>();
  const checkUrl = (url: URL): Verdict => {
    let v = verdicts.get(url.href);
    if (!v) {
      v = policy.checkUrl(url);
      if (verdicts.size >= 256) verdicts.clear();
      verdicts.set(url.href, v);
    }
    return v;
  };

  // Parsed once per endpoint string (bounded); URLs are never mutated here, only replaced.
  const urls = new Map<string, URL>();
  const parse = (href: string): URL => {
    let url = urls.get(href);
    if (!url) {
      url = new URL(href);
      if (urls.size >= 256) urls.clear();
      urls.set(href, url);
    }
    return url;
  };

  const egressFetch = async function egressFetch(
    input: RequestInfo | URL,
    init?: RequestInit,
  ): Promise<Response> {
    const request = await outgoing(input, init, parse);
    let { url, method, body, headers } = request;
    const { mode, rest } = request;
    for (let hop = 0; ; hop++) {
      const verdict = checkUrl(url);
      if (!verdict.ok) throw refuse(verdict.reason);
      let response: Response;
      try {
        // `rest` holds none of the keys written here (outgoing takes them out).
        const sent: Record<string, unknown> = { method, headers, body, redirect: 'manual', ...rest };
        if (body instanceof ReadableStream) sent.duplex = 'half';
        response = await base(url.href, sent as RequestInit);
      } catch (e) {
        // A guard below (the Node connect-time DNS check) refused: surface its own error, not the
        // runtime's generic "fetch failed" around it.
        const denied = egressErrorIn(e);
        if (denied) {
          onDenied?.(String(denied.data?.reason ?? 'refused at connect time'));
          throw denied;
        }
        throw e;
      }
      const location = REDIRECT_STATUSES.has(response.status) ? response.headers.get('location') : null;
      // A 3xx without Location is a final response (Fetch Standard §4.4, HTTP-redirect fetch).
      if (location === null || mode === 'manual') return capBody(response, maxBodyBytes);
      await response.body?.cancel().catch(() => {});
      if (mode === 'error') throw new TypeError('fetch failed: redirect received with redirect mode "error"');
      if (hop >= maxRedirects) throw refuse(`more than ${maxRedirects} redirects`);
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new ManifoldError('ERR_UPSTREAM_ERROR', 'the upstream answered with an invalid redirect');
      }
      const status = response.status;
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
  };
  policies.set(egressFetch, policy);
  return egressFetch;
}

interface Outgoing {
  url: URL;
  method: string;
  /** As the caller gave them until a redirect has to edit them (most requests never redirect). */
  headers: HeadersInit | undefined;
  body: BodyInit | null;
  mode: NonNullable<RequestInit['redirect']>;
  rest: RequestInit;
}

async function outgoing(
  input: RequestInfo | URL,
  init: RequestInit | undefined,
  parse: (href: string) => URL,
): Promise<Outgoing> {
  if (typeof input === 'string' || input instanceof URL) {
    const { method, headers, body, redirect, ...rest } = init ?? {};
    return {
      url: input instanceof URL ? input : parse(input),
      method: normalizeMethod(method ?? 'GET'),
      headers,
      body: body ?? null,
      mode: redirect ?? 'follow',
      rest,
    };
  }
  // A Request: its body is a one-shot stream, so read it once into bytes that can be re-sent.
  const request = new Request(input, init);
  const body = request.body === null ? null : await request.arrayBuffer();
  return {
    url: new URL(request.url),
    method: request.method,
    headers: new Headers(request.headers),
    body,
    mode: request.redirect,
    rest: { signal: request.signal },
  };
}

/** Fetch Standard "normalize a method": the standard names are matched case-insensitively. */
function normalizeMethod(method: string): string {
  const upper = method.toUpperCase();
  return ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT'].includes(upper) ? upper : method;
}

function egressErrorIn(e: unknown, depth = 0): ManifoldError | undefined {
  if (depth > 5 || typeof e !== 'object' || e === null) return undefined;
  if (e instanceof ManifoldError) return e.code === 'ERR_EGRESS_DENIED' ? e : undefined;
  const nested = [
    (e as { cause?: unknown }).cause,
    ...(((e as { errors?: unknown }).errors as unknown[]) ?? []),
  ];
  for (const n of nested) {
    const found = egressErrorIn(n, depth + 1);
    if (found) return found;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Body cap

function tooLarge(max: number, what = 'the upstream response'): ManifoldError {
  return new ManifoldError(
    'ERR_UPSTREAM_BODY_TOO_LARGE',
    `${what} exceeded maxUpstreamBodyBytes (${max} bytes)`,
  );
}

function isEventStream(contentType: string | null): boolean {
  return /^\s*text\/event-stream\s*(;|$)/i.test(contentType ?? '');
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
    const declared = response.headers.get('content-length')?.trim();
    if (declared !== undefined && /^[0-9]+$/.test(declared)) {
      if (Number(declared) > max) {
        void response.body?.cancel().catch(() => {});
        throw tooLarge(max);
      }
      // A declared length within the cap needs no counting: HTTP framing (enforced by undici and
      // by Workers' fetch) ends the body there, so it cannot grow past what was declared.
      return response;
    }
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
      if (seen > max) controller.error(tooLarge(max));
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
function eventCap(max: number): TransformStream<Uint8Array, Uint8Array> {
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
          controller.error(tooLarge(max, 'one upstream event-stream event'));
          return;
        }
      }
      controller.enqueue(chunk);
    },
  });
}
