import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFERENCE } from '../helpers/clients.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { legacySession, type SseEvent, sseEvents } from '../helpers/legacy.js';

/**
 * Resumable POST streams for 2025-11-25 clients (transports, "Resumability and Redelivery";
 * SEP-1699): a priming event with an id and a retry first, ids on every event, a call that runs
 * on when the connection drops (or when the gateway closes it on purpose, `streamPollMs`), and a
 * GET with Last-Event-ID that delivers what was missed, the result included.
 */

type Obj = Record<string, unknown>;

async function post(url: string, headers: Record<string, string>, id: number, name: string, meta?: Obj) {
  return fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: {
        name,
        arguments: name.endsWith('slow_compute') ? { seconds: 0.5 } : {},
        ...(meta ? { _meta: meta } : {}),
      },
    }),
  });
}

async function resume(
  url: string,
  headers: Record<string, string>,
  lastEventId: string,
): Promise<SseEvent[]> {
  const { 'content-type': _c, ...rest } = headers;
  const res = await fetch(url, {
    method: 'GET',
    headers: { ...rest, accept: 'text/event-stream', 'last-event-id': lastEventId },
  });
  expect(res.status).toBe(200);
  return sseEvents(await res.text());
}

const message = (e: SseEvent) => (e.data ? (JSON.parse(e.data) as Obj) : undefined);

describe('resumable streams for 2025-11-25 clients', () => {
  let polling: TestGateway;
  let plain: TestGateway;

  beforeAll(async () => {
    const servers = { ref: { command: process.execPath, args: [REFERENCE, 'stdio'] } };
    [polling, plain] = await Promise.all([
      startTestGateway({ mcpServers: servers, gateway: { streamPollMs: 150 } }),
      startTestGateway({ mcpServers: servers }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await polling?.stop();
    await plain?.stop();
  });

  it('a call still running after streamPollMs: a priming event, the stream closes, and GET with Last-Event-ID brings the result', async () => {
    const headers = await legacySession(polling.url);
    const res = await post(polling.url, headers, 7, 'ref__slow_compute');
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = sseEvents(await res.text());
    // Only the priming event: an id, a retry, no data; the result did not come on this connection.
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ data: '', retry: 1000 });
    expect(events[0]!.id).toMatch(/_0$/);
    const rest = await resume(polling.url, headers, events[0]!.id!);
    const result = rest.map(message).find((m) => m?.id === 7);
    expect(result?.result).toMatchObject({ content: [{ type: 'text', text: 'Computed result after 0.5s' }] });
    expect(rest.every((e) => e.id !== undefined)).toBe(true);
  });

  it('a dropped connection loses nothing: the call runs on and the reconnect replays the rest', async () => {
    const headers = await legacySession(plain.url);
    const audited = () => plain.logs.filter((l) => l.event === 'audit.tools_call').length;
    const before = audited();
    const ac = new AbortController();
    const res = await fetch(plain.url, {
      method: 'POST',
      headers,
      signal: ac.signal,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 8,
        method: 'tools/call',
        params: { name: 'ref__test_tool_with_progress', arguments: {}, _meta: { progressToken: 'p' } },
      }),
    });
    // Read up to the first progress notification, then drop the connection.
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let text = '';
    while (!sseEvents(text).some((e) => message(e)?.method === 'notifications/progress')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    ac.abort();
    const seen = sseEvents(text).filter((e) => e.id !== undefined);
    expect(message(seen.at(-1)!)).toMatchObject({
      method: 'notifications/progress',
      params: { progress: 0 },
    });
    // The call runs on with nobody connected: its audit line says it finished.
    await eventually(() => audited() > before, 'the call to finish with the connection gone');
    const rest = await resume(plain.url, headers, seen.at(-1)!.id!);
    const messages = rest.map(message);
    expect(
      messages.filter((m) => m?.method === 'notifications/progress').map((m) => (m!.params as Obj).progress),
    ).toEqual([50, 100]);
    expect(messages.at(-1)).toMatchObject({ id: 8, result: { content: expect.any(Array) } });
  });

  it('older revisions get plain streams: no priming event, no ids, no polling', async () => {
    const headers = await legacySession(polling.url, { version: '2025-06-18' });
    const res = await post(polling.url, headers, 9, 'ref__slow_compute');
    const text = await res.text();
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(JSON.parse(text)).toMatchObject({ id: 9, result: { content: expect.any(Array) } });
  });

  it('a Last-Event-ID the session does not know opens the standalone stream instead', async () => {
    const headers = await legacySession(plain.url);
    const { 'content-type': _c, ...rest } = headers;
    const ac = new AbortController();
    const res = await fetch(plain.url, {
      method: 'GET',
      headers: { ...rest, accept: 'text/event-stream', 'last-event-id': 'nope_3' },
      signal: ac.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    ac.abort();
  });
});
