import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern, resultText } from '../helpers/clients.js';
import { ROOT, startTestGateway, stopChild, type TestGateway } from '../helpers/harness.js';

/**
 * Arguments mirrored into `Mcp-Param-*` headers (`x-mcp-header`, spec 2026-07-28
 * basic/transports/streamable-http, "Custom Headers from Tool Parameters") on their way from a
 * client of either era through the gateway to a 2026-07-28 upstream that records what it got
 * (test/fixtures/header-recorder.mjs modern).
 */

const RECORDER = `${ROOT}/test/fixtures/header-recorder.mjs`;

interface UpstreamCall {
  name: string;
  arguments: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
}

describe('x-mcp-header arguments reach a 2026-07-28 upstream', () => {
  let up: ChildProcess;
  let base: string;
  let gw: TestGateway;

  /** The tools/calls the recorder received after the first `from`. */
  const upstreamCalls = async (from = 0): Promise<UpstreamCall[]> =>
    ((await (await fetch(`${base}/calls`)).json()) as UpstreamCall[]).slice(from);

  beforeAll(async () => {
    up = spawn(process.execPath, [RECORDER, 'modern'], {
      env: { ...process.env, PORT: '0' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const port = await new Promise<number>((res, rej) => {
      up.once('exit', (code) => rej(new Error(`header-recorder exited with ${code}`)));
      up.stdout?.once('data', (d) => res(Number(String(d).trim())));
    });
    up.stdout?.resume();
    base = `http://127.0.0.1:${port}`;
    gw = await startTestGateway({
      mcpServers: { sql: { url: `${base}/mcp`, protocol: '2026-07-28' } },
      gateway: { allowedHosts: [`127.0.0.1:${port}`] },
    });
  });

  afterAll(async () => {
    await gw?.stop();
    if (up) await stopChild(up);
  });

  const connect = async (era: 'legacy' | 'modern'): Promise<AnyHandle> => {
    if (era === 'legacy') return connectLegacy(gw.url);
    const h = await connectModern(gw.url);
    // The v2 client mirrors arguments from its cached listing, as a real client would.
    await h.client.listTools();
    return h;
  };
  // The two SDKs' clients share no type, so each branch calls its own.
  const callTool = (h: AnyHandle, args: Record<string, unknown>) =>
    h.era === 'legacy'
      ? h.client.callTool({ name: 'sql__execute_sql', arguments: args })
      : h.client.callTool({ name: 'sql__execute_sql', arguments: args });

  for (const era of ['modern', 'legacy'] as const) {
    it(`49.15: ${era} client: a null optional argument reaches the upstream as null, with no Mcp-Param header`, async () => {
      const h = await connect(era);
      try {
        const mark = (await upstreamCalls()).length;
        const args = { region: 'us-west1', priority: 7, verbose: null, query: 'SELECT 1' };
        const r = await callTool(h, args);
        expect(r.isError, resultText(r)).toBeFalsy();
        expect(JSON.parse(resultText(r))).toEqual(args);
        const [call, ...more] = await upstreamCalls(mark);
        expect(more).toEqual([]);
        // Relayed as given: the null itself, not an absent property.
        expect(call!.arguments).toEqual(args);
        expect(Object.hasOwn(call!.arguments, 'verbose')).toBe(true);
        // Spec: a null parameter's header is omitted; the others are mirrored.
        expect(call!.headers['mcp-param-region']).toBe('us-west1');
        expect(call!.headers['mcp-param-priority']).toBe('7');
        expect(call!.headers).not.toHaveProperty('mcp-param-verbose');

        // A value, by contrast, travels in its header.
        const mark2 = (await upstreamCalls()).length;
        const set = await callTool(h, { ...args, verbose: false });
        expect(set.isError, resultText(set)).toBeFalsy();
        const [withValue] = await upstreamCalls(mark2);
        expect(withValue!.headers['mcp-param-verbose']).toBe('false');
      } finally {
        await h.close();
      }
    });
  }

  it('49.15: a null for a required mirrored argument is missing, and never reaches the upstream', async () => {
    const h = await connect('modern');
    try {
      const mark = (await upstreamCalls()).length;
      const r = await callTool(h, { region: null, priority: 1, query: 'SELECT 1' });
      expect(r.isError).toBe(true);
      expect(resultText(r)).toContain('/region: required property is missing');
      expect(await upstreamCalls(mark)).toEqual([]);
    } finally {
      await h.close();
    }
  });
});
