import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/load.js';
import { testIssuer } from '../helpers/factories.js';
import {
  eventually,
  type Spawned,
  startEverythingHttp,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';
import { META_CAPS, type ModernAnswer, modernListen, modernRequest } from '../helpers/modern.js';

/**
 * #49.6 (SECURITY G4): what an instance keeps for its callers while they answer (held calls,
 * 2025 tasks awaiting a 2026 client's input, listen streams) is bounded per principal and per
 * tenant before the total, so tenant A flooding never abandons tenant B's. Two tenants with JWTs;
 * the upstream is server-everything over streamable HTTP (a 2025 server: its questions come on
 * each request's own stream, so several can wait at once); the limits are lowered through config.
 * Held calls, task input and listen streams exist only for 2026-07-28 clients.
 */
type Obj = Record<string, unknown>;
const ISS = 'https://issuer.bounds';
const AUD = 'manifold-bounds';
const TASKS = 'io.modelcontextprotocol/tasks';
const ASK = { [META_CAPS]: { elicitation: { form: {} } } };
const TASK = { [META_CAPS]: { elicitation: { form: {} }, extensions: { [TASKS]: {} } } };
// Three in all, two per tenant and per principal: tenant acme (alice, carol) floods, globex (bob) waits.
const LIMITS = {
  maxHeldCalls: 3,
  maxHeldCallsPerPrincipal: 2,
  maxHeldCallsPerTenant: 2,
  maxTasksAwaitingInput: 3,
  maxTasksAwaitingInputPerPrincipal: 2,
  maxTasksAwaitingInputPerTenant: 2,
  maxListenStreams: 3,
  maxListenStreamsPerPrincipal: 2,
  maxListenStreamsPerTenant: 2,
};

describe('49.6: one tenant flooding never abandons another tenant', () => {
  let gw: TestGateway;
  let evh: Spawned;
  let raw: { mcpServers: Obj; gateway: Obj };
  const tokens: Record<'alice' | 'carol' | 'bob', string> = { alice: '', carol: '', bob: '' };
  const as = (who: keyof typeof tokens) => ({ authorization: `Bearer ${tokens[who]}` });

  beforeAll(async () => {
    evh = await startEverythingHttp('streamableHttp');
    const issuer = await testIssuer(ISS, AUD);
    tokens.alice = await issuer.mint({ tid: 'acme', scope: 'tools:*' }, 'alice');
    tokens.carol = await issuer.mint({ tid: 'acme', scope: 'tools:*' }, 'carol');
    tokens.bob = await issuer.mint({ tid: 'globex', scope: 'tools:*' }, 'bob');
    raw = {
      mcpServers: { evh: { url: evh.url } },
      gateway: {
        allowedHosts: [`127.0.0.1:${evh.port}`],
        auth: { ...issuer.auth, tenantClaim: 'tid' },
        ...LIMITS,
      },
    };
    gw = await startTestGateway(raw);
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
    await evh?.stop();
  });

  const elicit = (who: keyof typeof tokens) =>
    modernRequest(
      gw.url,
      'tools/call',
      { name: 'evh__trigger-elicitation-request', arguments: {} },
      { meta: ASK, headers: as(who) },
    );
  /** The retry of a held call, with the name it was asked for. */
  const answer = (who: keyof typeof tokens, first: ModernAnswer, name: string) => {
    const result = first.body.result!;
    const [key] = Object.keys(result.inputRequests as Obj);
    return modernRequest(
      gw.url,
      'tools/call',
      {
        name: 'evh__trigger-elicitation-request',
        arguments: {},
        inputResponses: { [key!]: { action: 'accept', content: { name } } },
        requestState: result.requestState,
      },
      { meta: ASK, headers: as(who) },
    );
  };

  it('49.6: held calls: tenant A past its bounds abandons only its own oldest questions; tenant B is answered', async () => {
    const bob = await elicit('bob');
    expect(bob.body.result?.resultType).toBe('input_required');
    const alice1 = await elicit('alice');
    const alice2 = await elicit('alice');
    // acme holds two: carol's call ends acme's oldest (alice1), and alice's next acme's next oldest.
    const carol = await elicit('carol');
    const alice3 = await elicit('alice');
    for (const r of [alice1, alice2, carol, alice3]) expect(r.body.result?.resultType).toBe('input_required');

    const bobDone = await answer('bob', bob, 'Bea');
    expect(JSON.stringify(bobDone.body.result?.content)).toContain('- Name: Bea');
    for (const gone of [alice1, alice2]) {
      const late = await answer('alice', gone, 'Al');
      expect(late.body.error?.code).toBe(-32602);
    }
    expect(JSON.stringify((await answer('carol', carol, 'Cy')).body.result?.content)).toContain('- Name: Cy');
    expect(JSON.stringify((await answer('alice', alice3, 'Ali')).body.result?.content)).toContain(
      '- Name: Ali',
    );
  });

  const task = (who: keyof typeof tokens, method: string, params: Obj) =>
    modernRequest(gw.url, method, params, { meta: TASK, headers: as(who) });

  /** Polls tasks/get until `done`, with a deadline. */
  async function until(who: keyof typeof tokens, taskId: string, done: (t: Obj) => boolean): Promise<Obj> {
    let t: Obj = {};
    await eventually(
      async () => {
        const r = await task(who, 'tasks/get', { taskId });
        expect(r.body.error).toBeUndefined();
        t = r.body.result!;
        return done(t);
      },
      () => `task ${taskId} to get there, last ${JSON.stringify(t)}`,
      30_000,
      150,
    );
    return t;
  }
  const asked = (t: Obj) => t.status === 'input_required' && t.inputRequests !== undefined;
  const finished = (t: Obj) => t.status === 'completed' || t.status === 'failed';

  it('49.6: tasks awaiting input: tenant A past its bounds ends only its own oldest; tenant B answers its own', async () => {
    const start = async (who: keyof typeof tokens, topic: string) => {
      const r = await task(who, 'tools/call', {
        name: 'evh__simulate-research-query',
        arguments: { topic, ambiguous: true },
      });
      expect(r.body.result?.resultType).toBe('task');
      return r.body.result!.taskId as string;
    };
    // Started together; each one's question is gathered (its pump started) in this order.
    const [bob, alice1, alice2, carol] = await Promise.all([
      start('bob', 'python'),
      start('alice', 'python'),
      start('alice', 'python'),
      start('carol', 'python'),
    ]);
    const bobAsked = await until('bob', bob!, asked);
    await until('alice', alice1!, asked);
    await until('alice', alice2!, asked);
    // The third of acme's ends acme's oldest (alice1); bob's is untouched.
    await until('carol', carol!, asked);

    const [key] = Object.keys(bobAsked.inputRequests as Obj);
    const update = await task('bob', 'tasks/update', {
      taskId: bob,
      inputResponses: { [key!]: { action: 'accept', content: { interpretation: 'programming' } } },
    });
    expect(update.body.error).toBeUndefined();
    const bobDone = await until('bob', bob!, finished);
    expect(bobDone.status).toBe('completed');
    expect(JSON.stringify(bobDone.result)).toContain('Clarification**: programming');
    // alice1's question was refused when its pump ended: the server went on without an answer.
    const aliceDone = await until('alice', alice1!, finished);
    expect(JSON.stringify(aliceDone.result)).toContain('elicitation unavailable');
    for (const [who, id] of [
      ['alice', alice2],
      ['carol', carol],
    ] as const) {
      await task(who, 'tasks/cancel', { taskId: id });
    }
  }, 60_000);

  it('49.6: listen streams: tenant A past its bounds ends only its own oldest; tenant B still hears of changes', async () => {
    const open = (who: keyof typeof tokens) => modernListen(gw.url, { toolsListChanged: true }, as(who));
    const acked = (m: Obj) => m.method === 'notifications/subscriptions/acknowledged';
    const ended = (m: Obj) => (m.result as Obj | undefined)?.resultType === 'complete';
    const bob = await open('bob');
    const streams = [bob];
    try {
      await bob.next(acked);
      const alice1 = await open('alice');
      const alice2 = await open('alice');
      streams.push(alice1, alice2);
      await alice1.next(acked);
      await alice2.next(acked);
      const carol = await open('carol');
      streams.push(carol);
      await carol.next(acked);
      // acme's third stream ended acme's oldest with the graceful-closure result.
      await alice1.next(ended);
      expect(alice2.messages.some(ended)).toBe(false);

      // A change bob can see: a reload that hides one of evh's tools. His stream still hears it.
      const hidden = structuredClone(raw);
      (hidden.mcpServers.evh as Obj).tools = { deny: ['echo'] };
      const parsed = parseConfigObject(hidden, process.env);
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
      parsed.config.gateway.port = 0;
      parsed.config.gateway.store = false;
      await gw.gateway.reloader.apply(parsed.config);
      await bob.next((m) => m.method === 'notifications/tools/list_changed', 15_000);
      expect(bob.messages.some(ended)).toBe(false);
    } finally {
      for (const s of streams) s.close();
    }
  });
});
