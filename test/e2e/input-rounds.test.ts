import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startTestGateway, stopChild, type TestGateway } from '../helpers/harness.js';

/**
 * Rounds of input for a 2026-07-28 upstream (spec 2026-07-28: basic/patterns/mrtr), relayed by the
 * gateway (src/upstream/modern-session.ts). A legacy client (v1 SDK, 2025-11-25) has no
 * `input_required`: the gateway asks it each question on the call's SSE stream and sends the call
 * again with the answers and the server's requestState, up to 8 rounds. A modern client (v2 SDK)
 * gets each `input_required` itself, with the gateway's requestState wrapped around the server's.
 * The upstream is test/fixtures/nagging-modern.mjs, which records every tools/call it receives.
 */

const NAGGING = resolve(ROOT, 'test/fixtures/nagging-modern.mjs');
const CAPS = { elicitation: { form: {} } };
const ROUNDS_MESSAGE = 'server up kept asking for input after 8 rounds; the call was stopped';

/** A tools/call as the fixture received it. */
interface UpstreamCall {
  name: string;
  arguments?: Record<string, unknown>;
  inputResponses?: Record<string, { action: string; content?: Record<string, unknown> }>;
  requestState?: string;
}

interface ElicitParams {
  message: string;
  requestedSchema: { properties: Record<string, unknown> };
}

/** Fills each field a form asks for: `name` and `colour` get fixed answers, any other `<field>-<n>`. */
function fill(params: ElicitParams, n: number): Record<string, string> {
  const known: Record<string, string> = { name: 'Ada', colour: 'teal' };
  return Object.fromEntries(
    Object.keys(params.requestedSchema.properties).map((f) => [f, known[f] ?? `${f}-${n}`]),
  );
}

/** What a promise failed with, or `{ resolved }` when it did not fail (so the assertions say so). */
const failureOf = (p: Promise<unknown>) =>
  p.then(
    (r) => ({ resolved: r }),
    (e: unknown) => e,
  );

const textOf = (r: unknown) =>
  ((r as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('\n');

/** What the `input_required` results' requestStates seal (auth/seal.ts: base64url JSON, then a MAC). */
const unsealed = (state: string) =>
  JSON.parse(Buffer.from(state.split('.')[0]!, 'base64url').toString('utf8')) as Record<string, unknown>;

describe('input rounds for a modern upstream', () => {
  let up: ChildProcess;
  let base: string;
  let gw: TestGateway;

  /** The tools/calls the fixture received after the first `from`. */
  const upstreamCalls = async (from = 0): Promise<UpstreamCall[]> => {
    const seen = (await (await fetch(`${base}/calls`)).json()) as { count: number; calls: UpstreamCall[] };
    return seen.calls.slice(from);
  };

  beforeAll(async () => {
    up = spawn(process.execPath, [NAGGING], {
      env: { ...process.env, PORT: '0' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const port = await new Promise<number>((res, rej) => {
      up.once('exit', (code) => rej(new Error(`nagging-modern exited with ${code}`)));
      up.stdout?.once('data', (d) => res(Number(String(d).trim())));
    });
    up.stdout?.resume();
    base = `http://127.0.0.1:${port}`;
    gw = await startTestGateway({
      mcpServers: { up: { url: `${base}/mcp`, clientFeatures: { elicitation: true } } },
      gateway: { allowedHosts: [`127.0.0.1:${port}`] },
    });
  });

  afterAll(async () => {
    await gw?.stop();
    if (up) await stopChild(up);
  });

  /** A v1 SDK client that answers every elicitation form, recording what it was asked. */
  async function legacyClient() {
    const asked: ElicitParams[] = [];
    const client = new LegacyClient({ name: 'v1-rounds', version: '1.0.0' }, { capabilities: CAPS });
    client.setRequestHandler(ElicitRequestSchema, (r) => {
      const params = r.params as unknown as ElicitParams;
      asked.push(params);
      return { action: 'accept', content: fill(params, asked.length) };
    });
    await client.connect(new LegacyTransport(new URL(gw.url)));
    return { client, asked };
  }

  it('legacy client: two rounds are asked in turn, each retry carrying its answer and the server state', async () => {
    const { client, asked } = await legacyClient();
    try {
      const mark = (await upstreamCalls()).length;
      const r = await client.callTool({ name: 'up__twice', arguments: { greeting: 'hi' } });
      expect(r.isError).not.toBe(true);
      expect(textOf(r)).toBe('Ada likes teal');
      // Asked twice, in the server's order: the name, then the colour.
      expect(asked.map((a) => a.message)).toEqual(['What is your name?', 'And your favourite colour, Ada?']);
      expect(asked.map((a) => Object.keys(a.requestedSchema.properties))).toEqual([['name'], ['colour']]);

      const calls = await upstreamCalls(mark);
      expect(calls).toHaveLength(3);
      // Every round is the same call: same tool, same arguments.
      for (const c of calls) expect(c).toMatchObject({ name: 'twice', arguments: { greeting: 'hi' } });
      expect(calls[0]!.inputResponses).toBeUndefined();
      expect(calls[0]!.requestState).toBeUndefined();
      // The 2nd carries the 1st answer and the state the server gave with the question, exactly.
      expect(calls[1]!.inputResponses).toEqual({ name: { action: 'accept', content: { name: 'Ada' } } });
      expect(calls[1]!.requestState).toBe('twice-1');
      // The 3rd carries the 2nd answer only (the 1st is not sent again) and the new state.
      expect(calls[2]!.inputResponses).toEqual({ colour: { action: 'accept', content: { colour: 'teal' } } });
      expect(calls[2]!.requestState).toBe('twice-2:Ada');
    } finally {
      await client.close();
    }
  });

  it('legacy client: a server that keeps asking is stopped after 8 rounds, and is unharmed', async () => {
    const { client, asked } = await legacyClient();
    try {
      const mark = (await upstreamCalls()).length;
      // The gateway answers with a JSON-RPC error (not an isError result), which the v1 SDK throws.
      const failure = await failureOf(client.callTool({ name: 'up__nag', arguments: {} }));
      expect(failure).toBeInstanceOf(McpError);
      expect(failure).toMatchObject({ code: -32603, data: { manifold: 'ERR_UPSTREAM_ERROR' } });
      expect((failure as McpError).message).toContain(ROUNDS_MESSAGE);

      // Each of the 8 rounds asked the client the round's own question.
      expect(asked.map((a) => a.message)).toEqual(
        Array.from({ length: 8 }, (_, i) => `Round ${i + 1}: a little more, please.`),
      );
      // The first call and 8 retries, each retry with its round's answer and the state of the round
      // before; the 9th answer (round-9) is never asked about.
      const calls = await upstreamCalls(mark);
      expect(calls).toHaveLength(9);
      expect(calls[0]!.requestState).toBeUndefined();
      expect(calls[0]!.inputResponses).toBeUndefined();
      for (let k = 1; k <= 8; k++) {
        expect(calls[k]!.requestState).toBe(`round-${k}`);
        expect(calls[k]!.inputResponses).toEqual({
          more: { action: 'accept', content: { more: `more-${k}` } },
        });
      }

      // Nothing goes on behind the failure: no 10th call arrives.
      await new Promise((r) => setTimeout(r, 300));
      expect(await upstreamCalls(mark)).toHaveLength(9);

      // The upstream and the client's session still work: a call with rounds of its own completes.
      const after = await client.callTool({ name: 'up__twice', arguments: {} });
      expect(textOf(after)).toBe('Ada likes teal');
      expect(asked).toHaveLength(10);
      expect(await upstreamCalls(mark)).toHaveLength(12);
    } finally {
      await client.close();
    }
  });

  it('legacy client: a server that completes on its 8th answer is not stopped', async () => {
    const { client, asked } = await legacyClient();
    try {
      const mark = (await upstreamCalls()).length;
      const r = await client.callTool({ name: 'up__nag', arguments: { rounds: 8 } });
      expect(r.isError).not.toBe(true);
      expect(textOf(r)).toBe('done after 8 rounds');
      expect(asked).toHaveLength(8);
      const calls = await upstreamCalls(mark);
      expect(calls).toHaveLength(9);
      expect(calls[8]).toMatchObject({ requestState: 'round-8', arguments: { rounds: 8 } });
    } finally {
      await client.close();
    }
  });

  it('a result of a resultType the revision does not define fails the call, for either client era', async () => {
    // basic/index, "ResultType": an unknown one is invalid. The call fails with an error that says
    // so (never a result passed on as complete), and the upstream serves the next call.
    const { client } = await legacyClient();
    try {
      const failure = await failureOf(client.callTool({ name: 'up__odd', arguments: {} }));
      expect(failure).toBeInstanceOf(McpError);
      // Said as what it is: the server answered, with an invalid result (not a failed connection).
      expect((failure as McpError).message).toContain(
        'server up answered the tools/call with an invalid result: the result has an unknown resultType "pending"',
      );
      expect((failure as McpError).message).not.toContain('connection');
      expect(textOf(await client.callTool({ name: 'up__nag', arguments: { rounds: 1 } }))).toBe(
        'done after 1 rounds',
      );
    } finally {
      await client.close();
    }
    const res = await fetch(gw.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': 'up__odd',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 5,
        method: 'tools/call',
        params: {
          name: 'up__odd',
          arguments: {},
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
            'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
          },
        },
      }),
    });
    const body = (await res.json()) as { id: number; result?: unknown; error?: { message: string } };
    expect(body.id).toBe(5);
    expect(body.result).toBeUndefined();
    expect(body.error?.message).toContain('server up answered the tools/call with an invalid result');
    expect(body.error?.message).toContain('unknown resultType "pending"');
  });

  it('modern client: every input_required reaches the client, one upstream call per request, no cap of 8', async () => {
    const asked: ElicitParams[] = [];
    const sent: Record<string, unknown>[] = [];
    // More rounds than the gateway's own limit for legacy clients: the modern client's cap decides.
    const maxRounds = 12;
    const client = new ModernClient(
      { name: 'v2-rounds', version: '1.0.0' },
      {
        capabilities: CAPS,
        versionNegotiation: { mode: { pin: '2026-07-28' } },
        inputRequired: { maxRounds },
      },
    );
    client.setRequestHandler('elicitation/create', async (r) => {
      const params = r.params as unknown as ElicitParams;
      asked.push(params);
      return { action: 'accept' as const, content: fill(params, asked.length) };
    });
    const recording: typeof fetch = (input, init) => {
      if (typeof init?.body === 'string') sent.push(JSON.parse(init.body) as Record<string, unknown>);
      return fetch(input, init);
    };
    await client.connect(new ModernTransport(new URL(gw.url), { fetch: recording }));
    try {
      const mark = (await upstreamCalls()).length;
      // The v2 SDK's own cap ends the call, on the client.
      const failure = client.callTool({ name: 'up__nag', arguments: {} });
      await expect(failure).rejects.toMatchObject({
        code: 'INPUT_REQUIRED_ROUNDS_EXCEEDED',
        message: expect.stringContaining(`still required input after ${maxRounds} rounds`),
      });
      expect(asked.map((a) => a.message)).toEqual(
        Array.from({ length: maxRounds }, (_, i) => `Round ${i + 1}: a little more, please.`),
      );

      // The client's own requests: the first call and one retry per round.
      const requests = sent.filter((m) => m.method === 'tools/call');
      expect(requests).toHaveLength(maxRounds + 1);
      // Exactly one upstream call per client request: the gateway asks nothing itself.
      const calls = await upstreamCalls(mark);
      expect(calls).toHaveLength(maxRounds + 1);
      expect(calls[0]!.requestState).toBeUndefined();
      for (let k = 1; k <= maxRounds; k++) {
        const params = requests[k]!.params as UpstreamCall;
        // The client holds the gateway's state, not the server's: `round-k` sealed inside it.
        expect(params.requestState).not.toBe(`round-${k}`);
        expect(unsealed(params.requestState!)).toMatchObject({ k: 'wrap', s: 'up', u: `round-${k}` });
        expect(params.inputResponses).toEqual({ more: { action: 'accept', content: { more: `more-${k}` } } });
        // The upstream gets its own state back, unwrapped, with the client's answer.
        expect(calls[k]!.requestState).toBe(`round-${k}`);
        expect(calls[k]!.inputResponses).toEqual(params.inputResponses);
      }
    } finally {
      await client.close();
    }
  });
});
