import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sealer } from '../../src/auth/seal.js';
import { testIssuer } from '../helpers/factories.js';
import { EVERYTHING, eventually, ROOT, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { legacyRequest, legacySession } from '../helpers/legacy.js';
import { META_CAPS, modernRequest } from '../helpers/modern.js';
import { freshDatabase } from '../helpers/postgres.js';

// #15: a modern client's retry of a call held on one instance (a legacy upstream asked for
// elicitation mid-call) lands on another instance, which forwards it to the holder through the
// instance registry in Postgres. Two gateways in this process, each with its own stdio child of
// server-everything, share nothing but the database and the deployment's secret.
const SECRET = 'one-secret-every-instance-shares-0123456789';
const ISS = 'https://issuer.forward.test';
const AUD = 'manifold-forward';
const TASKS = 'io.modelcontextprotocol/tasks';
const CAPS = { [META_CAPS]: { elicitation: { form: {} } } };
const TOOL = 'ev__trigger-elicitation-request';
const CALL = { name: TOOL, arguments: {} };

describe('a held MRTR retry on another instance (Postgres)', () => {
  let url: string;
  let a: TestGateway;
  let b: TestGateway;
  let alice: string;
  let mallory: string;
  let dir: string;
  let askLog: string;
  const as = (token: string) => ({ meta: CAPS, headers: { authorization: `Bearer ${token}` } });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mf-pg-forward-'));
    askLog = join(dir, 'ask.log');
    writeFileSync(askLog, '');
    url = await freshDatabase('forward');
    const issuer = await testIssuer(ISS, AUD);
    alice = await issuer.mint({ scope: 'tools:*' }, 'alice');
    mallory = await issuer.mint({ scope: 'tools:*' }, 'mallory');
    const raw = {
      mcpServers: {
        ev: { command: process.execPath, args: [EVERYTHING, 'stdio'], clientFeatures: { elicitation: true } },
        // The task below gets its own server: over stdio, a question goes to the only call in flight.
        evt: {
          command: process.execPath,
          args: [EVERYTHING, 'stdio'],
          clientFeatures: { elicitation: true },
        },
        wait: {
          command: process.execPath,
          args: [join(ROOT, 'test/fixtures/ask-then-wait.mjs')],
          env: { ASK_LOG: askLog },
          clientFeatures: { elicitation: true },
        },
      },
      gateway: {
        store: { postgres: '${MANIFOLD_PG_URL}' },
        cursorSecret: '${MANIFOLD_CURSOR_SECRET}',
        auth: { ...issuer.auth },
      },
    };
    const env = { MANIFOLD_PG_URL: url, MANIFOLD_CURSOR_SECRET: SECRET };
    [a, b] = await Promise.all([startTestGateway(raw, { env }), startTestGateway(raw, { env })]);
  }, 120_000);

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A call on A that stops at its question: the state to answer it with. */
  const heldOnA = async (): Promise<{ state: string; key: string }> => {
    const first = await modernRequest(a.url, 'tools/call', CALL, as(alice));
    expect(first.body.result?.resultType, JSON.stringify(first.body)).toBe('input_required');
    const [key] = Object.keys(first.body.result!.inputRequests as object);
    return { state: first.body.result!.requestState as string, key: key! };
  };
  const retry = (
    gw: TestGateway,
    token: string,
    held: { state: string; key: string },
    name: string,
    headers = {},
  ) =>
    modernRequest(
      gw.url,
      'tools/call',
      {
        ...CALL,
        inputResponses: { [held.key]: { action: 'accept', content: { name } } },
        requestState: held.state,
      },
      { meta: CAPS, headers: { authorization: `Bearer ${token}`, ...headers } },
    );

  it('each instance registers where it is reached', async () => {
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const { rows } = await db.query<{ url: string }>('SELECT url FROM manifold_instances ORDER BY url');
      expect(rows.map((r) => `${r.url}/mcp`).sort()).toEqual([a.url, b.url].sort());
    } finally {
      await db.end();
    }
  });

  it('a retry sent to the other instance is forwarded to the holder and completes the call', async () => {
    const held = await heldOnA();
    const done = await retry(b, alice, held, 'Lin');
    expect(done.status).toBe(200);
    expect(done.body.result?.resultType).toBe('complete');
    expect(JSON.stringify(done.body.result?.content)).toContain('- Name: Lin');
    // Single-use still: the same state, on either instance, no longer opens.
    expect((await retry(b, alice, held, 'Lin')).body.error?.code).toBe(-32602);
    expect((await retry(a, alice, held, 'Lin')).body.error?.code).toBe(-32602);
  });

  it('a v2 SDK client whose retries go to the other instance completes its call there', async () => {
    // Every request with a requestState goes to B; the rest to A (as a load balancer may do).
    const sentTo: string[] = [];
    const split: typeof fetch = (_input, init) => {
      const retry = typeof init?.body === 'string' && init.body.includes('"requestState"');
      const target = retry ? b.url : a.url;
      sentTo.push(retry ? 'B' : 'A');
      return fetch(target, init);
    };
    const client = new ModernClient(
      { name: 'v2-split', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    const asked: unknown[] = [];
    client.setRequestHandler('elicitation/create', async (r) => {
      asked.push(r.params);
      return { action: 'accept' as const, content: { name: 'Ada v2' } };
    });
    await client.connect(
      new ModernTransport(new URL(a.url), {
        fetch: split,
        requestInit: { headers: { authorization: `Bearer ${alice}` } },
      }),
    );
    try {
      const result = (await client.callTool({ name: TOOL, arguments: {} })) as {
        content: { text?: string }[];
      };
      expect(asked).toHaveLength(1);
      expect(result.content.map((c) => c.text).join('\n')).toContain('- Name: Ada v2');
      expect(sentTo).toContain('B');
    } finally {
      await client.close();
    }
  });

  it('a client that closes a forwarded retry stream cancels the call on the holder (patterns/cancellation)', async () => {
    // With a progress token, what follows the answer streams (SSE), through B, from A.
    const first = await modernRequest(
      a.url,
      'tools/call',
      { name: 'wait__ask_then_wait', arguments: {}, _meta: { progressToken: 'p1' } },
      as(alice),
    );
    expect(first.body.result?.resultType).toBe('input_required');
    const [key] = Object.keys(first.body.result!.inputRequests as object);
    const gone = new AbortController();
    let streamed = false;
    const retried = modernRequest(
      b.url,
      'tools/call',
      {
        name: 'wait__ask_then_wait',
        arguments: {},
        inputResponses: { [key!]: { action: 'accept', content: { name: 'Kay' } } },
        requestState: first.body.result!.requestState,
      },
      {
        meta: CAPS,
        headers: { authorization: `Bearer ${alice}` },
        signal: gone.signal,
        onMessage: (m) => {
          if (m.method === 'notifications/progress') streamed = true;
        },
      },
    ).catch((e: unknown) => e);
    // The answer reached A's upstream through B, and its progress streams back; then the client leaves B.
    await eventually(() => readFileSync(askLog, 'utf8').includes('answered Kay'), 'the answer upstream');
    await eventually(() => streamed, 'progress streamed back through B');
    gone.abort();
    expect(await retried).toBeInstanceOf(Error);
    await eventually(() => readFileSync(askLog, 'utf8').includes('cancelled'), 'the cancellation upstream');
  });

  it('a retry answered in JSON (nothing streamed yet) is cancelled when its client leaves, sent to the holder or forwarded', async () => {
    const cancelled = () =>
      readFileSync(askLog, 'utf8')
        .split('\n')
        .filter((l) => l === 'cancelled').length;
    for (const [via, name] of [
      [a, 'Jo'],
      [b, 'Lu'],
    ] as const) {
      // No progress token: nothing streams before the result, so the answer would be plain JSON.
      const first = await modernRequest(
        a.url,
        'tools/call',
        { name: 'wait__ask_then_wait', arguments: {} },
        as(alice),
      );
      expect(first.body.result?.resultType).toBe('input_required');
      const [key] = Object.keys(first.body.result!.inputRequests as object);
      const before = cancelled();
      const gone = new AbortController();
      const retried = modernRequest(
        via.url,
        'tools/call',
        {
          name: 'wait__ask_then_wait',
          arguments: {},
          inputResponses: { [key!]: { action: 'accept', content: { name } } },
          requestState: first.body.result!.requestState,
        },
        { meta: CAPS, headers: { authorization: `Bearer ${alice}` }, signal: gone.signal },
      ).catch((e: unknown) => e);
      await eventually(
        () => readFileSync(askLog, 'utf8').includes(`answered ${name}`),
        'the answer upstream',
      );
      gone.abort();
      expect(await retried).toBeInstanceOf(Error);
      await eventually(
        () => cancelled() > before,
        `the cancellation upstream (retry sent to ${via === a ? 'A' : 'B'})`,
      );
    }
  });

  it('A4: another subject cannot answer the call from the other instance; its owner still can', async () => {
    const held = await heldOnA();
    const stolen = await retry(b, mallory, held, 'Mallory');
    expect(stolen.body.error?.code).toBe(-32602);
    expect(stolen.body.error?.message).toMatch(/send the original request again/);
    const done = await retry(b, alice, held, 'Ada');
    expect(JSON.stringify(done.body.result?.content)).toContain('- Name: Ada');
  });

  it('a forged forward header from outside is refused, and grants nothing', async () => {
    const held = await heldOnA();
    // Garbage; then a well-formed mark under another secret (what an outsider could make).
    const outsider = await Sealer.create(new TextEncoder().encode('x'.repeat(40)), 'manifold/request-state');
    const marker = await Sealer.create(
      new TextEncoder().encode(await outsider.seal('manifold/forward-key')),
      'manifold/forward',
    );
    const forged = await marker.seal({ t: 'any', x: Date.now() + 60_000, d: 'any' });
    for (const mark of ['1', forged]) {
      for (const gw of [a, b]) {
        const refused = await retry(gw, alice, held, 'Eve', { 'manifold-forwarded': mark });
        expect(refused.status).toBe(403);
        expect(refused.body.error?.message).toMatch(/forwarded/);
      }
    }
    // On a request that is not a retry, too.
    const plain = await modernRequest(
      b.url,
      'tools/list',
      {},
      {
        ...as(alice),
        headers: { authorization: `Bearer ${alice}`, 'manifold-forwarded': forged },
      },
    );
    expect(plain.status).toBe(403);
    // The held call was not touched: its owner answers it through B.
    const done = await retry(b, alice, held, 'Grace');
    expect(JSON.stringify(done.body.result?.content)).toContain('- Name: Grace');
  });

  it('a legacy server task made on one instance is polled, answered and finished on the other', async () => {
    const ext = { [META_CAPS]: { elicitation: { form: {} }, extensions: { [TASKS]: {} } } };
    const on = (gw: TestGateway, method: string, params: Record<string, unknown>) =>
      modernRequest(gw.url, method, params, { meta: ext, headers: { authorization: `Bearer ${alice}` } });
    const created = await on(a, 'tools/call', {
      name: 'evt__simulate-research-query',
      arguments: { topic: 'python', ambiguous: true },
    });
    expect(created.body.result?.resultType).toBe('task');
    const taskId = created.body.result!.taskId as string;
    const until = async (done: (t: Record<string, unknown>) => boolean) => {
      let t: Record<string, unknown> = {};
      await eventually(
        async () => {
          const r = await on(b, 'tasks/get', { taskId });
          expect(r.body.error).toBeUndefined();
          t = r.body.result!;
          return done(t);
        },
        () => `task ${taskId} to get there, last ${JSON.stringify(t)}`,
        30_000,
        150,
      );
      return t;
    };
    // B's own server-everything never heard of this task: every answer below is A's, through B.
    const waiting = await until((t) => t.status === 'input_required' && t.inputRequests !== undefined);
    const [key] = Object.keys(waiting.inputRequests as object);
    const ack = await on(b, 'tasks/update', {
      taskId,
      inputResponses: { [key!]: { action: 'accept', content: { interpretation: 'programming' } } },
    });
    expect(ack.body.result).toMatchObject({ resultType: 'complete' });
    const done = await until((t) => t.status === 'completed' || t.status === 'failed');
    expect(done.status).toBe('completed');
    expect(JSON.stringify(done.result)).toMatch(/programming/i);
    // Another subject's request for it is not forwarded, and fails as an unknown task.
    const foreign = await modernRequest(
      b.url,
      'tasks/get',
      { taskId },
      { meta: ext, headers: { authorization: `Bearer ${mallory}` } },
    );
    expect(foreign.body.error?.code).toBe(-32602);
  }, 60_000);

  it('a 2025 client: its task made through one instance is read on the other, with the same session', async () => {
    // The session is in Postgres: B serves it too; the task is in A's upstream session only.
    const headers = await legacySession(a.url, { headers: { authorization: `Bearer ${alice}` } });
    const created = await legacyRequest(a.url, headers, 'tools/call', {
      name: 'evt__simulate-research-query',
      arguments: { topic: 'rust' },
      task: { ttl: 60_000 },
    });
    const taskId = (created.body.result as { task: { taskId: string } }).task.taskId;
    const got = await legacyRequest(b.url, headers, 'tasks/get', { taskId });
    expect(got.body.result).toMatchObject({ taskId });
    const result = await legacyRequest(b.url, headers, 'tasks/result', { taskId });
    expect(JSON.stringify(result.body.result)).toMatch(/rust/i);
  }, 60_000);

  it('with the holder gone, a retry on the other instance gets the clear invalid-state error, never a 500', async () => {
    const held = await heldOnA();
    const port = new URL(a.url).port;
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const { rows } = await db.query<{ id: string }>('SELECT id FROM manifold_instances WHERE url LIKE $1', [
        `%:${port}`,
      ]);
      const aId = rows[0]!.id;
      await a.stop();
      // Stopped: A left the registry.
      const gone = await retry(b, alice, held, 'Lin');
      expect(gone.status).toBeLessThan(500);
      expect(gone.body.error?.code).toBe(-32602);
      expect(gone.body.error?.message).toMatch(/send the original request again/);
      // Killed without a word: its row still looks alive, but nothing answers at its address.
      await db.query('INSERT INTO manifold_instances (id, url, seen_at) VALUES ($1, $2, $3)', [
        aId,
        `http://127.0.0.1:${port}`,
        Date.now(),
      ]);
      // The same state (B refused it unforwarded above): now B tries the address and finds no one.
      const dead = await retry(b, alice, held, 'Lin');
      expect(dead.status).toBeLessThan(500);
      expect(dead.body.error?.code).toBe(-32602);
      expect(dead.body.error?.message).toMatch(/send the original request again/);
      expect(b.logs.some((l) => l.event === 'instances.forward_failed')).toBe(true);
    } finally {
      await db.end();
    }
    // B itself serves on.
    const list = await modernRequest(b.url, 'tools/list', {}, as(alice));
    expect(list.body.result?.tools).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: TOOL })]),
    );
  });
});
