/**
 * A raw 2025-era client for wire-level tests: initialize over fetch, then POSTs with the session
 * header, answers read as JSON or as SSE events (with their ids, so resumption can be tested).
 */
export const ACCEPT = 'application/json, text/event-stream';

export interface SseEvent {
  id?: string;
  retry?: number;
  data: string;
}

/** Every event of an SSE body, priming events (no data) included. */
export function sseEvents(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    if (block.trim() === '' || block.startsWith(':')) continue;
    const e: SseEvent = { data: '' };
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith('id:')) e.id = line.slice(3).trim();
      else if (line.startsWith('retry:')) e.retry = Number(line.slice(6).trim());
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
    e.data = data.join('\n');
    out.push(e);
  }
  return out;
}

/** The JSON-RPC messages of an SSE body (events without data, such as priming events, left out). */
export function sseMessages(text: string): Record<string, unknown>[] {
  return sseEvents(text)
    .filter((e) => e.data !== '')
    .map((e) => JSON.parse(e.data) as Record<string, unknown>);
}

/** Opens a session; returns the headers every later POST needs. */
export async function legacySession(
  url: string,
  options: {
    version?: string;
    capabilities?: Record<string, unknown>;
    headers?: Record<string, string>;
  } = {},
): Promise<Record<string, string>> {
  const version = options.version ?? '2025-11-25';
  const init = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, ...(options.headers ?? {}) },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: {
        protocolVersion: version,
        capabilities: options.capabilities ?? {},
        clientInfo: { name: 'raw', version: '1' },
      },
    }),
  });
  if (!init.ok) throw new Error(`initialize failed: ${init.status} ${await init.text()}`);
  await init.text();
  return {
    'content-type': 'application/json',
    accept: ACCEPT,
    'mcp-session-id': init.headers.get('mcp-session-id')!,
    'mcp-protocol-version': version,
    ...(options.headers ?? {}),
  };
}

let nextId = 1;

/** One request on a session: the final message (the last on a stream), and every message. */
export async function legacyRequest(
  url: string,
  headers: Record<string, string>,
  method: string,
  params: Record<string, unknown> = {},
): Promise<{
  body: Record<string, unknown>;
  messages: Record<string, unknown>[];
  raw: string;
  status: number;
}> {
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  const raw = await res.text();
  const messages = (res.headers.get('content-type') ?? '').includes('text/event-stream')
    ? sseMessages(raw)
    : [JSON.parse(raw) as Record<string, unknown>];
  return { body: messages.at(-1) ?? {}, messages, raw, status: res.status };
}
