import { type ChildProcess, spawn } from 'node:child_process';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  EVERYTHING,
  eventually,
  type Spawned,
  startEverythingHttp,
  startTestGateway,
  stopChild,
  type TestGateway,
  waitForPort,
} from '../helpers/harness.js';

/** server-everything again on the port a stopped one used, so the configured URL is unchanged. */
async function restartOnPort(mode: 'streamableHttp' | 'sse', port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [EVERYTHING, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: 'ignore',
  });
  await waitForPort(port, 15_000);
  return child;
}

interface UpstreamHealth {
  name: string;
  state: string;
}

// One gateway, three transports: server-everything over streamable HTTP, over the older
// HTTP+SSE transport, and over stdio, each a real process on loopback.
describe('upstream transports: streamable HTTP, SSE and stdio behind one gateway', () => {
  let http: Spawned;
  let sse: Spawned;
  let gw: TestGateway;
  let client: Client;
  const restarted: ChildProcess[] = [];
  const healthOf = async (name: string): Promise<UpstreamHealth | undefined> => {
    const h = await (await fetch(gw.url.replace('/mcp', '/healthz'))).json();
    return h.upstreams.find((u: UpstreamHealth) => u.name === name);
  };
  // Each call bounded, so that a wait built on calls stays bounded too.
  const echo = (server: string, message: string) =>
    client.callTool({ name: `${server}__echo`, arguments: { message } }, CallToolResultSchema, {
      timeout: 3000,
    });

  beforeAll(async () => {
    [http, sse] = await Promise.all([startEverythingHttp('streamableHttp'), startEverythingHttp('sse')]);
    gw = await startTestGateway({
      mcpServers: {
        ehttp: { type: 'streamable-http', url: http.url },
        esse: { type: 'sse', url: sse.url },
        estdio: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
      },
      // Loopback upstreams need an explicit egress entry (SECURITY D1/D3); any port on 127.0.0.1.
      gateway: { allowedHosts: ['127.0.0.1'] },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
    await Promise.all([http?.stop(), sse?.stop(), ...restarted.map((c) => stopChild(c))]);
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

  it('B9: invalid arguments for an HTTP upstream’s tool are an isError result, and the upstream stays usable', async () => {
    // get-sum requires numbers. Whether the gateway or the upstream rejects them, the client gets
    // an isError result that says what is wrong, not a protocol error.
    const bad = await client.callTool({ name: 'ehttp__get-sum', arguments: { a: 'x', b: 2 } });
    expect(bad.isError).toBe(true);
    expect(JSON.stringify(bad.content)).toMatch(/expected (type )?number/);
    const ok = await client.callTool({ name: 'ehttp__get-sum', arguments: { a: 2, b: 3 } });
    expect(ok.isError).toBeFalsy();
    expect(JSON.stringify(ok.content)).toContain('The sum of 2 and 3 is 5');
  });

  // The two tests below stop the HTTP upstreams: keep them last.
  it('F1: HTTP upstreams that go away are reported unavailable; the stdio sibling keeps serving', async () => {
    await Promise.all([http.stop(), sse.stop()]);
    for (const s of ['ehttp', 'esse']) await expect(echo(s, 'anyone there?')).rejects.toThrow();
    expect(JSON.stringify((await echo('estdio', 'fine')).content)).toContain('fine');
    // The connection is known to be broken (its stream ended, its calls fail): /healthz must not
    // keep calling it ready, or an operator is told a dead upstream is fine.
    await eventually(
      async () => (await healthOf('ehttp'))?.state !== 'ready' && (await healthOf('esse'))?.state !== 'ready',
      'ehttp and esse reported not ready after their servers stopped',
      8000,
    );
    expect((await healthOf('estdio'))?.state).toBe('ready');
  });

  it('F4: when the HTTP upstreams come back on the same URL they are reconnected and their tools work again', async () => {
    const wasDown = (await healthOf('ehttp'))?.state !== 'ready';
    let notified = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      notified++;
    });
    if (http.child.exitCode === null && http.child.signalCode === null) await http.stop();
    if (sse.child.exitCode === null && sse.child.signalCode === null) await sse.stop();
    restarted.push(await restartOnPort('streamableHttp', http.port), await restartOnPort('sse', sse.port));
    const lastErrors: Record<string, string> = {};
    const recovered = await Promise.allSettled(
      ['ehttp', 'esse'].map((s) =>
        eventually(
          async () => {
            const res = await echo(s, `${s} is back`).catch((e: Error) => {
              lastErrors[s] = e.message;
              return undefined;
            });
            return res !== undefined && JSON.stringify(res.content).includes(`${s} is back`);
          },
          `${s}__echo works again after its server restarted`,
          10_000,
        ),
      ),
    );
    expect(
      recovered.filter((r) => r.status === 'rejected').map((r) => String(r.reason)),
      JSON.stringify(lastErrors),
    ).toEqual([]);
    expect((await healthOf('ehttp'))?.state).toBe('ready');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['ehttp__echo', 'esse__echo']));
    // F4: a recovery that brings tools back is announced downstream.
    if (wasDown) await eventually(() => notified > 0, 'tools/list_changed after the recovery');
  });
});
