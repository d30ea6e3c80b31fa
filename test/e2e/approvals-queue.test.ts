import type { Server } from 'node:http';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpTap, startReferenceHttp, tapStdio } from '../helpers/clients.js';
import {
  EVERYTHING,
  eventually,
  startJsonSink,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

/**
 * #52: the approvals queue, for agents with nobody at the keyboard. Real upstreams of both eras
 * (server-everything over stdio, legacy; the reference fixture over HTTP, modern), SDK clients of
 * both eras, and an operator deciding through the admin API or a webhook's signed link. Every
 * upstream's calls are counted on the wire, so "runs exactly once" and "never ran" are checked.
 */

type Obj = Record<string, unknown>;
type Era = 'legacy' | 'modern';

interface Called {
  text: string;
  isError: boolean;
  meta: Obj;
}

interface Caller {
  call(name: string, args?: Obj, onprogress?: (p: Obj) => void): Promise<Called>;
  asked: Obj[];
  close(): Promise<void>;
}

const shape = (r: unknown): Called => {
  const res = r as { content?: { text?: string }[]; isError?: unknown; _meta?: Obj };
  return {
    text: (res.content ?? []).map((c) => c.text ?? '').join('\n'),
    isError: res.isError === true,
    meta: res._meta ?? {},
  };
};

/** A client of either era; `elicit` gives it a user who says yes. */
async function caller(era: Era, url: string, elicit = false): Promise<Caller> {
  const asked: Obj[] = [];
  const capabilities = elicit ? { elicitation: { form: {} } } : {};
  if (era === 'legacy') {
    const client = new LegacyClient({ name: 'agent-v1', version: '1.0.0' }, { capabilities });
    if (elicit)
      client.setRequestHandler(ElicitRequestSchema, async (r) => {
        asked.push(r.params as Obj);
        return { action: 'accept', content: { approve: true } };
      });
    await client.connect(new LegacyTransport(new URL(url)));
    return {
      asked,
      call: async (name, args = {}, onprogress) =>
        shape(
          await client.callTool({ name, arguments: args }, undefined, {
            ...(onprogress ? { onprogress: (p) => onprogress(p as Obj) } : {}),
            timeout: 30_000,
          }),
        ),
      close: () => client.close(),
    };
  }
  const client = new ModernClient(
    { name: 'agent-v2', version: '1.0.0' },
    { capabilities, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  if (elicit)
    client.setRequestHandler('elicitation/create', async (r) => {
      asked.push(r.params as Obj);
      return { action: 'accept', content: { approve: true } } as never;
    });
  await client.connect(new ModernTransport(new URL(url)));
  return {
    asked,
    call: async (name, args = {}, onprogress) =>
      shape(
        await client.callTool({ name, arguments: args }, {
          ...(onprogress ? { onprogress: (p: unknown) => onprogress(p as Obj) } : {}),
          timeout: 30_000,
        } as never),
      ),
    close: () => client.close(),
  };
}

describe('the approvals queue (#52)', () => {
  let gw: TestGateway;
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let refTap: Awaited<ReturnType<typeof startHttpTap>>;
  let hook: Server;
  let hooked: Obj[] = [];
  const ev = tapStdio('queue-ev', process.execPath, [EVERYTHING, 'stdio']);

  const evCalls = (tool: string) =>
    ev
      .lines()
      .filter((l) => l.dir === 'in' && l.msg.method === 'tools/call' && (l.msg.params as Obj)?.name === tool)
      .length;
  const refCalls = (tool: string) =>
    refTap.exchanges.filter((x) => x.body?.method === 'tools/call' && (x.body.params as Obj)?.name === tool)
      .length;

  const origin = () => new URL(gw.url).origin;
  const admin = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${origin()}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: r.status, body: (await r.json()) as Obj };
  };
  const pending = async (tool: string) => {
    const r = await admin('GET', '/admin/approvals?status=pending');
    return (r.body.approvals as Obj[]).filter((a) => a.tool === tool);
  };

  beforeAll(async () => {
    ref = await startReferenceHttp();
    refTap = await startHttpTap(ref.port);
    const sink = await startJsonSink();
    hook = sink.server;
    hooked = sink.received;
    const hookPort = sink.port;
    gw = await startTestGateway({
      mcpServers: {
        ev: {
          command: ev.command,
          args: ev.args,
          approval: {
            ask: ['echo', 'get-sum', 'trigger-long-running-operation'],
            via: 'queue',
            timeoutSeconds: 2,
          },
        },
        ref: {
          url: `http://127.0.0.1:${refTap.port}/mcp`,
          approval: {
            ask: ['test_simple_text'],
            via: 'queue',
            timeoutSeconds: 2,
            notify: `http://127.0.0.1:${hookPort}/hooks/approvals`,
          },
        },
        // The same server, asking the client's user when it can answer and the queue when not.
        evc: {
          command: process.execPath,
          args: [EVERYTHING, 'stdio'],
          approval: { ask: ['echo'], via: 'client-then-queue', timeoutSeconds: 2 },
        },
      },
      gateway: { allowedHosts: [`127.0.0.1:${refTap.port}`, `127.0.0.1:${hookPort}`] },
    });
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
    await refTap?.stop();
    await ref?.stop();
    await new Promise((res) => hook?.close(res));
  });

  for (const era of ['legacy', 'modern'] as const) {
    for (const upstream of ['legacy', 'modern'] as const) {
      const tool = upstream === 'legacy' ? 'ev__echo' : 'ref__test_simple_text';
      const args = upstream === 'legacy' ? { message: `queued from ${era}` } : {};
      const count = () => (upstream === 'legacy' ? evCalls('echo') : refCalls('test_simple_text'));
      const answer = upstream === 'legacy' ? `Echo: queued from ${era}` : 'simple text response';

      it(`${era} client, ${upstream} upstream: queued, approved through the API, the next call runs it once`, async () => {
        const c = await caller(era, gw.url);
        try {
          const before = count();
          const first = await c.call(tool, args);
          expect(first.isError).toBe(true);
          expect(first.meta['manifold/approval']).toBe('queued');
          const id = String(first.meta['manifold/approvalId']);
          expect(first.text).toContain(id);
          expect(count()).toBe(before);
          const listed = (await pending(tool)).find((a) => a.id === id);
          expect(listed).toMatchObject({ status: 'pending', subject: 'anonymous', tenant: 'default' });
          if (upstream === 'legacy') expect(String(listed?.arguments)).toContain(`queued from ${era}`);

          const approved = await admin('POST', `/admin/approvals/${id}`, { decision: 'approve' });
          expect(approved.status).toBe(200);
          expect(approved.body).toMatchObject({ id, status: 'approved', decidedBy: 'anonymous' });
          // A decision is final (SECURITY G2).
          expect((await admin('POST', `/admin/approvals/${id}`, { decision: 'decline' })).status).toBe(409);

          const second = await c.call(tool, args);
          expect(second.isError).toBe(false);
          expect(second.text).toContain(answer);
          expect(count()).toBe(before + 1);
          const audit = gw.logs.filter((l) => l.event === 'audit.tools_call' && l.tool === tool).at(-1);
          expect(audit).toMatchObject({
            verdict: 'allowed',
            approval: 'accepted',
            approvalId: id,
            approvedBy: 'anonymous',
          });
          expect(
            gw.logs.some((l) => l.event === 'audit.admin' && l.action === 'approval.approve' && l.id === id),
          ).toBe(true);

          // Delivered: the same call again asks afresh, and does not run.
          const third = await c.call(tool, args);
          expect(third.meta['manifold/approval']).toBe('queued');
          expect(third.meta['manifold/approvalId']).not.toBe(id);
          expect(count()).toBe(before + 1);
          await admin('POST', `/admin/approvals/${third.meta['manifold/approvalId']}`, {
            decision: 'decline',
          });
          await c.call(tool, args);
        } finally {
          await c.close();
        }
      });

      it(`${era} client, ${upstream} upstream: declined with a reason, refused with it, never run`, async () => {
        const c = await caller(era, gw.url);
        try {
          const before = count();
          const first = await c.call(tool, args);
          const id = String(first.meta['manifold/approvalId']);
          const declined = await admin('POST', `/admin/approvals/${id}`, {
            decision: 'decline',
            reason: 'not during the freeze',
          });
          expect(declined.body).toMatchObject({ status: 'declined', reason: 'not during the freeze' });
          const second = await c.call(tool, args);
          expect(second.isError).toBe(true);
          expect(second.meta['manifold/approval']).toBe('declined');
          expect(second.text).toContain('not during the freeze');
          expect(count()).toBe(before);
          const audit = gw.logs.filter((l) => l.event === 'audit.tools_call' && l.tool === tool).at(-1);
          expect(audit).toMatchObject({
            verdict: 'denied',
            approval: 'declined',
            approvalId: id,
            declinedBy: 'anonymous',
          });
          // Refused once: the next call asks afresh.
          const third = await c.call(tool, args);
          expect(third.meta['manifold/approval']).toBe('queued');
          await admin('POST', `/admin/approvals/${third.meta['manifold/approvalId']}`, {
            decision: 'decline',
          });
          await c.call(tool, args);
        } finally {
          await c.close();
        }
      });
    }

    it(`${era} client: a held call reports the approval id in progress and runs once approved while it waits`, async () => {
      const c = await caller(era, gw.url);
      try {
        const before = evCalls('get-sum');
        const progress: Obj[] = [];
        const held = c.call('ev__get-sum', { a: 2, b: era === 'legacy' ? 3 : 4 }, (p) => progress.push(p));
        let id = '';
        await eventually(async () => {
          const waiting = await pending('ev__get-sum');
          id = String(waiting[0]?.id ?? '');
          return waiting.length === 1;
        }, 'the call waits in the queue');
        await eventually(() => progress.length > 0, 'a progress notification');
        expect(String(progress[0]?.message)).toContain(id);
        expect((await admin('POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(200);
        const r = await held;
        expect(r.isError).toBe(false);
        expect(r.text).toContain(era === 'legacy' ? '5' : '6');
        expect(evCalls('get-sum')).toBe(before + 1);
      } finally {
        await c.close();
      }
    });

    it(`${era} client: client-then-queue asks a client that can answer, and queues one that cannot`, async () => {
      const asking = await caller(era, gw.url, true);
      const silent = await caller(era, gw.url, false);
      try {
        const asked = await asking.call('evc__echo', { message: 'ask me' });
        expect(asked.isError).toBe(false);
        expect(asking.asked).toHaveLength(1);
        const queued = await silent.call('evc__echo', { message: 'nobody here' });
        expect(queued.meta['manifold/approval']).toBe('queued');
        await admin('POST', `/admin/approvals/${queued.meta['manifold/approvalId']}`, {
          decision: 'decline',
        });
        const refused = await silent.call('evc__echo', { message: 'nobody here' });
        expect(refused.meta['manifold/approval']).toBe('declined');
        expect(silent.asked).toHaveLength(0);
      } finally {
        await asking.close();
        await silent.close();
      }
    });
  }

  it('a call that finds its approval being run by another waits past its hold for that run, both eras', async () => {
    const tool = 'trigger-long-running-operation';
    // The run outlasts the 2 s hold: the waiting call's hold gives way to the server's call deadline.
    const args = { duration: 3, steps: 3 };
    const legacy = await caller('legacy', gw.url);
    const modern = await caller('modern', gw.url);
    try {
      const before = evCalls(tool);
      const first = await legacy.call(`ev__${tool}`, args);
      expect(first.meta['manifold/approval']).toBe('queued');
      const id = String(first.meta['manifold/approvalId']);
      expect((await admin('POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(200);
      const both = await Promise.all([legacy.call(`ev__${tool}`, args), modern.call(`ev__${tool}`, args)]);
      for (const r of both) {
        expect(r.isError).toBe(false);
        expect(r.text).toContain('Long running operation completed');
      }
      expect(evCalls(tool)).toBe(before + 1);
    } finally {
      await legacy.close();
      await modern.close();
    }
  });

  it('the same call with other arguments is another approval: an approval covers exactly its arguments (G1)', async () => {
    const c = await caller('modern', gw.url);
    try {
      const before = evCalls('echo');
      const first = await c.call('ev__echo', { message: 'one' });
      const id = String(first.meta['manifold/approvalId']);
      await admin('POST', `/admin/approvals/${id}`, { decision: 'approve' });
      const other = await c.call('ev__echo', { message: 'two' });
      expect(other.meta['manifold/approval']).toBe('queued');
      expect(other.meta['manifold/approvalId']).not.toBe(id);
      expect(evCalls('echo')).toBe(before);
      expect((await c.call('ev__echo', { message: 'one' })).text).toContain('Echo: one');
      expect(evCalls('echo')).toBe(before + 1);
      await admin('POST', `/admin/approvals/${other.meta['manifold/approvalId']}`, { decision: 'decline' });
      await c.call('ev__echo', { message: 'two' });
    } finally {
      await c.close();
    }
  });

  it('the webhook gets the request with a signed link; opening it decides nothing, its Approve button does', async () => {
    const c = await caller('legacy', gw.url);
    try {
      const before = refCalls('test_simple_text');
      const first = await c.call('ref__test_simple_text');
      const id = String(first.meta['manifold/approvalId']);
      await eventually(() => hooked.some((h) => h.id === id), 'the webhook was told');
      const note = hooked.find((h) => h.id === id)!;
      expect(note).toMatchObject({
        type: 'manifold.approval.requested',
        tool: 'ref__test_simple_text',
        server: 'ref',
      });
      const link = new URL(String(note.link));
      expect(link.pathname).toBe('/approvals/link');
      const token = link.searchParams.get('t')!;
      const page = await fetch(`${origin()}/approvals/link?t=${encodeURIComponent(token)}`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(await page.text()).toContain('ref__test_simple_text');
      expect((await admin('GET', `/admin/approvals/${id}`)).body.status).toBe('pending');
      // A tampered token opens nothing.
      const forged = await fetch(`${origin()}/approvals/link?t=${encodeURIComponent(`${token}x`)}`);
      expect(forged.status).toBe(404);
      const posted = await fetch(`${origin()}/approvals/link`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ t: token, decision: 'approve' }).toString(),
      });
      expect(posted.status).toBe(200);
      expect((await admin('GET', `/admin/approvals/${id}`)).body).toMatchObject({
        status: 'approved',
        decidedBy: 'signed-link',
      });
      const second = await c.call('ref__test_simple_text');
      expect(second.text).toContain('simple text response');
      expect(refCalls('test_simple_text')).toBe(before + 1);
    } finally {
      await c.close();
    }
  });

  it('the admin API refuses a bad decision and an unknown approval with the right status', async () => {
    expect((await admin('POST', '/admin/approvals/nope', { decision: 'approve' })).status).toBe(404);
    expect((await admin('POST', '/admin/approvals/nope', { decision: 'maybe' })).status).toBe(400);
    expect((await admin('GET', '/admin/approvals?status=weird')).status).toBe(400);
    const r = await fetch(`${origin()}/admin/approvals/nope`, { method: 'POST', body: 'not json' });
    expect(r.status).toBe(400);
  });
});
