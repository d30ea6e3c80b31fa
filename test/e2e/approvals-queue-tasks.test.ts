import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpTap, startReferenceHttp, tapStdio } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { EVERYTHING, eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { META_CAPS, modernRequest } from '../helpers/modern.js';

/**
 * #52: a call waiting in the approvals queue is a task for a client that takes tasks. A 2025
 * client (the v1 SDK's experimental tasks: `task` on tools/call, then tasks/get and tasks/result)
 * and a 2026 client (the tasks extension declared on the request: `resultType: "task"`, then
 * tasks/get and tasks/cancel) against a legacy upstream (server-everything over stdio) and a modern
 * one (the reference fixture over HTTP). The v2 SDK client has no task runtime (it refuses
 * `resultType: "task"` by design), so the 2026 side speaks the wire directly, as tasks.test.ts
 * does. Every upstream's calls are counted on the wire: a call runs exactly once, or never.
 */

type Obj = Record<string, unknown>;
const metaOf = (r: Obj | undefined): Obj => (r?._meta ?? {}) as Obj;
const TASKS = 'io.modelcontextprotocol/tasks';
const EXT = { [META_CAPS]: { extensions: { [TASKS]: {} } } };

describe('a queued call as a task (#52)', () => {
  let gw: TestGateway;
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let refTap: Awaited<ReturnType<typeof startHttpTap>>;
  let alice: string;
  let bob: string;
  let ops: string;
  const ev = tapStdio('queue-task-ev', process.execPath, [EVERYTHING, 'stdio']);

  const evCalls = () =>
    ev
      .lines()
      .filter(
        (l) => l.dir === 'in' && l.msg.method === 'tools/call' && (l.msg.params as Obj)?.name === 'echo',
      ).length;
  const refCalls = () =>
    refTap.exchanges.filter(
      (x) => x.body?.method === 'tools/call' && (x.body.params as Obj)?.name === 'test_simple_text',
    ).length;

  const admin = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${new URL(gw.url).origin}${path}`, {
      method,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ops}` },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: r.status, body: (await r.json()) as Obj };
  };
  const pendingFor = async (tool: string) => {
    const r = await admin('GET', '/admin/approvals?status=pending');
    return (r.body.approvals as Obj[]).filter((a) => a.tool === tool);
  };
  const auditOf = (id: string) =>
    gw.logs.filter((l) => l.event === 'audit.tools_call' && l.approvalId === id && l.verdict === 'allowed');

  beforeAll(async () => {
    ref = await startReferenceHttp();
    refTap = await startHttpTap(ref.port);
    const issuer = await testIssuer('https://issuer.test', 'manifold-queue-tasks', { expiresIn: '1h' });
    [alice, bob, ops] = await Promise.all([
      issuer.mint({ scope: 'tools:*' }, 'alice'),
      issuer.mint({ scope: 'tools:*' }, 'bob'),
      issuer.mint({ scope: 'manifold:admin tools:*' }, 'ops'),
    ]);
    gw = await startTestGateway({
      mcpServers: {
        ev: {
          command: ev.command,
          args: ev.args,
          approval: { ask: ['echo'], via: 'queue', timeoutSeconds: 2 },
        },
        ref: {
          url: `http://127.0.0.1:${refTap.port}/mcp`,
          approval: { ask: ['test_simple_text'], via: 'queue', timeoutSeconds: 2 },
        },
      },
      gateway: { allowedHosts: [`127.0.0.1:${refTap.port}`], auth: issuer.auth },
    });
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
    await refTap?.stop();
    await ref?.stop();
  });

  /** A v1 SDK client (2025-11-25) of `token`'s principal. */
  async function legacyClient(token: string) {
    const client = new LegacyClient({ name: 'agent-v1-tasks', version: '1.0.0' });
    await client.connect(
      new LegacyTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  }

  /** A task-augmented call through the v1 SDK: the created task, and the rest of its stream. */
  async function legacyTask(client: LegacyClient, name: string, args: Obj) {
    const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
      task: { ttl: 60_000 },
      timeout: 30_000,
    });
    const it = stream[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.value?.type).toBe('taskCreated');
    const task = (first.value as { task: Obj }).task;
    const rest = (async () => {
      const seen: Obj[] = [];
      for (;;) {
        const n = await it.next();
        if (n.done) return seen;
        seen.push(n.value as unknown as Obj);
      }
    })();
    return { taskId: String(task.taskId), task, rest };
  }

  const call = (name: string, args: Obj, token = alice, meta: Obj = EXT) =>
    modernRequest(gw.url, 'tools/call', { name, arguments: args }, { meta, headers: bearerOf(token) });
  const tasks = (method: string, params: Obj, token = alice) =>
    modernRequest(gw.url, method, params, { meta: EXT, headers: bearerOf(token) });
  const bearerOf = (token: string) => ({ authorization: `Bearer ${token}` });

  /** Polls a 2026 task until `done`. */
  async function until(taskId: string, done: (t: Obj) => boolean): Promise<Obj> {
    let task: Obj = {};
    await eventually(
      async () => {
        const r = await tasks('tasks/get', { taskId });
        expect(r.body.error).toBeUndefined();
        task = r.body.result!;
        return done(task);
      },
      () => `task ${taskId} to get there, last ${JSON.stringify(task)}`,
      20_000,
      150,
    );
    return task;
  }

  for (const upstream of ['legacy', 'modern'] as const) {
    const tool = upstream === 'legacy' ? 'ev__echo' : 'ref__test_simple_text';
    const args = (who: string) => (upstream === 'legacy' ? { message: `task from ${who}` } : {});
    const answer = (who: string) =>
      upstream === 'legacy' ? `Echo: task from ${who}` : 'simple text response';
    const count = () => (upstream === 'legacy' ? evCalls() : refCalls());

    it(`2025 client, ${upstream} upstream: a working task naming the approval; approved through the API, completed with the one run's result`, async () => {
      const client = await legacyClient(alice);
      try {
        const before = count();
        const { taskId, task, rest } = await legacyTask(client, tool, args('v1'));
        expect(task.status).toBe('working');
        expect(taskId).toContain('.');
        const [waiting] = await pendingFor(tool);
        const id = String(waiting?.id);
        expect(waiting).toMatchObject({ status: 'pending', subject: 'alice' });
        expect(String(task.statusMessage)).toContain(id);
        const got = await client.experimental.tasks.getTask(taskId);
        expect(got).toMatchObject({ status: 'working' });
        expect(got.statusMessage).toContain(`approval id ${id}`);
        expect(count()).toBe(before);

        expect((await admin('POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(200);
        const messages = await rest;
        const last = messages.at(-1) as { type: string; result?: Obj };
        expect(last.type).toBe('result');
        expect(JSON.stringify(last.result?.content)).toContain(answer('v1'));
        expect(count()).toBe(before + 1);
        // The one run's result, again and again; never a second run.
        const again = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
        expect(JSON.stringify(again.content)).toContain(answer('v1'));
        expect((again._meta as Obj)['io.modelcontextprotocol/related-task']).toEqual({ taskId });
        expect(count()).toBe(before + 1);
        // The run's audit line names the approval and its approver.
        expect(auditOf(id)).toHaveLength(1);
        expect(auditOf(id)[0]).toMatchObject({ subject: 'alice', approvedBy: 'ops', task: true });
      } finally {
        await client.close();
      }
    });

    it(`2026 client, ${upstream} upstream: a working task naming the approval; approved through the API, completed with the one run's result`, async () => {
      const before = count();
      const created = await call(tool, args('v2'));
      const r = created.body.result!;
      expect(r).toMatchObject({ resultType: 'task', status: 'working', pollIntervalMs: 1000 });
      const taskId = String(r.taskId);
      const id = String((r._meta as Obj)['manifold/approvalId']);
      expect(String(r.statusMessage)).toContain(`approval id ${id}`);
      expect((await pendingFor(tool)).map((a) => a.id)).toContain(id);
      const working = await until(taskId, (t) => t.status === 'working');
      expect(String(working.statusMessage)).toContain(id);
      expect(count()).toBe(before);

      expect((await admin('POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(200);
      const done = await until(taskId, (t) => t.status === 'completed');
      expect(done).toMatchObject({ resultType: 'complete', taskId });
      expect(JSON.stringify(done.result)).toContain(answer('v2'));
      expect(count()).toBe(before + 1);
      const again = await tasks('tasks/get', { taskId });
      expect(again.body.result).toMatchObject({ status: 'completed' });
      expect(count()).toBe(before + 1);
      expect(auditOf(id)).toHaveLength(1);
      expect(auditOf(id)[0]).toMatchObject({ subject: 'alice', approvedBy: 'ops', task: true });
    });

    it(`2025 client, ${upstream} upstream: declined, the task fails with the reason, and tasks/result is the refusal`, async () => {
      const client = await legacyClient(alice);
      try {
        const before = count();
        const { taskId, rest } = await legacyTask(client, tool, args('v1 decline'));
        const [waiting] = await pendingFor(tool);
        const id = String(waiting?.id);
        await admin('POST', `/admin/approvals/${id}`, {
          decision: 'decline',
          reason: 'not during the freeze',
        });
        const last = (await rest).at(-1) as { type: string };
        expect(last.type).toBe('error');
        const failed = await client.experimental.tasks.getTask(taskId);
        expect(failed.status).toBe('failed');
        expect(failed.statusMessage).toContain('not during the freeze');
        const refusal = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
        expect(refusal.isError).toBe(true);
        expect(JSON.stringify(refusal.content)).toContain('not during the freeze');
        expect((refusal._meta as Obj)['manifold/approval']).toBe('declined');
        expect(count()).toBe(before);
      } finally {
        await client.close();
      }
    });

    it(`2026 client, ${upstream} upstream: declined, the task ends with the reason and the refusal as its isError result`, async () => {
      const before = count();
      const created = await call(tool, args('v2 decline'));
      const taskId = String(created.body.result?.taskId);
      const id = String(metaOf(created.body.result)['manifold/approvalId']);
      await admin('POST', `/admin/approvals/${id}`, { decision: 'decline', reason: 'not during the freeze' });
      // The extension keeps `failed` for JSON-RPC errors; a refusal is an isError result.
      const done = await until(taskId, (t) => t.status !== 'working');
      expect(done.status).toBe('completed');
      expect(String(done.statusMessage)).toContain('not during the freeze');
      expect(done.result).toMatchObject({ isError: true, _meta: { 'manifold/approval': 'declined' } });
      expect(JSON.stringify(done.result)).toContain('not during the freeze');
      expect(count()).toBe(before);
    });

    it(`2025 client, ${upstream} upstream: tasks/cancel withdraws the call, and approving it after runs nothing`, async () => {
      const client = await legacyClient(alice);
      try {
        const before = count();
        const { taskId, rest } = await legacyTask(client, tool, args('v1 cancel'));
        const [waiting] = await pendingFor(tool);
        const id = String(waiting?.id);
        const cancelled = await client.experimental.tasks.cancelTask(taskId);
        expect(cancelled.status).toBe('cancelled');
        expect(((await rest).at(-1) as { type: string }).type).toBe('error');
        expect((await admin('GET', `/admin/approvals/${id}`)).body).toMatchObject({
          status: 'declined',
          decidedBy: 'alice',
        });
        expect((await admin('POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(409);
        expect((await client.experimental.tasks.getTask(taskId)).status).toBe('cancelled');
        // A cancelled task is terminal (2025-11-25): cancelling it again is -32602.
        await expect(client.experimental.tasks.cancelTask(taskId)).rejects.toThrow(/terminal/);
        expect(count()).toBe(before);
      } finally {
        await client.close();
      }
    });

    it(`2026 client, ${upstream} upstream: tasks/cancel after the approval closes it unrun; the task reads cancelled`, async () => {
      const before = count();
      const created = await call(tool, args('v2 cancel'));
      const taskId = String(created.body.result?.taskId);
      const id = String(metaOf(created.body.result)['manifold/approvalId']);
      // Approved, but nobody polled yet: the cancel claims the run and closes it without sending it.
      expect((await admin('POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(200);
      const ack = await tasks('tasks/cancel', { taskId });
      expect(ack.body.result).toEqual({ resultType: 'complete', _meta: expect.any(Object) });
      const got = await tasks('tasks/get', { taskId });
      expect(got.body.result).toMatchObject({ status: 'cancelled' });
      expect(count()).toBe(before);
      expect(auditOf(id)).toHaveLength(0);
    });
  }

  it('a foreign principal’s task id is an unknown task, in both eras (-32602)', async () => {
    const created = await call('ev__echo', { message: 'alice only' });
    const taskId = String(created.body.result?.taskId);
    const id = String(metaOf(created.body.result)['manifold/approvalId']);
    const foreign = await tasks('tasks/get', { taskId }, bob);
    expect(foreign.body.error?.code).toBe(-32602);
    expect(foreign.body.error?.message).toMatch(/Unknown task/);
    expect((await tasks('tasks/cancel', { taskId }, bob)).body.error?.code).toBe(-32602);
    const client = await legacyClient(bob);
    try {
      await expect(client.experimental.tasks.getTask(taskId)).rejects.toThrow(/Unknown task/);
    } finally {
      await client.close();
    }
    // Still alice's, still waiting.
    expect((await tasks('tasks/get', { taskId })).body.result).toMatchObject({ status: 'working' });
    await admin('POST', `/admin/approvals/${id}`, { decision: 'decline' });
    await until(taskId, (t) => t.status !== 'working');
  });

  it('a 2026 client that does not declare the extension is held as before, and gets the approval id', async () => {
    const before = evCalls();
    const held = await call('ev__echo', { message: 'no tasks here' }, alice, { [META_CAPS]: {} });
    expect(held.body.result).toMatchObject({
      isError: true,
      _meta: { 'manifold/approval': 'queued' },
    });
    const id = String(metaOf(held.body.result)['manifold/approvalId']);
    await admin('POST', `/admin/approvals/${id}`, { decision: 'decline' });
    await call('ev__echo', { message: 'no tasks here' }, alice, { [META_CAPS]: {} });
    expect(evCalls()).toBe(before);
  });
});
