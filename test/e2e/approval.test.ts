import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpTap, startReferenceHttp, tapStdio } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { EVERYTHING, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { META_CAPS, modernRequest } from '../helpers/modern.js';

/**
 * #14: risk classes, trust tiers and human approval, with real upstreams of both eras
 * (server-everything over stdio, legacy; the reference fixture over HTTP, modern) and SDK clients
 * of both eras whose elicitation handlers play the user. Each upstream's calls are counted on the
 * wire (a stdio tap, an HTTP tap), so "the upstream never sees the call" is checked, not assumed.
 */

type Obj = Record<string, unknown>;
type Era = 'legacy' | 'modern';
type Answer = (params: Obj) => Obj | Promise<Obj>;

const YES: Answer = () => ({ action: 'accept', content: { approve: true } });
const FORM = { elicitation: { form: {} } };

interface User {
  asked: Obj[];
  call(name: string, args?: Obj): Promise<{ text: string; isError: boolean; meta: Obj }>;
  list(): Promise<Obj[]>;
  close(): Promise<void>;
}

const shape = (r: unknown) => {
  const res = r as { content?: { text?: string }[]; isError?: unknown; _meta?: Obj };
  return {
    text: (res.content ?? []).map((c) => c.text ?? '').join('\n'),
    isError: res.isError === true,
    meta: res._meta ?? {},
  };
};

async function user(era: Era, url: string, answer: Answer, caps: Obj = FORM, token?: string): Promise<User> {
  const asked: Obj[] = [];
  const requestInit = token ? { headers: { authorization: `Bearer ${token}` } } : undefined;
  if (era === 'legacy') {
    const client = new LegacyClient({ name: 'v1-user', version: '1.0.0' }, { capabilities: caps });
    if (caps.elicitation)
      client.setRequestHandler(ElicitRequestSchema, async (r) => {
        asked.push(r.params as Obj);
        return (await answer(r.params as Obj)) as never;
      });
    await client.connect(new LegacyTransport(new URL(url), requestInit ? { requestInit } : {}));
    return {
      asked,
      call: async (name, args = {}) => shape(await client.callTool({ name, arguments: args })),
      list: async () => (await client.listTools()).tools as Obj[],
      close: () => client.close(),
    };
  }
  const client = new ModernClient(
    { name: 'v2-user', version: '1.0.0' },
    { capabilities: caps, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  if (caps.elicitation)
    client.setRequestHandler('elicitation/create', async (r) => {
      asked.push(r.params as Obj);
      return (await answer(r.params as Obj)) as never;
    });
  await client.connect(new ModernTransport(new URL(url), requestInit ? { requestInit } : {}));
  return {
    asked,
    call: async (name, args = {}) => shape(await client.callTool({ name, arguments: args })),
    list: async () => (await client.listTools()).tools as Obj[],
    close: () => client.close(),
  };
}

describe('human approval, risk classes and trust tiers (#14)', () => {
  let gw: TestGateway;
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let refTap: Awaited<ReturnType<typeof startHttpTap>>;
  const ev = tapStdio('approval-ev', process.execPath, [EVERYTHING, 'stdio']);

  /** tools/call requests each upstream received for one of its tools. */
  const evCalls = (tool: string) =>
    ev
      .lines()
      .filter((l) => l.dir === 'in' && l.msg.method === 'tools/call' && (l.msg.params as Obj)?.name === tool)
      .map((l) => (l.msg.params as Obj).arguments as Obj);
  const refCalls = (tool: string) =>
    refTap.exchanges.filter((x) => x.body?.method === 'tools/call' && (x.body.params as Obj)?.name === tool)
      .length;

  beforeAll(async () => {
    ref = await startReferenceHttp();
    refTap = await startHttpTap(ref.port);
    gw = await startTestGateway({
      mcpServers: {
        ev: {
          command: ev.command,
          args: ev.args,
          risk: { 'get-sum': 'read', 'get-tiny-image': 'destructive', 'get-env': 'execute' },
          approval: { preset: 'strict', ask: ['echo'], timeoutSeconds: 2 },
        },
        // The same server with its annotations vouched for: echo says readOnlyHint true.
        evt: { command: process.execPath, args: [EVERYTHING, 'stdio'], trustAnnotations: true },
        ref: {
          url: `http://127.0.0.1:${refTap.port}/mcp`,
          trustAnnotations: true,
          approval: {
            ask: ['test_simple_text', 'test_input_required_result_elicitation'],
            timeoutSeconds: 2,
          },
        },
      },
      gateway: { allowedHosts: [`127.0.0.1:${refTap.port}`] },
    });
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
    await refTap?.stop();
    await ref?.stop();
  });

  it('tools/list shows each tool its class and approval rule under manifold/ keys', async () => {
    const c = await user('modern', gw.url, YES);
    try {
      const meta = new Map((await c.list()).map((t) => [t.name as string, (t._meta ?? {}) as Obj]));
      expect(meta.get('ev__get-sum')).toMatchObject({ 'manifold/risk': 'read' });
      expect(meta.get('ev__get-sum')?.['manifold/approval']).toBeUndefined();
      expect(meta.get('ev__echo')).toMatchObject({
        'manifold/risk': 'undeclared',
        'manifold/approval': 'ask',
      });
      expect(meta.get('ev__get-tiny-image')).toMatchObject({
        'manifold/risk': 'destructive',
        'manifold/approval': 'deny',
      });
      // strict: an execute tool and an unclassified one need a yes.
      expect(meta.get('ev__get-env')).toMatchObject({ 'manifold/approval': 'ask' });
      expect(meta.get('ev__get-structured-content')).toMatchObject({ 'manifold/approval': 'ask' });
      // Annotations count only where the operator trusts them.
      expect(meta.get('ev__get-structured-content')?.['manifold/risk']).toBe('undeclared');
      expect(meta.get('evt__get-structured-content')?.['manifold/risk']).toBe('read');
      expect(meta.get('evt__echo')?.['manifold/risk']).toBe('read');
      // readOnlyHint false and destructiveHint false: a write.
      expect(meta.get('evt__toggle-subscriber-updates')?.['manifold/risk']).toBe('write');
      // No annotations at all (the reference fixture's tools): undeclared even when trusted.
      expect(meta.get('ref__test_simple_text')?.['manifold/risk']).toBe('undeclared');
    } finally {
      await c.close();
    }
  });

  for (const era of ['legacy', 'modern'] as const) {
    describe(`${era} client`, () => {
      for (const upstream of ['legacy', 'modern'] as const) {
        const tool = upstream === 'legacy' ? 'ev__echo' : 'ref__test_simple_text';
        const args = upstream === 'legacy' ? { message: `hi from ${era}` } : {};
        const count = () => (upstream === 'legacy' ? evCalls('echo').length : refCalls('test_simple_text'));
        const answerText = upstream === 'legacy' ? `Echo: hi from ${era}` : 'simple text response';

        it(`${upstream} upstream: accepted, the call runs once and the audit line says who approved it`, async () => {
          const c = await user(era, gw.url, YES);
          try {
            const before = count();
            const r = await c.call(tool, args);
            expect(r.isError).toBe(false);
            expect(r.text).toContain(answerText);
            expect(count()).toBe(before + 1);
            expect(c.asked).toHaveLength(1);
            const message = String(c.asked[0]?.message);
            expect(message).toContain(upstream === 'legacy' ? 'server ev' : 'server ref');
            expect(message).toContain(tool);
            if (upstream === 'legacy') expect(message).toContain(`hi from ${era}`);
            expect(c.asked[0]?.requestedSchema).toMatchObject({ required: ['approve'] });
            const audit = gw.logs.filter((l) => l.event === 'audit.tools_call' && l.tool === tool).at(-1);
            expect(audit).toMatchObject({
              verdict: 'allowed',
              approval: 'accepted',
              approvedBy: 'anonymous',
            });
            expect(Date.parse(String(audit?.approvedAt))).toBeGreaterThan(Date.now() - 60_000);
          } finally {
            await c.close();
          }
        });

        it(`${upstream} upstream: declined (or accepted without approve: true), the upstream never sees it`, async () => {
          for (const answer of [
            () => ({ action: 'decline' }),
            () => ({ action: 'accept', content: { approve: false } }),
          ]) {
            const c = await user(era, gw.url, answer);
            try {
              const before = count();
              const r = await c.call(tool, args);
              expect(r.isError).toBe(true);
              expect(r.text).toMatch(/The user declined to run .* It was not called/);
              expect(r.meta['manifold/approval']).toBe('declined');
              expect(count()).toBe(before);
            } finally {
              await c.close();
            }
          }
          const audit = gw.logs.filter((l) => l.event === 'audit.tools_call' && l.tool === tool).at(-1);
          expect(audit).toMatchObject({ verdict: 'denied', approval: 'declined' });
        });

        it(`${upstream} upstream: no answer within the deadline is a refusal, not a call`, async () => {
          const slow: Answer = async () => {
            await new Promise((r) => setTimeout(r, 2600));
            return { action: 'accept', content: { approve: true } };
          };
          const c = await user(era, gw.url, slow);
          try {
            const before = count();
            const r = await c.call(tool, args);
            expect(r.isError).toBe(true);
            expect(r.text).toContain('Nobody approved');
            expect(r.meta['manifold/approval']).toBe('timeout');
            // Waiting to see that nothing happens: the late approval must not start the call.
            await new Promise((res) => setTimeout(res, 300));
            expect(count()).toBe(before);
          } finally {
            await c.close();
          }
        });

        it(`${upstream} upstream: a client without elicitation is refused, naming the setting`, async () => {
          const c = await user(era, gw.url, YES, {});
          try {
            const before = count();
            const r = await c.call(tool, args);
            expect(r.isError).toBe(true);
            expect(r.text).toContain(`mcpServers.${upstream === 'legacy' ? 'ev' : 'ref'}.approval`);
            expect(r.text).toContain('did not declare the elicitation capability');
            expect(count()).toBe(before);
          } finally {
            await c.close();
          }
        });
      }

      it('a policy deny is an isError result with the reason, and nobody is asked', async () => {
        const c = await user(era, gw.url, YES);
        try {
          const before = evCalls('get-tiny-image').length;
          const r = await c.call('ev__get-tiny-image');
          expect(r.isError).toBe(true);
          expect(r.text).toContain('does not allow ev__get-tiny-image');
          expect(r.text).toContain('mcpServers.ev.approval');
          expect(c.asked).toHaveLength(0);
          expect(evCalls('get-tiny-image')).toHaveLength(before);
        } finally {
          await c.close();
        }
      });

      it('a read tool runs without asking', async () => {
        const c = await user(era, gw.url, YES);
        try {
          const r = await c.call('ev__get-sum', { a: 2, b: 3 });
          expect(r.isError).toBe(false);
          expect(r.text).toContain('5');
          expect(c.asked).toHaveLength(0);
        } finally {
          await c.close();
        }
      });

      for (const [tool, said] of [
        ['ref__test_input_required_result_elicitation', (who: string) => `Hello, ${who}!`],
        // Undeclared on a strict server: asked about. A legacy upstream asks mid-call (held for a modern client).
        ['ev__trigger-elicitation-request', (who: string) => `- Name: ${who}`],
      ] as const) {
        it(`approval first, then the upstream's own question (${tool}): both reach the user, in order`, async () => {
          const answer: Answer = (p) =>
            String(p.message).startsWith('Allow the tool')
              ? { action: 'accept', content: { approve: true } }
              : { action: 'accept', content: { name: `Ada ${era}` } };
          const c = await user(era, gw.url, answer);
          try {
            const r = await c.call(tool);
            expect(r.isError).toBe(false);
            expect(r.text).toContain(said(`Ada ${era}`));
            expect(c.asked).toHaveLength(2);
            expect(String(c.asked[0]?.message)).toMatch(/^Allow the tool/);
            expect(String(c.asked[1]?.message)).not.toMatch(/^Allow the tool/);
          } finally {
            await c.close();
          }
        });
      }
    });
  }

  describe('at most once, on the wire (raw 2026-07-28 requests)', () => {
    const accept = { 'manifold.approval': { action: 'accept', content: { approve: true } } };
    const ask = (name: string, args: Obj = {}) =>
      modernRequest(gw.url, 'tools/call', { name, arguments: args }, { meta: { [META_CAPS]: FORM } });
    const retry = (name: string, state: unknown, args: Obj = {}, responses: Obj = accept) =>
      modernRequest(
        gw.url,
        'tools/call',
        { name, arguments: args, requestState: state, inputResponses: responses },
        { meta: { [META_CAPS]: FORM } },
      );

    it('the question is an input_required result with the gateway key and a sealed state', async () => {
      const r = await ask('ev__echo', { message: 'm' });
      expect(r.status).toBe(200);
      expect(r.body.result).toMatchObject({
        resultType: 'input_required',
        inputRequests: { 'manifold.approval': { method: 'elicitation/create', params: { mode: 'form' } } },
      });
      expect(typeof r.body.result?.requestState).toBe('string');
    });

    it('two retries carrying the same answer, at once: the upstream counts one call', async () => {
      const before = evCalls('echo').length;
      const first = await ask('ev__echo', { message: 'twice?' });
      const state = first.body.result?.requestState;
      const [a, b] = await Promise.all([
        retry('ev__echo', state, { message: 'twice?' }),
        retry('ev__echo', state, { message: 'twice?' }),
      ]);
      const results = [a, b].map((x) => shape(x.body.result));
      expect(results.filter((x) => !x.isError)).toHaveLength(1);
      const replayed = results.find((x) => x.isError);
      expect(replayed?.text).toContain('already used');
      expect(replayed?.meta['manifold/approval']).toBe('replayed');
      // And once more later: still refused.
      expect(shape((await retry('ev__echo', state, { message: 'twice?' })).body.result).isError).toBe(true);
      expect(evCalls('echo').filter((x) => x.message === 'twice?')).toHaveLength(1);
      expect(evCalls('echo').length).toBe(before + 1);
    });

    it('a tampered state, or other arguments under the same approval, is refused with -32602', async () => {
      const first = await ask('ev__echo', { message: 'original' });
      const state = String(first.body.result?.requestState);
      const flipped = `${state.slice(0, 20)}${state[20] === 'A' ? 'B' : 'A'}${state.slice(21)}`;
      const tampered = await retry('ev__echo', flipped, { message: 'original' });
      expect(tampered.body.error?.code).toBe(-32602);
      const swapped = await retry('ev__echo', state, { message: 'rm -rf /' });
      expect(swapped.body.error?.code).toBe(-32602);
      // Another tool's approval does not carry over either.
      const other = await retry('ref__test_simple_text', state);
      expect(other.body.error?.code).toBe(-32602);
      expect(evCalls('echo').some((x) => x.message === 'rm -rf /' || x.message === 'original')).toBe(false);
      // The untouched state still works once.
      expect(shape((await retry('ev__echo', state, { message: 'original' })).body.result).isError).toBe(
        false,
      );
    });

    it("an approved call's later round is single-use too: a replayed wrap state never reaches the upstream", async () => {
      const name = 'ref__test_input_required_result_elicitation';
      const first = await ask(name);
      const second = await retry(name, first.body.result?.requestState);
      expect(second.body.result).toMatchObject({ resultType: 'input_required' });
      const wrap = second.body.result?.requestState;
      const before = refCalls('test_input_required_result_elicitation');
      const named = { user_name: { action: 'accept', content: { name: 'Once' } } };
      const [a, b] = await Promise.all([retry(name, wrap, {}, named), retry(name, wrap, {}, named)]);
      const results = [a, b].map((x) => shape(x.body.result));
      expect(results.filter((x) => x.text.includes('Hello, Once!'))).toHaveLength(1);
      expect(results.filter((x) => x.isError && x.text.includes('already used'))).toHaveLength(1);
      expect(refCalls('test_input_required_result_elicitation')).toBe(before + 1);
    });
  });
});

describe('risk grants: a token scoped to every read tool (#14)', () => {
  let gw: TestGateway;
  let token: (scope: string) => Promise<string>;
  const ISS = 'https://issuer.risk';
  const AUD = 'manifold-risk';

  beforeAll(async () => {
    const issuer = await testIssuer(ISS, AUD);
    token = (scope) => issuer.mint({ scope }, 'reader');
    gw = await startTestGateway({
      mcpServers: {
        ev: { command: process.execPath, args: [EVERYTHING, 'stdio'], risk: { 'get-sum': 'read' } },
        evt: { command: process.execPath, args: [EVERYTHING, 'stdio'], trustAnnotations: true },
      },
      gateway: { auth: { ...issuer.auth } },
    });
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
  });

  for (const era of ['legacy', 'modern'] as const) {
    it(`${era} client: risk:read sees declared and trusted read tools, never an undeclared one`, async () => {
      const c = await user(era, gw.url, YES, FORM, await token('risk:read'));
      try {
        const names = (await c.list()).map((t) => t.name as string).sort();
        expect(names).toContain('ev__get-sum');
        expect(names).toContain('evt__echo');
        expect(names).toContain('evt__get-structured-content');
        // ev's annotations are not trusted: its echo says readOnlyHint true, and is not a read tool here.
        expect(names).not.toContain('ev__echo');
        expect(names).not.toContain('evt__toggle-subscriber-updates');
        expect(names.every((n) => n === 'manifold__describe_tool' || n.startsWith('ev'))).toBe(true);
        expect((await c.call('ev__get-sum', { a: 1, b: 1 })).text).toContain('2');
        await expect(c.call('ev__echo', { message: 'x' })).rejects.toThrow(/Unknown tool/);
      } finally {
        await c.close();
      }
    });
  }

  it('a risk grant next to a tool pattern adds to it', async () => {
    const c = await user('modern', gw.url, YES, FORM, await token('risk:read tools:ev__echo'));
    try {
      const names = (await c.list()).map((t) => t.name as string);
      expect(names).toContain('ev__echo');
      expect(names).toContain('evt__echo');
      expect(names).not.toContain('ev__get-env');
    } finally {
      await c.close();
    }
  });
});
