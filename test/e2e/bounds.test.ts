import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  eventually,
  FIXTURE,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

function text(res: unknown): string {
  return ((res as { content: { text: string }[] }).content[0] as { text: string }).text;
}

describe('bounds and filters through the gateway', () => {
  let gw: TestGateway;
  let client: Client;
  const stats = async () => JSON.parse(text(await client.callTool({ name: 'fx__stats', arguments: {} })));

  beforeAll(async () => {
    gw = await startTestGateway({
      mcpServers: {
        fx: { command: process.execPath, args: [FIXTURE], timeoutMs: 400, tools: { deny: ['grow'] } },
      },
      gateway: { callTimeoutMs: 400, maxCallTimeoutMs: 1200, maxSessions: 2 },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
  });

  it('E2: progress extends the idle deadline but not past the absolute maximum, and the call is cancelled upstream', async () => {
    const before = await stats();
    let progress = 0;
    const err = await client
      .callTool({ name: 'fx__tick', arguments: {} }, CallToolResultSchema, {
        onprogress: () => {
          progress++;
        },
        timeout: 30_000,
      })
      .catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/absolute maximum of 1200 ms.*outcome is unknown/);
    // More progress than one idle window (400 ms at 100 ms a tick) proves progress reset the deadline.
    expect(progress).toBeGreaterThan(4);
    await eventually(async () => (await stats()).cancelled === before.cancelled + 1, 'cancellation upstream');
  });

  it('a tool hidden by tools.deny fails exactly like an unknown tool, in calls and in describe_tool', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).not.toContain('fx__grow');
    const hidden = await client.callTool({ name: 'fx__grow', arguments: {} }).catch((e: Error) => e.message);
    const unknown = await client
      .callTool({ name: 'fx__nothing', arguments: {} })
      .catch((e: Error) => e.message);
    expect(String(hidden).replace('fx__grow', 'X')).toBe(String(unknown).replace('fx__nothing', 'X'));
  });

  it('E5: the session table is bounded; an evicted session gets 404', async () => {
    const init = (n: number) =>
      fetch(gw.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: n,
          method: 'initialize',
          params: {
            protocolVersion: '2025-11-25',
            capabilities: {},
            clientInfo: { name: 'x', version: '1' },
          },
        }),
      });
    const first = (await init(1)).headers.get('mcp-session-id')!;
    await init(2);
    await init(3);
    const ping = await fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'mcp-session-id': first },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }),
    });
    expect(ping.status).toBe(404);
  });
});
