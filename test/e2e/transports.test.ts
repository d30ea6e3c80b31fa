import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  EVERYTHING,
  type Spawned,
  startEverythingHttp,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

// One gateway, three transports: server-everything over streamable HTTP, over the older
// HTTP+SSE transport, and over stdio, each a real process on loopback.
describe('upstream transports: streamable HTTP, SSE and stdio behind one gateway', () => {
  let http: Spawned;
  let sse: Spawned;
  let gw: TestGateway;
  let client: Client;

  beforeAll(async () => {
    [http, sse] = await Promise.all([startEverythingHttp('streamableHttp'), startEverythingHttp('sse')]);
    gw = await startTestGateway({
      mcpServers: {
        ehttp: { type: 'streamable-http', url: http.url },
        esse: { type: 'sse', url: sse.url },
        estdio: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
      },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
    await Promise.all([http?.stop(), sse?.stop()]);
  });

  it('/healthz reports each upstream ready with its own transport', async () => {
    const h = await (await fetch(gw.url.replace('/mcp', '/healthz'))).json();
    expect(h.status).toBe('ok');
    const byName = Object.fromEntries(
      h.upstreams.map((u: { name: string; transport: string; state: string; tools: number }) => [u.name, u]),
    );
    expect(byName.ehttp).toMatchObject({ transport: 'streamable-http', state: 'ready' });
    expect(byName.esse).toMatchObject({ transport: 'sse', state: 'ready' });
    expect(byName.estdio).toMatchObject({ transport: 'stdio', state: 'ready' });
    for (const n of ['ehttp', 'esse', 'estdio']) expect(byName[n].tools).toBeGreaterThan(0);
  });

  it('merges the tools of all three transports into one list', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const server of ['ehttp', 'esse', 'estdio']) {
      expect(names).toContain(`${server}__echo`);
      expect(names).toContain(`${server}__trigger-long-running-operation`);
    }
    expect(new Set(names).size).toBe(names.length);
    // The same server behind three transports offers the same tool set under each prefix.
    const suffixes = (p: string) =>
      names
        .filter((n) => n.startsWith(`${p}__`))
        .map((n) => n.slice(p.length + 2))
        .sort();
    expect(suffixes('ehttp')).toEqual(suffixes('estdio'));
    expect(suffixes('esse')).toEqual(suffixes('estdio'));
  });

  it('calls echo through each transport and gets that call’s own answer', async () => {
    const results = await Promise.all(
      ['ehttp', 'esse', 'estdio'].map((s) =>
        client.callTool({ name: `${s}__echo`, arguments: { message: `via ${s}` } }),
      ),
    );
    for (const [i, s] of ['ehttp', 'esse', 'estdio'].entries()) {
      const res = results[i]!;
      expect(res.isError).toBeFalsy();
      const text = JSON.stringify(res.content);
      expect(text).toContain(`via ${s}`);
      for (const other of ['ehttp', 'esse', 'estdio'].filter((o) => o !== s)) {
        expect(text).not.toContain(`via ${other}`);
      }
    }
  });

  it('relays progress from a streamable-HTTP upstream to the client, in order', async () => {
    const seen: number[] = [];
    const res = await client.callTool(
      { name: 'ehttp__trigger-long-running-operation', arguments: { duration: 0.4, steps: 3 } },
      CallToolResultSchema,
      { onprogress: (p) => seen.push(p.progress) },
    );
    expect(JSON.stringify(res.content)).toContain('Long running operation completed');
    // The SDK client may settle the response before running the last progress handler.
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen.slice(0, 2)).toEqual([1, 2]);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!);
  });

  it('relays progress from an SSE upstream to the client, in order', async () => {
    const seen: number[] = [];
    const res = await client.callTool(
      { name: 'esse__trigger-long-running-operation', arguments: { duration: 0.4, steps: 3 } },
      CallToolResultSchema,
      { onprogress: (p) => seen.push(p.progress) },
    );
    expect(JSON.stringify(res.content)).toContain('Long running operation completed');
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen.slice(0, 2)).toEqual([1, 2]);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!);
  });

  it('an upstream tool error over HTTP comes back as that tool’s result, and the upstream stays usable', async () => {
    // get-sum requires numbers: the upstream's own validation answers with isError, relayed as is.
    const bad = await client.callTool({ name: 'ehttp__get-sum', arguments: { a: 'x', b: 2 } });
    expect(bad.isError).toBe(true);
    expect(JSON.stringify(bad.content)).toMatch(/expected number/);
    const ok = await client.callTool({ name: 'ehttp__get-sum', arguments: { a: 2, b: 3 } });
    expect(ok.isError).toBeFalsy();
    expect(JSON.stringify(ok.content)).toContain('The sum of 2 and 3 is 5');
  });
});
