import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AnyHandle,
  connectLegacy,
  connectModern,
  startHttpTap,
  startReferenceHttp,
} from '../helpers/clients.js';
import { startTestGateway, type TestGateway } from '../helpers/harness.js';
import { freshDatabase } from '../helpers/postgres.js';

/**
 * #52: the approvals queue shared by two gateway instances on one Postgres. A call queued on one
 * instance is decided through the other's admin API, and the same call sent to both at once runs
 * exactly once at the upstream (counted on the wire); both callers get the one run's result.
 */
type Obj = Record<string, unknown>;

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
});
