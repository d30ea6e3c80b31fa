/**
 * A raw 2026-07-28 client for wire-level tests: every request a POST with the standard headers and
 * the per-request `_meta`, answers read as JSON or as an SSE stream of messages.
 */
import { encodeHeaderValue, nameField } from '../../src/protocol/headers.js';

export const MODERN = '2026-07-28';
export const META_PV = 'io.modelcontextprotocol/protocolVersion';
export const META_CAPS = 'io.modelcontextprotocol/clientCapabilities';
export const META_INFO = 'io.modelcontextprotocol/clientInfo';

export function modernMeta(caps: Record<string, unknown> = {}): Record<string, unknown> {
  return { [META_PV]: MODERN, [META_CAPS]: caps, [META_INFO]: { name: 'raw-modern', version: '1' } };
}

let nextId = 1;

export interface ModernAnswer {
  status: number;
  headers: Headers;
  /** The JSON-RPC response (the last message on a stream). */
  body: Record<string, unknown> & {
    result?: Record<string, unknown>;
    error?: { code: number; message: string; data?: Record<string, unknown> };
  };
  /** Every message, notifications first, when the answer was a stream. */
  messages: Record<string, unknown>[];
  /** The body as sent. */
  raw: string;
}

/** The standard headers for a method and params (Mcp-Method, Mcp-Name with the sentinel encoding). */
export function standardHeaders(method: string, params: Record<string, unknown>): Record<string, string> {
  const h: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
  };
  const field = nameField(method);
  const name = field ? params[field] : undefined;
  if (typeof name === 'string') h['mcp-name'] = encodeHeaderValue(name);
  return h;
}

export async function modernRequest(
  url: string,
  method: string,
  params: Record<string, unknown> = {},
  options: {
    headers?: Record<string, string>;
    meta?: Record<string, unknown> | null;
    id?: string | number;
    signal?: AbortSignal;
    /** Called with each message of a streamed answer as it arrives. */
    onMessage?: (message: Record<string, unknown>) => void;
  } = {},
): Promise<ModernAnswer> {
  const full: Record<string, unknown> = { ...params };
  if (options.meta !== null)
    full._meta = { ...modernMeta(), ...(options.meta ?? {}), ...((params._meta as object) ?? {}) };
  const headers = { ...standardHeaders(method, full), ...(options.headers ?? {}) };
  for (const [k, v] of Object.entries(headers)) if (v === '') delete headers[k];
  const id = options.id ?? `m${nextId++}`;
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: full }),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const type = res.headers.get('content-type') ?? '';
  if (type.includes('text/event-stream')) {
    const raw = options.onMessage ? await readStream(res, options.onMessage) : await res.text();
    const messages = parseSse(raw);
    return {
      status: res.status,
      headers: res.headers,
      body: (messages.at(-1) ?? {}) as ModernAnswer['body'],
      messages,
      raw,
    };
  }
  const text = await res.text();
  const body = text ? (JSON.parse(text) as ModernAnswer['body']) : ({} as ModernAnswer['body']);
  return { status: res.status, headers: res.headers, body, messages: [body], raw: text };
}

/** The whole text of an SSE answer, handing each complete event's message to `onMessage` as it comes. */
async function readStream(res: Response, onMessage: (m: Record<string, unknown>) => void): Promise<string> {
  const decoder = new TextDecoder();
  let raw = '';
  let done = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    raw += decoder.decode(chunk, { stream: true });
    const end = raw.lastIndexOf('\n\n');
    if (end < done) continue;
    for (const m of parseSse(raw.slice(done, end))) onMessage(m);
    done = end + 2;
  }
  for (const m of parseSse(raw.slice(done))) onMessage(m);
  return raw;
}

export function parseSse(text: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart())
      .join('\n');
    if (data) out.push(JSON.parse(data) as Record<string, unknown>);
  }
  return out;
}

/** Opens subscriptions/listen and yields its messages as they arrive, until `close()`. */
export async function modernListen(
  url: string,
  notifications: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{
  messages: Record<string, unknown>[];
  status: number;
  responseHeaders: Headers;
  close(): void;
  next(pred: (m: Record<string, unknown>) => boolean, ms?: number): Promise<Record<string, unknown>>;
}> {
  const ac = new AbortController();
  const params = { notifications, _meta: modernMeta() };
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...standardHeaders('subscriptions/listen', params), ...headers },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: `listen-${nextId++}`,
      method: 'subscriptions/listen',
      params,
    }),
    signal: ac.signal,
  });
  const messages: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  void (async () => {
    if (!res.body) return;
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        const parts = buf.split(/\r?\n\r?\n/);
        buf = parts.pop() ?? '';
        for (const p of parts) messages.push(...parseSse(`${p}\n\n`));
        for (const w of waiters.splice(0)) w();
      }
    } catch {
      // aborted
    }
  })();
  return {
    messages,
    status: res.status,
    responseHeaders: res.headers,
    close: () => ac.abort(),
    async next(pred, ms = 10_000) {
      const until = Date.now() + ms;
      for (;;) {
        const found = messages.find(pred);
        if (found) return found;
        if (Date.now() > until)
          throw new Error(`no matching message on the listen stream: ${JSON.stringify(messages)}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 100);
        });
      }
    },
  };
}
