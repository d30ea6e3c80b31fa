import type { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AnyHandle,
  connectLegacy,
  connectModern,
  startHttpTap,
  startReferenceHttp,
} from '../helpers/clients.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { META_CAPS, modernRequest } from '../helpers/modern.js';
import { freshDatabase } from '../helpers/postgres.js';

/**
 * #52: the approvals queue shared by two gateway instances on one Postgres. A call queued on one
 * instance is decided through the other's admin API, and the same call sent to both at once runs
 * exactly once at the upstream (counted on the wire); both callers get the one run's result. A
 * task for a queued call is created on one instance and run and read on the other.
 */
type Obj = Record<string, unknown>;
const metaOf = (r: Obj | undefined): Obj => (r?._meta ?? {}) as Obj;

describe('the approvals queue across two instances on Postgres (#52)', () => {
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let tap: Awaited<ReturnType<typeof startHttpTap>>;
  const gateways: TestGateway[] = [];
  const clients: AnyHandle[] = [];
  const runs = () =>
    tap.exchanges.filter(
      (x) => x.body?.method === 'tools/call' && (x.body.params as Obj)?.name === 'test_simple_text',
    ).length;
  const admin = async (gw: TestGateway, method: string, path: string, body?: unknown) => {
    const r = await fetch(`${new URL(gw.url).origin}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: r.status, body: (await r.json()) as Obj };
  };
  const call = async (h: AnyHandle) => {
    const r = (await h.client.callTool({ name: 'ref__test_simple_text', arguments: {} })) as {
      isError?: boolean;
      content: { text: string }[];
      _meta?: Obj;
    };
    return { isError: r.isError === true, text: r.content.map((c) => c.text).join(''), meta: r._meta ?? {} };
  };

  beforeAll(async () => {
    const url = await freshDatabase('approvals_queue');
    ref = await startReferenceHttp();
    tap = await startHttpTap(ref.port);
    const raw = {
      mcpServers: {
        ref: {
          url: `http://127.0.0.1:${tap.port}/mcp`,
          approval: { ask: ['test_simple_text'], via: 'queue', timeoutSeconds: 1 },
        },
      },
      gateway: {
        allowedHosts: [`127.0.0.1:${tap.port}`],
        store: { postgres: '${MANIFOLD_PG_URL}' },
        cursorSecret: '${MANIFOLD_CURSOR_SECRET}',
      },
    };
    const env = {
      MANIFOLD_PG_URL: url,
      MANIFOLD_CURSOR_SECRET: 'one-secret-every-instance-shares-0123456789',
    };
    gateways.push(...(await Promise.all([startTestGateway(raw, { env }), startTestGateway(raw, { env })])));
    clients.push(await connectLegacy(gateways[0]!.url), await connectModern(gateways[1]!.url));
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    for (const gw of gateways) await gw.stop();
    await tap?.stop();
    await ref?.stop();
  });

  it('G2: queued on one instance, decided on the other, run exactly once for two callers at once', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const [legacy, modern] = clients as [AnyHandle, AnyHandle];
    const before = runs();
    const first = await call(legacy);
    expect(first.meta['manifold/approval']).toBe('queued');
    const id = String(first.meta['manifold/approvalId']);
    // The other instance sees the same queue, and takes the decision; the first refuses a second one.
    const listed = await admin(b, 'GET', '/admin/approvals?status=pending');
    expect((listed.body.approvals as Obj[]).map((x) => x.id)).toContain(id);
    expect((await admin(b, 'POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(200);
    expect((await admin(a, 'POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(409);
    // The same principal's same call, on both instances at once: one claims the run, the other waits for its result.
    const [x, y] = await Promise.all([call(legacy), call(modern)]);
    for (const r of [x, y]) {
      expect(r.isError).toBe(false);
      expect(r.text).toContain('simple text response');
    }
    expect(runs()).toBe(before + 1);
    const audits = gateways.flatMap((g) =>
      g.logs.filter((l) => l.event === 'audit.tools_call' && l.approvalId === id && l.verdict === 'allowed'),
    );
    expect(audits).toHaveLength(2);
    expect(audits.every((l) => l.approvedBy === 'anonymous')).toBe(true);
  });

  it('G2: a queued call as a task, created on one instance, is run once on the other and read on both', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const ext = { [META_CAPS]: { extensions: { 'io.modelcontextprotocol/tasks': {} } } };
    const get = (gw: TestGateway, taskId: string) =>
      modernRequest(gw.url, 'tasks/get', { taskId }, { meta: ext }).then((r) => r.body.result ?? {});
    const before = runs();

    // 2026: created on A, approved through B's API, polled on B (which runs it), read again on A.
    const created = await modernRequest(
      a.url,
      'tools/call',
      { name: 'ref__test_simple_text', arguments: {} },
      { meta: ext },
    );
    expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
    const taskId = String(created.body.result?.taskId);
    const id = String(metaOf(created.body.result)['manifold/approvalId']);
    expect((await admin(b, 'POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(200);
    let seen: Obj = {};
    await eventually(async () => {
      seen = await get(b, taskId);
      return seen.status === 'completed';
    }, 'the task completes on the other instance');
    expect(JSON.stringify(seen.result)).toContain('simple text response');
    expect(await get(a, taskId)).toMatchObject({ status: 'completed' });
    expect(runs()).toBe(before + 1);

    // 2025: created on A by its client, approved on A, its result taken on B by another client of the
    // same principal (tasks/result runs it there).
    const legacyA = (clients[0] as AnyHandle & { client: LegacyClient }).client;
    const made = await legacyA.request(
      {
        method: 'tools/call',
        params: { name: 'ref__test_simple_text', arguments: {}, task: { ttl: 60_000 } },
      },
      CreateTaskResultSchema,
    );
    const legacyTaskId = made.task.taskId;
    const queued = (await admin(a, 'GET', '/admin/approvals?status=pending')).body.approvals as Obj[];
    const legacyId = String(queued.find((x) => x.tool === 'ref__test_simple_text')?.id);
    expect((await admin(a, 'POST', `/admin/approvals/${legacyId}`, { decision: 'approve' })).status).toBe(
      200,
    );
    const onB = await connectLegacy(b.url);
    clients.push(onB);
    const result = await (onB.client as LegacyClient).experimental.tasks.getTaskResult(
      legacyTaskId,
      CallToolResultSchema,
    );
    expect(JSON.stringify(result.content)).toContain('simple text response');
    expect((await legacyA.experimental.tasks.getTask(legacyTaskId)).status).toBe('completed');
    expect(runs()).toBe(before + 2);
    const audits = gateways.flatMap((g) =>
      g.logs.filter((l) => l.event === 'audit.tools_call' && l.task === true && l.verdict === 'allowed'),
    );
    expect(audits.map((l) => l.approvalId).sort()).toEqual([id, legacyId].sort());
    // Both ran on B, the instance that did not create them.
    expect(audits.every((l) => b.logs.includes(l))).toBe(true);
  });
});
