import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceHttp } from '../helpers/clients.js';
import {
  EVERYTHING,
  type Spawned,
  startEverythingHttp,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';
import { modernRequest } from '../helpers/modern.js';

/**
 * Requests from an upstream to the calling client (sampling, elicitation, roots), in every
 * combination of eras: a legacy client (v1 SDK) is asked on its call's SSE stream; a modern client
 * (v2 SDK) gets an `input_required` result with the gateway's sealed requestState and retries.
 * Legacy upstreams are server-everything over stdio and over streamable HTTP (they send the
 * request mid-call); the modern upstream is the reference fixture (it answers input_required).
 */

const ROOTS = [{ uri: 'file:///work/project', name: 'project' }];
const ALL = { sampling: true, elicitation: true, roots: true };
const CAPS = { sampling: {}, elicitation: { form: {} }, roots: {} };

interface Asked {
  sampling: unknown[];
  elicitation: unknown[];
  roots: number;
}

type Era = 'legacy' | 'modern';

interface AnyClient {
  era: Era;
  asked: Asked;
  call(name: string, args?: Record<string, unknown>): Promise<{ text: string; isError: boolean }>;
  close(): Promise<void>;
}

const textOf = (result: unknown) => {
  const r = result as { content?: { type: string; text?: string }[]; isError?: unknown };
  return { text: (r.content ?? []).map((c) => c.text ?? '').join('\n'), isError: r.isError === true };
};

async function legacyClient(url: string, caps: Record<string, unknown> = CAPS): Promise<AnyClient> {
  const asked: Asked = { sampling: [], elicitation: [], roots: 0 };
  const client = new LegacyClient({ name: 'v1-asked', version: '1.0.0' }, { capabilities: caps });
  if (caps.sampling)
    client.setRequestHandler(CreateMessageRequestSchema, (r) => {
      asked.sampling.push(r.params);
      return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'Paris, from v1' } };
    });
  if (caps.elicitation)
    client.setRequestHandler(ElicitRequestSchema, (r) => {
      asked.elicitation.push(r.params);
      return { action: 'accept', content: { name: 'Ada v1' } };
    });
  if (caps.roots)
    client.setRequestHandler(ListRootsRequestSchema, () => {
      asked.roots++;
      return { roots: ROOTS };
    });
  await client.connect(new LegacyTransport(new URL(url)));
  return {
    era: 'legacy',
    asked,
    call: async (name, args = {}) => textOf(await client.callTool({ name, arguments: args })),
    close: () => client.close(),
  };
}

async function modernClient(url: string, caps: Record<string, unknown> = CAPS): Promise<AnyClient> {
  const asked: Asked = { sampling: [], elicitation: [], roots: 0 };
  const client = new ModernClient(
    { name: 'v2-asked', version: '1.0.0' },
    { capabilities: caps, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  if (caps.sampling)
    client.setRequestHandler('sampling/createMessage', async (r) => {
      asked.sampling.push(r.params);
      return {
        model: 'test-model',
        role: 'assistant' as const,
        content: { type: 'text' as const, text: 'Paris, from v2' },
      };
    });
  if (caps.elicitation)
    client.setRequestHandler('elicitation/create', async (r) => {
      asked.elicitation.push(r.params);
      return { action: 'accept' as const, content: { name: 'Ada v2' } };
    });
  if (caps.roots)
    client.setRequestHandler('roots/list', async () => {
      asked.roots++;
      return { roots: ROOTS };
    });
  await client.connect(new ModernTransport(new URL(url)));
  return {
    era: 'modern',
    asked,
    call: async (name, args = {}) => textOf(await client.callTool({ name, arguments: args })),
    close: () => client.close(),
  };
}

const CLIENTS: Record<Era, (url: string, caps?: Record<string, unknown>) => Promise<AnyClient>> = {
  legacy: legacyClient,
  modern: modernClient,
};

/** Per upstream: its tool names for each question, and what its answer says. */
const UPSTREAMS = {
  'everything (legacy, stdio)': {
    server: 'ev',
    sampling: ['ev__trigger-sampling-request', { prompt: 'capital of France?', maxTokens: 20 }],
    elicitation: ['ev__trigger-elicitation-request', {}],
    roots: ['ev__get-roots-list', {}],
    elicited: (who: string) => `- Name: ${who}`,
  },
  'everything (legacy, streamable HTTP)': {
    server: 'evh',
    sampling: ['evh__trigger-sampling-request', { prompt: 'capital of France?', maxTokens: 20 }],
    elicitation: ['evh__trigger-elicitation-request', {}],
    roots: ['evh__get-roots-list', {}],
    elicited: (who: string) => `- Name: ${who}`,
  },
  'reference (modern, MRTR)': {
    server: 'ref',
    sampling: ['ref__test_input_required_result_sampling', {}],
    elicitation: ['ref__test_input_required_result_elicitation', {}],
    roots: ['ref__test_input_required_result_list_roots', {}],
    elicited: (who: string) => `Hello, ${who}!`,
  },
} as const;

describe('server-to-client requests through the gateway, every era pair', () => {
  let gw: TestGateway;
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let evh: Spawned;

  beforeAll(async () => {
    [ref, evh] = await Promise.all([startReferenceHttp(), startEverythingHttp('streamableHttp')]);
    gw = await startTestGateway({
      mcpServers: {
        ev: { command: process.execPath, args: [EVERYTHING, 'stdio'], clientFeatures: ALL },
        evh: { url: evh.url, clientFeatures: ALL },
        ref: { url: ref.url, clientFeatures: ALL },
        // The defaults: elicitation on, sampling and roots off.
        refoff: { url: ref.url },
      },
      gateway: { allowedHosts: [`127.0.0.1:${ref.port}`, `127.0.0.1:${evh.port}`] },
    });
  }, 60_000);

  /** A gateway with one server-everything (stdio or HTTP), its own upstream session. */
  const rootsGateway = (server: string) =>
    startTestGateway({
      mcpServers: {
        [server]:
          server === 'ev'
            ? { command: process.execPath, args: [EVERYTHING, 'stdio'], clientFeatures: ALL }
            : { url: evh.url, clientFeatures: ALL },
      },
      gateway: { allowedHosts: [`127.0.0.1:${evh.port}`] },
    });

  afterAll(async () => {
    await gw?.stop();
    await ref?.stop();
    await evh?.stop();
  });

  for (const era of ['legacy', 'modern'] as const) {
    for (const [label, u] of Object.entries(UPSTREAMS)) {
      describe(`${era} client, ${label}`, () => {
        it('sampling: the client is asked, and its model answer reaches the tool result', async () => {
          const c = await CLIENTS[era](gw.url);
          try {
            const [name, args] = u.sampling;
            const r = await c.call(name, args);
            expect(r.isError).toBe(false);
            expect(r.text).toContain(`Paris, from ${era === 'legacy' ? 'v1' : 'v2'}`);
            expect(c.asked.sampling).toHaveLength(1);
            expect(JSON.stringify(c.asked.sampling[0])).toContain('capital');
          } finally {
            await c.close();
          }
        });

        it('elicitation: the form reaches the client, and its answer reaches the tool', async () => {
          const c = await CLIENTS[era](gw.url);
          try {
            const [name, args] = u.elicitation;
            const r = await c.call(name, args);
            expect(r.isError).toBe(false);
            expect(r.text).toContain(u.elicited(era === 'legacy' ? 'Ada v1' : 'Ada v2'));
            expect(c.asked.elicitation).toHaveLength(1);
            expect(c.asked.elicitation[0]).toMatchObject({ requestedSchema: { type: 'object' } });
          } finally {
            await c.close();
          }
        });

        it('roots: the client lists its roots for the call', async () => {
          // server-everything caches the roots of its session, and the gateway's upstream session
          // is pooled: each case gets a gateway of its own, so the answer is this client's.
          const own = u.server === 'ref' ? undefined : await rootsGateway(u.server);
          const c = await CLIENTS[era]((own ?? gw).url);
          try {
            const [name, args] = u.roots;
            const r = await c.call(name, args);
            expect(r.isError).toBe(false);
            expect(r.text).toContain('file:///work/project');
            expect(c.asked.roots).toBeGreaterThanOrEqual(1);
          } finally {
            await c.close();
            await own?.stop();
          }
        });
      });
    }

    it(`${era} client: a feature off for the server is refused, naming the setting to change`, async () => {
      const c = await CLIENTS[era](gw.url);
      try {
        const call = c.call('refoff__test_input_required_result_sampling');
        await expect(call).rejects.toThrow(/mcpServers\.refoff\.clientFeatures\.sampling/);
        expect(c.asked.sampling).toHaveLength(0);
        // Elicitation is on by default for the same server.
        const r = await c.call('refoff__test_input_required_result_elicitation');
        expect(r.text).toContain('Hello, Ada');
      } finally {
        await c.close();
      }
    });

    it(`${era} client: a capability the client did not declare is never asked for`, async () => {
      const c = await CLIENTS[era](gw.url, { elicitation: { form: {} } });
      try {
        await expect(c.call('ref__test_input_required_result_sampling')).rejects.toThrow(
          /server ref needs sampling, but this client did not declare the sampling capability/,
        );
        // A legacy upstream asks mid-call: the gateway refuses before the client is asked.
        await expect(c.call('ev__trigger-sampling-request', { prompt: 'hi', maxTokens: 5 })).rejects.toThrow(
          /server ev asked for sampling \(sampling\/createMessage\), but this client did not declare/,
        );
        expect(c.asked.sampling).toHaveLength(0);
        // The upstream is unharmed: the next call on it works.
        expect((await c.call('ev__trigger-elicitation-request')).text).toContain('- Name: Ada');
      } finally {
        await c.close();
      }
    });

    // A client that declared nothing: every question is refused, with the same answers as above.
    it(`${era} client without capabilities: every question is refused, and the upstream is unharmed`, async () => {
      const c = await CLIENTS[era](gw.url, {});
      try {
        await expect(c.call('ref__test_input_required_result_sampling')).rejects.toThrow(
          /server ref needs sampling, but this client did not declare the sampling capability/,
        );
        await expect(c.call('ref__test_input_required_result_elicitation')).rejects.toThrow(
          /server ref needs elicitation, but this client did not declare the elicitation capability/,
        );
        await expect(c.call('ev__trigger-sampling-request', { prompt: 'hi', maxTokens: 5 })).rejects.toThrow(
          /server ev asked for sampling \(sampling\/createMessage\), but this client did not declare/,
        );
        await expect(c.call('ev__trigger-elicitation-request')).rejects.toThrow(
          /server ev asked for elicitation \(elicitation\/create\), but this client did not declare/,
        );
        expect(c.asked).toEqual({ sampling: [], elicitation: [], roots: 0 });
        // Both upstreams go on serving.
        expect((await c.call('ev__echo', { message: 'still here' })).text).toContain('still here');
        expect((await c.call('ref__test_simple_text')).isError).toBe(false);
      } finally {
        await c.close();
      }
    });
  }

  it('a modern client gets the gateway own requestState; an altered one is refused with -32602', async () => {
    const caps = { 'io.modelcontextprotocol/clientCapabilities': CAPS };
    const first = await modernRequest(
      gw.url,
      'tools/call',
      { name: 'ref__test_input_required_result_elicitation', arguments: {} },
      { meta: caps },
    );
    const result = first.body.result!;
    expect(result.resultType).toBe('input_required');
    expect(Object.keys(result.inputRequests as object)).toEqual(['user_name']);
    const state = result.requestState as string;
    expect(typeof state).toBe('string');
    // The answer carries the gateway's identity, not the upstream's.
    expect((result._meta as Record<string, unknown>)['io.modelcontextprotocol/serverInfo']).toMatchObject({
      name: 'manifold',
    });
    const answers = { user_name: { action: 'accept', content: { name: 'Grace' } } };
    const flipped = `${state.slice(0, -2)}${state.at(-2) === 'A' ? 'B' : 'A'}${state.at(-1)}`;
    const tampered = await modernRequest(
      gw.url,
      'tools/call',
      {
        name: 'ref__test_input_required_result_elicitation',
        arguments: {},
        inputResponses: answers,
        requestState: flipped,
      },
      { meta: caps },
    );
    expect(tampered.body.error?.code).toBe(-32602);
    expect(tampered.body.error?.message).toMatch(/requestState/);
    // The same state on another tool is refused too: it is bound to the tool it was issued for.
    const elsewhere = await modernRequest(
      gw.url,
      'tools/call',
      {
        name: 'ref__test_input_required_result_sampling',
        arguments: {},
        inputResponses: answers,
        requestState: state,
      },
      { meta: caps },
    );
    expect(elsewhere.body.error?.code).toBe(-32602);
    const retry = await modernRequest(
      gw.url,
      'tools/call',
      {
        name: 'ref__test_input_required_result_elicitation',
        arguments: {},
        inputResponses: answers,
        requestState: state,
      },
      { meta: caps },
    );
    expect(retry.body.result?.resultType).toBe('complete');
    expect(JSON.stringify(retry.body.result?.content)).toContain('Hello, Grace!');
  });

  it('a call held for a modern client resumes once: its requestState does not open a second time', async () => {
    const caps = { 'io.modelcontextprotocol/clientCapabilities': CAPS };
    const params = { name: 'ev__trigger-elicitation-request', arguments: {} };
    const first = await modernRequest(gw.url, 'tools/call', params, { meta: caps });
    const result = first.body.result!;
    expect(result.resultType).toBe('input_required');
    const [key] = Object.keys(result.inputRequests as object);
    const again = {
      ...params,
      inputResponses: { [key!]: { action: 'accept', content: { name: 'Lin' } } },
      requestState: result.requestState,
    };
    const done = await modernRequest(gw.url, 'tools/call', again, { meta: caps });
    expect(JSON.stringify(done.body.result?.content)).toContain('- Name: Lin');
    const replay = await modernRequest(gw.url, 'tools/call', again, { meta: caps });
    expect(replay.body.error?.code).toBe(-32602);
  });
});
