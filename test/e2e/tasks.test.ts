import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startReferenceHttp } from '../helpers/clients.js';
import { everythingStdio, testIssuer } from '../helpers/factories.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { legacyRequest, legacySession } from '../helpers/legacy.js';
import { META_CAPS, modernRequest } from '../helpers/modern.js';

/**
 * Tasks through the gateway. 2026 clients use the tasks extension (SEP-2663) with the reference
 * fixture (a 2026 server) and with server-everything (a 2025 server whose simulate-research-query
 * must run as a task, and asks for clarification mid-task); 2025 clients send `task` to
 * server-everything. Task ids are the gateway's own, bound to the principal.
 */

type Obj = Record<string, unknown>;
const TASKS = 'io.modelcontextprotocol/tasks';
const EXT = { [META_CAPS]: { elicitation: { form: {} }, extensions: { [TASKS]: {} } } };
const NO_EXT = { [META_CAPS]: { elicitation: { form: {} } } };
const Passthrough = z.object({}).passthrough();

describe('tasks through the gateway, both eras', () => {
  let gw: TestGateway;
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let tokenA: string;
  let tokenB: string;
  const ISS = 'https://issuer.test';
  const AUD = 'manifold-tasks';

  beforeAll(async () => {
    ref = await startReferenceHttp();
    const issuer = await testIssuer(ISS, AUD, { expiresIn: '1h' });
    const sign = (sub: string) => issuer.mint({ scope: 'tools:*' }, sub);
    [tokenA, tokenB] = await Promise.all([sign('alice'), sign('bob')]);
    gw = await startTestGateway({
      mcpServers: {
        ev: everythingStdio(),
        ref: { url: ref.url },
      },
      gateway: {
        allowedHosts: [`127.0.0.1:${ref.port}`],
        auth: issuer.auth,
      },
    });
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
    await ref?.stop();
  });

  const as = (token: string) => ({ authorization: `Bearer ${token}` });
  const call = (name: string, args: Obj, meta: Obj = EXT, token = tokenA) =>
    modernRequest(gw.url, 'tools/call', { name, arguments: args }, { meta, headers: as(token) });
  const tasks = (method: string, params: Obj, meta: Obj = EXT, token = tokenA) =>
    modernRequest(gw.url, method, params, { meta, headers: as(token) });

  /** Polls tasks/get until `done`. */
  async function until(taskId: string, done: (t: Obj) => boolean, ms = 20_000): Promise<Obj> {
    let task: Obj = {};
    await eventually(
      async () => {
        const r = await tasks('tasks/get', { taskId });
        expect(r.body.error).toBeUndefined();
        task = r.body.result!;
        return done(task);
      },
      () => `task ${taskId} to get there, last ${JSON.stringify(task)}`,
      ms,
      150,
    );
    return task;
  }

  it('both eras see the capability: the extension for 2026 clients, tasks for 2025 clients', async () => {
    const discover = await modernRequest(gw.url, 'server/discover', {}, { headers: as(tokenA) });
    expect((discover.body.result!.capabilities as Obj).extensions).toEqual({ [TASKS]: {} });
    const init = await fetch(gw.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...as(tokenA),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
    const caps = ((await init.json()) as { result: { capabilities: Obj } }).result.capabilities;
    // No tasks/list: the gateway does not keep who made which task on a shared upstream.
    expect(caps.tasks).toEqual({ cancel: {}, requests: { tools: { call: {} } } });
  });

  it('2026 client, 2026 server: a task with the gateway id, polled to its result; no requestState', async () => {
    const created = await call('ref__slow_compute', { seconds: 0.3, label: 'mf' });
    const r = created.body.result!;
    expect(r.resultType).toBe('task');
    expect(r.requestState).toBeUndefined();
    expect(r.task).toBeUndefined();
    const taskId = r.taskId as string;
    // Not the upstream's UUID: a sealed id of the gateway's.
    expect(taskId).not.toMatch(/^[0-9a-f-]{36}$/);
    expect(taskId).toContain('.');
    expect(typeof r.ttlMs).toBe('number');
    const done = await until(taskId, (t) => t.status === 'completed');
    expect(done).toMatchObject({ resultType: 'complete', taskId, status: 'completed' });
    expect(JSON.stringify(done.result)).toContain('Computed mf after 0.3s');
  });

  it('tasks/get needs Mcp-Name equal to the task id, and the extension in the request', async () => {
    const created = await call('ref__slow_compute', { seconds: 0 });
    const taskId = (created.body.result?.taskId as string) ?? '';
    const mismatch = await modernRequest(
      gw.url,
      'tasks/get',
      { taskId },
      { meta: EXT, headers: { ...as(tokenA), 'mcp-name': 'something-else' } },
    );
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error?.code).toBe(-32020);
    const without = await tasks('tasks/get', { taskId }, NO_EXT);
    expect(without.body.error?.code).toBe(-32021);
    expect(without.body.error?.data).toMatchObject({ requiredCapabilities: { extensions: { [TASKS]: {} } } });
  });

  it('a forged, altered or foreign task id is an unknown task (-32602)', async () => {
    const created = await call('ref__slow_compute', { seconds: 0 });
    const taskId = created.body.result?.taskId as string;
    const altered = `${taskId.slice(0, -3)}${taskId.at(-3) === 'a' ? 'b' : 'a'}${taskId.slice(-2)}`;
    for (const [id, token] of [
      ['not-a-task', tokenA],
      [altered, tokenA],
      [taskId, tokenB],
    ] as const) {
      const r = await tasks('tasks/get', { taskId: id }, EXT, token);
      expect(r.body.error?.code, id).toBe(-32602);
      expect(r.body.error?.message).toMatch(/Unknown task/);
    }
    // tasks/result and tasks/list are not part of the extension.
    expect((await tasks('tasks/list', {})).body.error?.code).toBe(-32601);
  });

  it('2026 client, 2026 server: input on tasks/get, answers on tasks/update, cancel acknowledged', async () => {
    const created = await call('ref__confirm_delete', { filename: 'a.txt' });
    const taskId = created.body.result?.taskId as string;
    const waiting = await until(taskId, (t) => t.status === 'input_required');
    const asked = waiting.inputRequests as Record<string, { method: string }>;
    const [key] = Object.keys(asked);
    expect(asked[key!]!.method).toBe('elicitation/create');
    const ack = await tasks('tasks/update', {
      taskId,
      inputResponses: { [key!]: { action: 'accept', content: { confirm: true } } },
    });
    expect(ack.body.result).toMatchObject({ resultType: 'complete' });
    const done = await until(taskId, (t) => t.status === 'completed');
    expect(JSON.stringify(done.result)).toContain('Deleted a.txt');

    const slow = await call('ref__slow_compute', { seconds: 30 });
    const slowId = slow.body.result?.taskId as string;
    const cancel = await tasks('tasks/cancel', { taskId: slowId });
    expect(cancel.body.result).toEqual({ resultType: 'complete', _meta: expect.any(Object) });
    expect((await until(slowId, (t) => t.status === 'cancelled')).status).toBe('cancelled');
  });

  it('2026 client, 2025 server: a task-required tool runs as a task, and its mid-task question is asked on tasks/get', async () => {
    const refused = await call('ev__simulate-research-query', { topic: 'python' }, NO_EXT);
    expect(refused.body.error?.code).toBe(-32021);
    expect(refused.body.error?.data).toMatchObject({ requiredCapabilities: { extensions: { [TASKS]: {} } } });

    const created = await call('ev__simulate-research-query', { topic: 'python', ambiguous: true });
    expect(created.body.result?.resultType).toBe('task');
    const taskId = created.body.result?.taskId as string;
    const waiting = await until(
      taskId,
      (t) => t.status === 'input_required' && t.inputRequests !== undefined,
      30_000,
    );
    const asked = waiting.inputRequests as Record<string, { method: string; params: Obj }>;
    const [key] = Object.keys(asked);
    expect(asked[key!]!.method).toBe('elicitation/create');
    expect(String(asked[key!]!.params.message)).toContain('python');
    // The server's related-task marker (its own task id) is not passed on: the task is the client's.
    expect(JSON.stringify(asked)).not.toContain('related-task');
    await tasks('tasks/update', {
      taskId,
      inputResponses: { [key!]: { action: 'accept', content: { interpretation: 'programming' } } },
    });
    const done = await until(taskId, (t) => t.status === 'completed' || t.status === 'failed', 30_000);
    expect(done.status).toBe('completed');
    expect(JSON.stringify(done.result)).toMatch(/programming/i);
  }, 60_000);

  it('2025 client, 2025 server: task, tasks/get, tasks/result with the elicitation on its stream', async () => {
    const client = new LegacyClient(
      { name: 'v1-tasks', version: '1.0.0' },
      { capabilities: { elicitation: {} } },
    );
    const asked: Obj[] = [];
    client.setRequestHandler(ElicitRequestSchema, (r) => {
      asked.push(r.params as Obj);
      return { action: 'accept', content: { interpretation: 'snake' } };
    });
    await client.connect(new LegacyTransport(new URL(gw.url), { requestInit: { headers: as(tokenA) } }));
    try {
      const created = (await client.request(
        {
          method: 'tools/call',
          params: {
            name: 'ev__simulate-research-query',
            arguments: { topic: 'python', ambiguous: true },
            task: { ttl: 60_000 },
          },
        },
        Passthrough,
      )) as { task: Obj };
      const taskId = created.task.taskId as string;
      expect(created.task).toMatchObject({ status: 'working' });
      expect(typeof created.task.ttl).toBe('number');
      expect(taskId).toContain('.');
      const got = (await client.request({ method: 'tasks/get', params: { taskId } }, Passthrough)) as Obj;
      expect(got).toMatchObject({ taskId });
      expect(['working', 'input_required']).toContain(got.status);
      const result = (await client.request({ method: 'tasks/result', params: { taskId } }, Passthrough, {
        timeout: 30_000,
      })) as Obj;
      expect(asked).toHaveLength(1);
      // The question names the gateway's task, not the server's.
      expect((asked[0]!._meta as Obj)['io.modelcontextprotocol/related-task']).toEqual({ taskId });
      expect(JSON.stringify(result.content)).toMatch(/snake/i);
      expect((result._meta as Obj)['io.modelcontextprotocol/related-task']).toEqual({ taskId });
    } finally {
      await client.close();
    }
  }, 60_000);

  it('2025 client: a task for a tool or server that cannot run one is refused (-32601), never run synchronously', async () => {
    const headers = await legacySession(gw.url, { headers: as(tokenA) });
    const echo = await legacyRequest(gw.url, headers, 'tools/call', {
      name: 'ev__echo',
      arguments: { message: 'x' },
      task: { ttl: 1000 },
    });
    expect((echo.body.error as Obj).code).toBe(-32601);
    expect((echo.body.error as Obj).message).toMatch(/does not run as a task.*call it without task/);
    const modern = await legacyRequest(gw.url, headers, 'tools/call', {
      name: 'ref__slow_compute',
      arguments: { seconds: 0 },
      task: {},
    });
    expect((modern.body.error as Obj).message).toMatch(/speaks 2026-07-28/);
    expect((await legacyRequest(gw.url, headers, 'tasks/list')).body.error).toMatchObject({ code: -32601 });
    expect(
      (await legacyRequest(gw.url, headers, 'tasks/update', { taskId: 'x', inputResponses: {} })).body.error,
    ).toMatchObject({
      code: -32601,
    });
  });
});
