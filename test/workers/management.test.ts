import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { resolve } from 'node:path';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectLegacy, connectModern, startHttpTap, startReferenceHttp } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { eventually, ROOT, startJsonSink, stopChild } from '../helpers/harness.js';
import { giveKey } from '../helpers/key-page.js';
import { META_CAPS, modernRequest } from '../helpers/modern.js';
import { type RunningWorker, startWorker } from '../helpers/workerd.js';

/**
 * #52's management plane on Workers, in real workerd (Miniflare): a user's own key with clients of
 * both eras (the URL elicitation, the key given on the page, the next call carrying it upstream, a
 * 401 dropping it), and the admin API (servers listed and checked by a dry run; tokens
 * listed and one revoked, then refused; the audit query; the approvals queue listed and decided,
 * through the API and through the signed link its webhook is sent).
 */
type Obj = Record<string, unknown>;
const ISS = 'https://issuer.workers-admin';
const AUD = 'manifold-workers-admin';
const KEY_SERVER = resolve(ROOT, 'test/fixtures/key-server.mjs');
const text = (r: unknown) =>
  (((r ?? {}) as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

describe('workers: user keys and the admin API (#52)', () => {
  let keyServer: ChildProcess;
  let keyPort: number;
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  /** In front of the queued server `ref`: its calls counted on the wire. */
  let refTap: Awaited<ReturnType<typeof startHttpTap>>;
  /** The queued server's `approval.notify` webhook: the approval requests it was sent. */
  let hook: Server;
  let hooked: Obj[] = [];
  let jwks: { keys: Record<string, unknown>[] };
  let mint: (scope: string, sub: string, claims?: Obj) => Promise<string>;
  let worker: RunningWorker;
  let persist: string;
  let admin: string;
  let config: Obj;
  const vars = () => ({
    MANIFOLD_JWKS: JSON.stringify(jwks),
    MANIFOLD_OAUTH_SECRET: 'an-oauth-secret-of-at-least-32-characters!',
    OPERATOR_KEY: 'key-operator',
  });
  const origin = () => new URL(worker.url).origin;
  const api = async (method: string, path: string, token = admin, body?: unknown) => {
    const r = await fetch(`${origin()}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: r.status, body: (await r.json().catch(() => ({}))) as Obj };
  };

  beforeAll(async () => {
    keyServer = spawn(process.execPath, [KEY_SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
    keyPort = await new Promise<number>((res) =>
      keyServer.stdout!.once('data', (d) => res(Number(String(d).trim()))),
    );
    ref = await startReferenceHttp();
    refTap = await startHttpTap(ref.port);
    const sink = await startJsonSink();
    hook = sink.server;
    hooked = sink.received;
    const hookPort = sink.port;
    const issuer = await testIssuer(ISS, AUD, { kid: 'k1' });
    jwks = issuer.jwks;
    mint = (scope, sub, claims = {}) => issuer.mint({ scope, ...claims }, sub);
    admin = await mint('manifold:admin tools:*', 'ops');
    config = {
      mcpServers: {
        keyed: {
          url: `http://127.0.0.1:${keyPort}/mcp`,
          auth: { mode: 'user-key' },
          headers: { Authorization: 'Bearer ${OPERATOR_KEY}' },
        },
        plain: { url: ref.url },
        ref: {
          url: `http://127.0.0.1:${refTap.port}/mcp`,
          approval: {
            ask: ['test_simple_text'],
            via: 'queue',
            timeoutSeconds: 1,
            notify: `http://127.0.0.1:${hookPort}/hooks/approvals`,
          },
        },
      },
      gateway: {
        allowedHosts: [
          `127.0.0.1:${keyPort}`,
          `127.0.0.1:${ref.port}`,
          `127.0.0.1:${refTap.port}`,
          `127.0.0.1:${hookPort}`,
        ],
        auth: { issuer: ISS, audience: AUD, jwksFile: 'MANIFOLD_JWKS' },
        oauth: { secret: '${MANIFOLD_OAUTH_SECRET}' },
        logLevel: 'error',
      },
    };
    worker = await startWorker({ config, vars: vars() });
    persist = worker.persist;
  }, 120_000);

  afterAll(async () => {
    await worker?.stop();
    if (keyServer) await stopChild(keyServer);
    await refTap?.stop();
    await ref?.stop();
    if (hook) await new Promise((res) => hook.close(res));
    if (persist) rmSync(persist, { recursive: true, force: true });
  });

  const legacy = async (token: string, elicit: boolean) => {
    const client = new LegacyClient(
      { name: 'workers-v1', version: '1.0.0' },
      { capabilities: elicit ? { elicitation: { url: {} } } : {} },
    );
    await client.connect(
      new LegacyTransport(new URL(worker.url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  };

  it('user key, legacy client: -32042 to the key page, the next call carries its key, a 401 drops it', async () => {
    const alice = await legacy(await mint('tools:*', 'alice'), true);
    try {
      const refused = await alice.callTool({ name: 'keyed__whoami', arguments: {} }).then(
        () => undefined,
        (e: { code?: number; data?: { elicitations?: Obj[] } }) => e,
      );
      expect(refused?.code).toBe(-32042);
      const link = String(refused?.data?.elicitations?.[0]?.url);
      expect(new URL(link).origin).toBe(origin());
      expect(new URL(link).pathname).toBe('/keys/keyed');
      expect(await giveKey(`${link}x`, 'key-mallory')).toBe(404);
      expect(await giveKey(link, 'key-alice')).toBe(200);
      expect(text(await alice.callTool({ name: 'keyed__whoami', arguments: {} }))).toBe(
        'called with key-alice',
      );

      await fetch(`http://127.0.0.1:${keyPort}/reject?key=key-alice`, { method: 'POST' });
      const failed = await alice.callTool({ name: 'keyed__whoami', arguments: {} }).then(
        (r) => r,
        (e: unknown) => e,
      );
      expect(text(failed)).not.toContain('called with');
      const again = await alice.callTool({ name: 'keyed__whoami', arguments: {} }).then(
        () => undefined,
        (e: { code?: number }) => e,
      );
      expect(again?.code).toBe(-32042);
    } finally {
      await alice.close();
    }
  });

  it('user key, modern client: input_required with the URL elicitation; answered, the retry carries its key', async () => {
    const token = await mint('tools:*', 'bob');
    const client = new ModernClient(
      { name: 'workers-v2', version: '1.0.0' },
      { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    const asked: Obj[] = [];
    client.setRequestHandler('elicitation/create', async (r) => {
      asked.push(r.params as Obj);
      expect(await giveKey(String((r.params as Obj).url), 'key-bob')).toBe(200);
      return { action: 'accept' } as never;
    });
    await client.connect(
      new ModernTransport(new URL(worker.url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    try {
      expect(text(await client.callTool({ name: 'keyed__whoami', arguments: {} }))).toBe(
        'called with key-bob',
      );
      expect(asked).toEqual([expect.objectContaining({ mode: 'url' })]);
      const seen = (await (await fetch(`http://127.0.0.1:${keyPort}/seen`)).json()) as string[];
      expect(seen).toContain('Bearer key-bob');
    } finally {
      await client.close();
    }
  });

  it('admin: servers listed with state and era; a dry run answers the config errors by path, and the diff', async () => {
    const list = await api('GET', '/admin/servers');
    expect(list.status).toBe(200);
    expect((list.body.servers as Obj[]).map((s) => s.name).sort()).toEqual(['keyed', 'plain', 'ref']);
    const bad = await api('POST', '/admin/servers?dryRun=1', admin, {
      name: 'ref2',
      config: { url: ref.url, retry: 9 },
    });
    expect(bad.status).toBe(200);
    expect(bad.body.errors).toEqual([expect.objectContaining({ path: 'mcpServers.ref2.retry' })]);
    const dry = await api('POST', '/admin/servers?dryRun=1', admin, {
      name: 'ref2',
      config: { url: ref.url },
    });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ applied: false, diff: { change: 'added' } });
  });

  it('admin: the approvals queue listed and decided; the approved call runs once', async () => {
    const token = await mint('tools:*', 'dave');
    const call = () =>
      modernRequest(
        worker.url,
        'tools/call',
        { name: 'ref__test_simple_text', arguments: {} },
        { headers: { authorization: `Bearer ${token}` } },
      );
    const held = await call();
    const id = String(((held.body.result as Obj)._meta as Obj)['manifold/approvalId']);
    expect(id).toMatch(/^ref\./);
    const listed = await api('GET', '/admin/approvals?status=pending');
    expect(listed.status).toBe(200);
    expect((listed.body.approvals as Obj[]).map((a) => a.id)).toContain(id);
    const decided = await api('POST', `/admin/approvals/${id}`, admin, { decision: 'approve' });
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({ id, status: 'approved', decidedBy: 'ops' });
    expect((await api('POST', `/admin/approvals/${id}`, admin, { decision: 'decline' })).status).toBe(409);
    expect(text((await call()).body.result)).toContain('This is a simple text response');
  });

  it('a queued call as a task (2026 client, tasks extension): approved through the admin API, tasks/get completes with the one result', async () => {
    const headers = { authorization: `Bearer ${await mint('tools:*', 'gina')}` };
    const ext = { [META_CAPS]: { extensions: { 'io.modelcontextprotocol/tasks': {} } } };
    const runs = () =>
      refTap.exchanges.filter(
        (x) => x.body?.method === 'tools/call' && (x.body.params as Obj)?.name === 'test_simple_text',
      ).length;
    const before = runs();
    const created = await modernRequest(
      worker.url,
      'tools/call',
      { name: 'ref__test_simple_text', arguments: {} },
      { headers, meta: ext },
    );
    const task = created.body.result as Obj;
    expect(task).toMatchObject({ resultType: 'task', status: 'working' });
    const id = String((task._meta as Obj)['manifold/approvalId']);
    const get = async () =>
      (await modernRequest(worker.url, 'tasks/get', { taskId: task.taskId }, { headers, meta: ext })).body;
    // Before the decision: the task is found (in the server's object, where its approval is) and waits.
    expect(await get()).toMatchObject({ result: { taskId: task.taskId, status: 'working' } });
    // Someone else's tasks/get of the same id: unknown, like any task that is not theirs.
    const other = { authorization: `Bearer ${await mint('tools:*', 'hal')}` };
    const stranger = await modernRequest(
      worker.url,
      'tasks/get',
      { taskId: task.taskId },
      {
        headers: other,
        meta: ext,
      },
    );
    expect(stranger.body.error?.message).toMatch(/unknown task/i);
    expect(runs()).toBe(before);

    const decided = await api('POST', `/admin/approvals/${id}`, admin, { decision: 'approve' });
    expect(decided.body).toMatchObject({ id, status: 'approved', decidedBy: 'ops' });
    const done = (await get()).result as Obj;
    expect(done.status).toBe('completed');
    expect(text(done.result)).toContain('This is a simple text response');
    // Asked again: the same one result, and the upstream called once.
    expect(text(((await get()).result as Obj).result)).toContain('This is a simple text response');
    expect(runs()).toBe(before + 1);
  });

  /** Calls of the queued server's `test_simple_text` that reached it (on the wire, in front of it). */
  const refRuns = () =>
    refTap.exchanges.filter(
      (x) => x.body?.method === 'tools/call' && (x.body.params as Obj)?.name === 'test_simple_text',
    ).length;

  it("a 2025 client's queued call (held): listed by the admin API, approved, and its next identical call gets the one run's result", async () => {
    const nina = await legacy(await mint('tools:*', 'nina'), false);
    try {
      const before = refRuns();
      const call = { name: 'ref__test_simple_text', arguments: {} };
      // Held for the server's timeoutSeconds, then returned with the approval id (its session is
      // its tenant's object's, the approval in the one queue every place shares).
      const held = (await nina.callTool(call)) as Obj;
      expect(held.isError).toBe(true);
      const id = String((held._meta as Obj)['manifold/approvalId']);
      const listed = await api('GET', '/admin/approvals?status=pending&tenant=nina');
      expect(listed.status).toBe(200);
      expect(listed.body.approvals).toEqual([
        expect.objectContaining({ id, subject: 'nina', server: 'ref', tool: 'ref__test_simple_text' }),
      ]);
      expect((await api('GET', `/admin/approvals/${id}`)).body).toMatchObject({ id, status: 'pending' });
      expect(refRuns()).toBe(before);

      const decided = await api('POST', `/admin/approvals/${id}`, admin, { decision: 'approve' });
      expect(decided.status).toBe(200);
      expect(decided.body).toMatchObject({ id, status: 'approved', decidedBy: 'ops' });
      expect((await api('POST', `/admin/approvals/${id}`, admin, { decision: 'decline' })).status).toBe(409);
      const ran = await nina.callTool(call);
      expect(text(ran)).toContain('This is a simple text response');
      expect(refRuns()).toBe(before + 1);
      expect((await api('GET', `/admin/approvals/${id}`)).body).toMatchObject({ id, status: 'done' });
    } finally {
      await nina.close();
    }
  });

  it("a 2025 client's queued call as a task: listed by the admin API, approved, tasks/get completed and tasks/result the one run's result", async () => {
    const omar = await legacy(await mint('tools:*', 'omar'), false);
    try {
      const before = refRuns();
      const stream = omar.experimental.tasks.callToolStream(
        { name: 'ref__test_simple_text', arguments: {} },
        CallToolResultSchema,
        { task: { ttl: 60_000 }, timeout: 30_000 },
      );
      const it = stream[Symbol.asyncIterator]();
      const first = await it.next();
      expect(first.value?.type).toBe('taskCreated');
      const task = (first.value as { task: Obj }).task;
      const taskId = String(task.taskId);
      const rest = (async () => {
        const seen: Obj[] = [];
        for (;;) {
          const n = await it.next();
          if (n.done) return seen;
          seen.push(n.value as unknown as Obj);
        }
      })();
      const listed = await api('GET', '/admin/approvals?status=pending&tenant=omar');
      const [waiting] = listed.body.approvals as Obj[];
      expect(waiting).toMatchObject({ subject: 'omar', server: 'ref', tool: 'ref__test_simple_text' });
      const id = String(waiting!.id);
      expect(String(task.statusMessage)).toContain(id);
      expect(await omar.experimental.tasks.getTask(taskId)).toMatchObject({ status: 'working' });
      expect(refRuns()).toBe(before);

      const decided = await api('POST', `/admin/approvals/${id}`, admin, { decision: 'approve' });
      expect(decided.body).toMatchObject({ id, status: 'approved', decidedBy: 'ops' });
      const last = (await rest).at(-1) as { type: string; result?: Obj };
      expect(last.type).toBe('result');
      expect(text(last.result)).toContain('This is a simple text response');
      expect(await omar.experimental.tasks.getTask(taskId)).toMatchObject({ status: 'completed' });
      // Asked again: the same one result, never a second run.
      const again = await omar.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      expect(text(again)).toContain('This is a simple text response');
      expect(refRuns()).toBe(before + 1);
    } finally {
      await omar.close();
    }
  });

  for (const era of ['2025-11-25', '2026-07-28'] as const) {
    it(`a ${era} client's queued call: the webhook gets a signed link; opening it decides nothing, a tampered one nothing, its Approve button approves and the next call runs once`, async () => {
      const subject = era === '2025-11-25' ? 'pia' : 'quinn';
      const token = await mint('tools:*', subject);
      const client =
        era === '2025-11-25'
          ? await connectLegacy(worker.url, token, 'workers-link-v1')
          : await connectModern(worker.url, token, { name: 'workers-link-v2' });
      const call = async () =>
        (await client.client.callTool({ name: 'ref__test_simple_text', arguments: {} })) as Obj;
      const status = async (id: string) => (await api('GET', `/admin/approvals/${id}`)).body;
      const pendingIds = async () =>
        ((await api('GET', `/admin/approvals?status=pending&tenant=${subject}`)).body.approvals as Obj[]).map(
          (a) => a.id,
        );
      try {
        const before = refRuns();
        const held = await call();
        expect(held.isError).toBe(true);
        expect((held._meta as Obj)['manifold/approval']).toBe('queued');
        const id = String((held._meta as Obj)['manifold/approvalId']);

        // The webhook is told, with the signed link.
        await eventually(() => hooked.some((h) => h.id === id), 'the webhook was told');
        const note = hooked.find((h) => h.id === id)!;
        expect(note).toMatchObject({
          type: 'manifold.approval.requested',
          subject,
          server: 'ref',
          tool: 'ref__test_simple_text',
        });
        // The link is followed as sent: it names the origin clients reach the Worker at (no
        // advertiseUrl here, and a Worker has no bound address of its own).
        const link = new URL(String(note.link));
        expect(link.origin).toBe(origin());
        expect(link.pathname).toBe('/approvals/link');
        const t = link.searchParams.get('t')!;
        const open = (sealed: string) => {
          const url = new URL(link);
          url.searchParams.set('t', sealed);
          return fetch(url);
        };
        // The page's form posts to its own path (`action="/approvals/link"`), as a browser would.
        const post = (sealed: string, decision: string) =>
          fetch(new URL('/approvals/link', link), {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ t: sealed, decision }).toString(),
          });

        // Opening it (as a chat tool's preview would) shows the call and decides nothing.
        const page = await open(t);
        expect(page.status).toBe(200);
        expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
        const shown = await page.text();
        expect(shown).toContain('ref__test_simple_text');
        expect(shown).toContain('<form method="post" action="/approvals/link">');
        expect(shown).toContain('value="approve"');
        expect(await pendingIds()).toContain(id);

        // One character changed (mid-body, so the sealed bytes differ): refused, whether opened
        // or posted, and nothing decided.
        const at = Math.floor(t.indexOf('.') / 2);
        const tampered = `${t.slice(0, at)}${t[at] === 'A' ? 'B' : 'A'}${t.slice(at + 1)}`;
        expect(tampered).not.toBe(t);
        expect((await open(tampered)).status).toBe(404);
        expect((await post(tampered, 'approve')).status).toBe(404);
        expect(await pendingIds()).toContain(id);
        expect(await status(id)).toMatchObject({ id, status: 'pending' });
        expect(refRuns()).toBe(before);

        // Its Approve button: approved, and the approval names the link as who decided.
        const approved = await post(t, 'approve');
        expect(approved.status).toBe(200);
        expect(await approved.text()).toContain('Approved');
        expect(await status(id)).toMatchObject({ id, status: 'approved', decidedBy: 'signed-link' });
        expect(await pendingIds()).not.toContain(id);
        // A decision is final (SECURITY G2): the same link cannot decline it now.
        expect((await post(t, 'decline')).status).toBe(409);
        expect(refRuns()).toBe(before);

        // The next identical call runs it, once, with its result.
        const ran = await call();
        expect(ran.isError).not.toBe(true);
        expect(text(ran)).toContain('This is a simple text response');
        expect(refRuns()).toBe(before + 1);
        expect(await status(id)).toMatchObject({ id, status: 'done', decidedBy: 'signed-link' });
      } finally {
        await client.close();
      }
    });
  }

  it('admin: a server added through the API is stored and applied by every place; it survives a restart, and removed its tool is gone', async () => {
    const headers = { authorization: `Bearer ${await mint('tools:*', 'ivy')}` };
    const call = async () =>
      (
        await modernRequest(
          worker.url,
          'tools/call',
          { name: 'extra__test_simple_text', arguments: {} },
          { headers },
        )
      ).body;
    const legacyNames = async () => {
      const client = await legacy(await mint('tools:*', 'ivy'), false);
      try {
        return (await client.listTools()).tools.map((t) => t.name);
      } finally {
        await client.close();
      }
    };
    const added = await api('POST', '/admin/servers', admin, { name: 'extra', config: { url: ref.url } });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ applied: true, diff: { change: 'added' } });
    // The isolate calls it; the server's own object lists and verifies it (its snapshot).
    expect(text((await call()).result)).toContain('This is a simple text response');
    expect(await worker.objectPaths('UPSTREAMS', 'extra')).toHaveProperty(['/__manifold/snapshot']);
    // A tenant's object (a legacy client's session) has it too.
    expect(await legacyNames()).toContain('extra__test_simple_text');

    // A restart: a new Miniflare over the same persisted objects.
    await worker.stop();
    worker = await startWorker({ config, vars: vars(), persist });
    // Served from the stored listing until the server's object has connected again (warm start).
    await eventually(
      async () => text((await call()).result).includes('This is a simple text response'),
      'the stored server called after the restart',
    );
    const listed = await api('GET', '/admin/servers/extra');
    expect(listed.body).toMatchObject({ name: 'extra', source: 'api', updatedBy: 'ops' });
    expect(await legacyNames()).toContain('extra__test_simple_text');

    expect((await api('DELETE', '/admin/servers/extra')).status).toBe(200);
    expect((await call()).error?.message).toMatch(/unknown tool/i);
    await eventually(
      async () => !(await legacyNames()).includes('extra__test_simple_text'),
      'gone from the tenant object',
    );
    expect((await api('GET', '/admin/servers/extra')).status).toBe(404);
  });

  it('I4: a token revoked through the admin API is refused by every place at its next request, and after a restart', async () => {
    const token = await mint('tools:*', 'erin', { jti: 'erin-token-1' });
    const headers = { authorization: `Bearer ${token}` };
    const list = () => modernRequest(worker.url, 'tools/list', {}, { headers });
    // The tenant's object, asked directly: another place, with its own copy of the list.
    const tenantObject = () => worker.objectFetch('TENANTS', 'tenant:erin', '/mcp', headers);
    expect((await list()).status).toBe(200);
    expect((await tenantObject()).status).not.toBe(401);
    await eventually(async () => {
      const r = await api('GET', '/admin/tokens');
      return r.status === 200 && (r.body.tokens as Obj[]).some((t) => t.id === 'erin-token-1');
    }, 'the token listed');
    const revoked = await api('POST', '/admin/tokens/erin-token-1/revoke', admin, {});
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ id: 'erin-token-1', revoked: true, revokedBy: 'ops' });
    // The place that revoked it refuses it at once; the others within their refresh interval.
    expect((await list()).status).toBe(401);
    await eventually(async () => (await tenantObject()).status === 401, 'the tenant object refuses it');
    const legacyRefused = await legacy(token, false).then(
      async (c) => {
        await c.close();
        return false;
      },
      () => true,
    );
    expect(legacyRefused).toBe(true);

    await worker.stop();
    worker = await startWorker({ config, vars: vars(), persist });
    expect((await list()).status).toBe(401);
    expect((await tenantObject()).status).toBe(401);
    // Another token of the same subject is still served.
    const fresh = await mint('tools:*', 'erin', { jti: 'erin-token-2' });
    expect(
      (await modernRequest(worker.url, 'tools/list', {}, { headers: { authorization: `Bearer ${fresh}` } }))
        .status,
    ).toBe(200);
  });

  it("admin: the audit query sees calls gateway-wide: an isolate's, a tenant object's and a server object's", async () => {
    const as = async (sub: string) => ({ authorization: `Bearer ${await mint('tools:*', sub)}` });
    const plainCall = { name: 'plain__test_simple_text', arguments: {} };
    // The isolate serves a modern call to a modern upstream.
    await modernRequest(worker.url, 'tools/call', plainCall, { headers: await as('frank') });
    // A legacy client's session is its tenant's object's.
    const kim = await legacy(await mint('tools:*', 'kim'), false);
    try {
      expect(text(await kim.callTool(plainCall))).toContain('This is a simple text response');
    } finally {
      await kim.close();
    }
    // A queued server's calls are its object's: held, approved, then run.
    const liz = await as('liz');
    const refCall = { name: 'ref__test_simple_text', arguments: {} };
    const held = await modernRequest(worker.url, 'tools/call', refCall, { headers: liz });
    const id = String(((held.body.result as Obj)._meta as Obj)['manifold/approvalId']);
    expect((await api('POST', `/admin/approvals/${id}`, admin, { decision: 'approve' })).status).toBe(200);
    expect(
      text((await modernRequest(worker.url, 'tools/call', refCall, { headers: liz })).body.result),
    ).toContain('This is a simple text response');

    const calls = async (query: string) => (await api('GET', `/admin/audit?${query}`)).body.calls as Obj[];
    await eventually(async () => {
      const tenants = (await calls('server=plain&tool=plain__test_simple_text')).map((c) => c.tenant);
      return tenants.includes('frank') && tenants.includes('kim');
    }, "the isolate's and the tenant object's calls in the window");
    const plain = await calls('server=plain&tool=plain__test_simple_text');
    expect(plain.every((c) => c.server === 'plain' && c.tool === 'plain__test_simple_text')).toBe(true);
    await eventually(
      async () =>
        (await calls('server=ref&tool=ref__test_simple_text&tenant=liz')).some(
          (c) => c.verdict === 'allowed',
        ),
      "the server object's run in the window",
    );
    const ref = await calls('server=ref&tool=ref__test_simple_text&tenant=liz');
    expect(ref.map((c) => c.verdict).sort()).toEqual(['allowed', 'denied']);
    expect((await api('GET', '/admin/audit?limit=0')).status).toBe(400);
  });
});
