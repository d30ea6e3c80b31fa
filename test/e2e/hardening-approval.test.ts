import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, ROOT, startTestGateway, stopChild, type TestGateway } from '../helpers/harness.js';
import { META_CAPS, modernRequest } from '../helpers/modern.js';
import { parsePromText } from '../helpers/prom-text.js';

/**
 * #49 (items 1, 7, 10, 12, 13): human approval and multi-round calls, attacked. The modern
 * upstream is test/fixtures/nagging-modern.mjs, which records every tools/call it receives (so
 * "never reaches the upstream" is counted, not assumed); the legacy one is
 * test/fixtures/ask-then-wait.mjs, which asks for a name mid-call (held for a modern client) and
 * logs the answer it gets. Clients of both eras: the v1 and v2 SDKs, and raw 2026-07-28 requests
 * where a test needs to send what an SDK would not (other arguments on a retry, a spoofed key).
 */

type Obj = Record<string, unknown>;
const NAGGING = resolve(ROOT, 'test/fixtures/nagging-modern.mjs');
const ASK_THEN_WAIT = resolve(ROOT, 'test/fixtures/ask-then-wait.mjs');
const FORM = { elicitation: { form: {} } };
const ALICE = { to: 'alice', amount: 1 };
const MALLORY = { to: 'mallory', amount: 1_000_000 };
const ACCEPT = { 'manifold.approval': { action: 'accept', content: { approve: true } } };
const SECRET = 'one-secret-both-instances-share-0123456789';

interface UpstreamCall {
  name: string;
  arguments?: Obj;
  inputResponses?: Obj;
  requestState?: string;
}

/** What a requestState seals (auth/seal.ts: base64url JSON, then a MAC). */
const unsealed = (state: unknown) =>
  JSON.parse(Buffer.from(String(state).split('.')[0]!, 'base64url').toString('utf8')) as Obj;

const textOf = (r: unknown) =>
  ((r as { content?: { text?: string }[] } | undefined)?.content ?? []).map((c) => c.text ?? '').join('\n');

/** Arguments nested `depth` objects deep. */
function nested(depth: number): Obj {
  let value: Obj = { leaf: true };
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

describe('approval and input rounds, attacked (#49)', () => {
  let up: ChildProcess;
  let base: string;
  let dir: string;
  let askLog: string;
  let gw: TestGateway;
  /** A second instance on the same store and secret. */
  let gw2: TestGateway;

  const upstreamCalls = async (from = 0): Promise<UpstreamCall[]> => {
    const seen = (await (await fetch(`${base}/calls`)).json()) as { calls: UpstreamCall[] };
    return seen.calls.slice(from);
  };
  const auditLines = (tool: string, g: TestGateway = gw) =>
    g.logs.filter((l) => l.event === 'audit.tools_call' && l.tool === tool);
  const asked = () => readFileSync(askLog, 'utf8');

  /** A raw 2026-07-28 tools/call from a client that declared elicitation; a retry when `state` is given. */
  const call = (
    name: string,
    args: Obj,
    retry?: { state: unknown; responses: Obj },
    options: { url?: string; signal?: AbortSignal } = {},
  ) =>
    modernRequest(
      options.url ?? gw.url,
      'tools/call',
      {
        name,
        arguments: args,
        ...(retry ? { requestState: retry.state, inputResponses: retry.responses } : {}),
      },
      { meta: { [META_CAPS]: FORM }, ...(options.signal ? { signal: options.signal } : {}) },
    );

  beforeAll(async () => {
    up = spawn(process.execPath, [NAGGING], {
      env: { ...process.env, PORT: '0' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const port = await new Promise<number>((res, rej) => {
      up.once('exit', (code) => rej(new Error(`nagging-modern exited with ${code}`)));
      up.stdout?.once('data', (d) => res(Number(String(d).trim())));
    });
    up.stdout?.resume();
    base = `http://127.0.0.1:${port}`;
    dir = mkdtempSync(join(tmpdir(), 'mf-h49-approval-'));
    askLog = join(dir, 'ask.log');
    writeFileSync(askLog, '');
    const modern = {
      url: `${base}/mcp`,
      clientFeatures: { elicitation: true },
      approval: { ask: ['twice'], timeoutSeconds: 120 },
    };
    const config = (withLegacy: boolean) => ({
      mcpServers: {
        up: modern,
        // The same server, with a deadline short enough to pass in a test.
        quick: { ...modern, approval: { ask: ['twice'], timeoutSeconds: 1 } },
        ...(withLegacy
          ? {
              held: {
                command: process.execPath,
                args: [ASK_THEN_WAIT],
                env: { ASK_LOG: askLog },
                clientFeatures: { elicitation: true },
                approval: { ask: ['ask_then_wait'] },
              },
            }
          : {}),
      },
      gateway: {
        allowedHosts: [`127.0.0.1:${port}`],
        store: { path: join(dir, 'state.db') },
        cursorSecret: '${H49_SECRET}',
      },
    });
    gw = await startTestGateway(config(true), { env: { H49_SECRET: SECRET } });
    gw2 = await startTestGateway(config(false), { env: { H49_SECRET: SECRET } });
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
    await gw2?.stop();
    if (up) await stopChild(up);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A v2 SDK client that approves, answers every other form, and may rewrite what it sends. */
  async function modernUser(rewrite?: (message: Obj) => Obj | undefined) {
    const sent: Obj[] = [];
    const client = new ModernClient(
      { name: 'v2-h49', version: '1.0.0' },
      { capabilities: FORM, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    client.setRequestHandler('elicitation/create', async (r) => {
      const params = r.params as { message: string; requestedSchema: { properties: Obj } };
      if (params.message.startsWith('Allow the tool'))
        return { action: 'accept', content: { approve: true } };
      const fields = Object.keys(params.requestedSchema.properties);
      return {
        action: 'accept',
        content: Object.fromEntries(fields.map((f) => [f, f === 'colour' ? 'teal' : 'Ada'])),
      };
    });
    const fetching: typeof fetch = (input, init) => {
      if (typeof init?.body === 'string') {
        let message = JSON.parse(init.body) as Obj;
        const changed = rewrite?.(message);
        if (changed) {
          message = changed;
          init = { ...init, body: JSON.stringify(message) };
        }
        sent.push(message);
      }
      return fetch(input, init);
    };
    await client.connect(new ModernTransport(new URL(gw.url), { fetch: fetching }));
    return { client, sent };
  }

  it('49.1: a modern client that approved one set of arguments cannot run another on the upstream’s later round', async () => {
    const mark = (await upstreamCalls()).length;
    let swapped = 0;
    // The client approves {to: alice, amount: 1}; its retry for the upstream's own question (a
    // wrap state) carries {to: mallory, amount: 1000000}.
    const { client } = await modernUser((m) => {
      const params = m.params as Obj | undefined;
      if (m.method !== 'tools/call' || params?.requestState === undefined) return undefined;
      if (unsealed(params.requestState).k !== 'wrap') return undefined;
      swapped++;
      return { ...m, params: { ...params, arguments: MALLORY } };
    });
    try {
      const failure = await client.callTool({ name: 'up__twice', arguments: ALICE }).then(
        (r) => ({ resolved: r }),
        (e: unknown) => e,
      );
      // The upstream ran the approved arguments' first round, and never saw mallory.
      const calls = await upstreamCalls(mark);
      expect(JSON.stringify(calls)).not.toContain('mallory');
      expect(calls).toHaveLength(1);
      expect(calls[0]).toMatchObject({ name: 'twice', arguments: ALICE });
      expect(swapped).toBe(1);
      expect(failure).toMatchObject({ code: -32602 });
      expect(String((failure as Error).message)).toContain('Invalid or expired requestState');
      // The refusal is audited too.
      expect(auditLines('up__twice').at(-1)).toMatchObject({ verdict: 'invalid' });
    } finally {
      await client.close();
    }
  });

  it('49.1: every state minted after an approval binds its digest, who and when; the round that runs is audited with it', async () => {
    const mark = (await upstreamCalls()).length;
    const lines = auditLines('up__twice').length;
    const { client, sent } = await modernUser();
    try {
      const r = await client.callTool({ name: 'up__twice', arguments: ALICE });
      expect(textOf(r)).toBe('Ada likes teal');
      const states = sent
        .filter((m) => m.method === 'tools/call')
        .map((m) => (m.params as Obj).requestState)
        .filter((s) => s !== undefined)
        .map(unsealed);
      // The approval, then the upstream's two rounds: each wrap state carries the approval.
      expect(states.map((s) => s.k)).toEqual(['approve', 'wrap', 'wrap']);
      const digest = states[0]!.d;
      expect(digest).toMatch(/^[0-9a-f]{64}$/);
      for (const s of states.slice(1)) {
        expect(s).toMatchObject({ d: digest, b: 'anonymous' });
        expect(typeof s.t).toBe('number');
      }
      expect((await upstreamCalls(mark)).map((c) => c.arguments)).toEqual([ALICE, ALICE, ALICE]);
      // One line per upstream round, each with the approval; the last is the one that completed.
      const audit = auditLines('up__twice').slice(lines);
      expect(audit).toHaveLength(3);
      for (const line of audit) {
        expect(line).toMatchObject({ verdict: 'allowed', approval: 'accepted', approvedBy: 'anonymous' });
        expect(Date.parse(String(line.approvedAt))).toBe(states[1]!.t);
      }
      expect(audit.map((l) => l.resultType)).toEqual(['input_required', 'input_required', undefined]);
    } finally {
      await client.close();
    }
  });

  it('49.1: a held call (legacy upstream asking mid-call) takes no answer from a retry with other arguments', async () => {
    const name = 'held__ask_then_wait';
    const approve = await call(name, ALICE);
    const question = await call(name, ALICE, { state: approve.body.result?.requestState, responses: ACCEPT });
    expect(question.body.result).toMatchObject({ resultType: 'input_required' });
    const held = question.body.result?.requestState;
    const answer = { r: { action: 'accept', content: { name: 'Mallory' } } };
    // Bounded only so that a gateway that relays the answer (the tool then runs on) fails here
    // instead of hanging.
    const swapped = await call(
      name,
      MALLORY,
      { state: held, responses: answer },
      { signal: AbortSignal.timeout(10_000) },
    ).catch((e: unknown) => ({ body: { error: { code: 0, message: String(e) } } }));
    expect(asked()).not.toContain('answered');
    expect(swapped.body.error?.code).toBe(-32602);
    expect(unsealed(held)).toMatchObject({ k: 'held', d: unsealed(approve.body.result?.requestState).d });
    // The call is still there for the retry it was approved for.
    const ac = new AbortController();
    const honest = call(
      name,
      ALICE,
      { state: held, responses: { r: { action: 'accept', content: { name: 'Ada' } } } },
      { signal: ac.signal },
    ).catch(() => undefined);
    await eventually(() => asked().includes('answered Ada'), 'the approved retry answers the upstream');
    ac.abort();
    await honest;
    expect(asked()).not.toContain('Mallory');
  });

  it('49.7: a round that ends input_required is audited and counted, for a modern client (wrap and held)', async () => {
    const mark = (await upstreamCalls()).length;
    const lines = auditLines('up__nag').length;
    const counted = async () =>
      parsePromText(await (await fetch(new URL('/metrics', gw.url))).text()).sum('manifold_requests_total', {
        tool: 'up__nag',
      });
    const countedBefore = await counted();
    const first = await call('up__nag', {});
    expect(first.body.result).toMatchObject({ resultType: 'input_required' });
    const second = await call(
      'up__nag',
      {},
      {
        state: first.body.result?.requestState,
        responses: { more: { action: 'accept', content: { more: 'yes' } } },
      },
    );
    expect(second.body.result).toMatchObject({ resultType: 'input_required' });
    // A client that never answers again: two upstream rounds, two audit lines.
    expect(await upstreamCalls(mark)).toHaveLength(2);
    const audit = auditLines('up__nag').slice(lines);
    expect(audit).toHaveLength(2);
    for (const line of audit) {
      expect(line).toMatchObject({ verdict: 'allowed', resultType: 'input_required', server: 'up' });
      expect(line.bytesOut).toBeGreaterThan(0);
    }
    // And in the metrics.
    expect((await counted()) - countedBefore).toBe(2);

    // A legacy upstream asking mid-call, held for a modern client: the round that asked is audited.
    const name = 'held__ask_then_wait';
    const heldLines = auditLines(name).length;
    const approve = await call(name, { n: 2 });
    const question = await call(
      name,
      { n: 2 },
      { state: approve.body.result?.requestState, responses: ACCEPT },
    );
    expect(question.body.result).toMatchObject({ resultType: 'input_required' });
    // (The gateway's own question reached no upstream: only the upstream's round is a line.)
    expect(auditLines(name).slice(heldLines)).toEqual([
      expect.objectContaining({ verdict: 'allowed', resultType: 'input_required', approval: 'accepted' }),
    ]);
    // The answer, then the client closes the request: the upstream's call is cancelled, and the
    // end of the call is a line of its own.
    const ac = new AbortController();
    const answered = call(
      name,
      { n: 2 },
      {
        state: question.body.result?.requestState,
        responses: { r: { action: 'accept', content: { name: 'Bea' } } },
      },
      { signal: ac.signal },
    ).catch(() => undefined);
    await eventually(() => asked().includes('answered Bea'), 'the retry answers the upstream');
    ac.abort();
    await answered;
    await eventually(() => auditLines(name).length === heldLines + 2, 'the cancelled call is audited');
    expect(auditLines(name).at(-1)).toMatchObject({ verdict: 'error', approval: 'accepted' });
  });

  it('49.7: a legacy client’s rounds with a modern upstream are each audited', async () => {
    const client = new LegacyClient({ name: 'v1-h49', version: '1.0.0' }, { capabilities: FORM });
    let n = 0;
    client.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { more: `m${++n}` } }));
    await client.connect(new LegacyTransport(new URL(gw.url)));
    try {
      const mark = (await upstreamCalls()).length;
      const lines = auditLines('up__nag').length;
      const r = await client.callTool({ name: 'up__nag', arguments: { rounds: 3 } });
      expect(textOf(r)).toBe('done after 3 rounds');
      expect(await upstreamCalls(mark)).toHaveLength(4);
      const audit = auditLines('up__nag').slice(lines);
      expect(audit.map((l) => [l.verdict, l.resultType])).toEqual([
        ['allowed', 'input_required'],
        ['allowed', 'input_required'],
        ['allowed', 'input_required'],
        ['allowed', undefined],
      ]);
    } finally {
      await client.close();
    }
  });

  it('49.7: a prompts/get round that ends input_required is audited too, for both eras', async () => {
    const lines = () => gw.logs.filter((l) => l.event === 'audit.request' && l.target === 'up__ask');
    const before = lines().length;
    const first = await modernRequest(
      gw.url,
      'prompts/get',
      { name: 'up__ask' },
      { meta: { [META_CAPS]: FORM } },
    );
    expect(first.body.result).toMatchObject({ resultType: 'input_required' });
    const done = await modernRequest(
      gw.url,
      'prompts/get',
      {
        name: 'up__ask',
        requestState: first.body.result?.requestState,
        inputResponses: { topic: { action: 'accept', content: { topic: 'owls' } } },
      },
      { meta: { [META_CAPS]: FORM } },
    );
    expect(JSON.stringify(done.body.result?.messages)).toContain('Tell me about owls.');
    const legacy = new LegacyClient({ name: 'v1-prompt', version: '1.0.0' }, { capabilities: FORM });
    legacy.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { topic: 'bats' } }));
    await legacy.connect(new LegacyTransport(new URL(gw.url)));
    try {
      const r = await legacy.getPrompt({ name: 'up__ask' });
      expect(JSON.stringify(r.messages)).toContain('Tell me about bats.');
    } finally {
      await legacy.close();
    }
    expect(
      lines()
        .slice(before)
        .map((l) => [l.method, l.verdict, l.resultType]),
    ).toEqual([
      ['prompts/get', 'allowed', 'input_required'],
      ['prompts/get', 'allowed', undefined],
      ['prompts/get', 'allowed', 'input_required'],
      ['prompts/get', 'allowed', undefined],
    ]);
  });

  it('49.10: arguments nested too deep are invalid params at the edge, audited, and never asked about or sent', async () => {
    const mark = (await upstreamCalls()).length;
    const deep = nested(600);
    for (const tool of ['up__twice', 'up__nag']) {
      const before = auditLines(tool).length;
      const r = await call(tool, deep);
      expect(r.body.error?.code).toBe(-32602);
      expect(r.body.error?.message).toContain('nested deeper than 64 levels');
      expect(auditLines(tool).slice(before)).toEqual([expect.objectContaining({ verdict: 'invalid' })]);
    }
    // A legacy client gets the same error.
    const legacy = new LegacyClient({ name: 'v1-deep', version: '1.0.0' }, { capabilities: FORM });
    await legacy.connect(new LegacyTransport(new URL(gw.url)));
    try {
      const failure = await legacy.callTool({ name: 'up__twice', arguments: deep }).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(McpError);
      expect(failure).toMatchObject({ code: -32602 });
    } finally {
      await legacy.close();
    }
    // Just within the bound is still a call: asked about, as any other.
    const within = await call('up__twice', nested(62));
    expect(within.body.result).toMatchObject({ resultType: 'input_required' });
    expect(await upstreamCalls(mark)).toHaveLength(0);

    // A refusal after admission (a request state that does not open) writes its line too.
    const before = auditLines('up__nag').length;
    const tampered = await call('up__nag', {}, { state: 'not-a-state', responses: {} });
    expect(tampered.body.error?.code).toBe(-32602);
    expect(auditLines('up__nag').slice(before)).toEqual([expect.objectContaining({ verdict: 'invalid' })]);
  });

  it('49.12: an upstream never asks under the gateway’s own keys, and the answers map back', async () => {
    const first = await call('up__impostor', {});
    const requests = first.body.result?.inputRequests as Obj;
    expect(Object.keys(requests).sort()).toEqual([
      'note',
      'upstream.manifold.approval',
      'upstream.manifold.login',
    ]);
    expect(Object.keys(requests).some((k) => k.startsWith('manifold.'))).toBe(false);
    const form = (value: string, key: string) => ({ action: 'accept', content: { [key]: value } });
    const done = await call(
      'up__impostor',
      {},
      {
        state: first.body.result?.requestState,
        responses: {
          'upstream.manifold.approval': form('yes', 'manifold.approval'),
          'upstream.manifold.login': form('in', 'manifold.login'),
          note: form('hi', 'note'),
          // An answer under the gateway's own key is the gateway's: it never reaches the upstream.
          'manifold.approval': form('spoofed', 'manifold.approval'),
        },
      },
    );
    expect(textOf(done.body.result)).toBe('answered manifold.approval=yes, manifold.login=in, note=hi');

    // SDK clients of both eras answer it as any question.
    const { client } = await modernUser();
    try {
      const r = await client.callTool({ name: 'up__impostor', arguments: {} });
      expect(textOf(r)).toBe('answered manifold.approval=Ada, manifold.login=Ada, note=Ada');
    } finally {
      await client.close();
    }
    const legacy = new LegacyClient({ name: 'v1-impostor', version: '1.0.0' }, { capabilities: FORM });
    legacy.setRequestHandler(ElicitRequestSchema, (r) => {
      const field = Object.keys(
        (r.params as { requestedSchema: { properties: Obj } }).requestedSchema.properties,
      )[0]!;
      return { action: 'accept', content: { [field]: 'v1' } };
    });
    await legacy.connect(new LegacyTransport(new URL(gw.url)));
    try {
      const r = await legacy.callTool({ name: 'up__impostor', arguments: {} });
      expect(textOf(r)).toBe('answered manifold.approval=v1, manifold.login=v1, note=v1');
    } finally {
      await legacy.close();
    }
  });

  it('49.13: a declined or cancelled approval is final: a later yes is refused, on the same instance or another', async () => {
    const mark = (await upstreamCalls()).length;
    const outcomes: Obj[] = [];
    for (const [no, expected] of [
      [{ 'manifold.approval': { action: 'decline' } }, 'declined'],
      [{ 'manifold.approval': { action: 'cancel' } }, 'cancelled'],
      [{ 'manifold.approval': { action: 'accept', content: { approve: false } } }, 'declined'],
    ] as const) {
      for (const [where, yes] of [
        ['same', gw.url],
        ['other', gw2.url],
      ] as const) {
        const first = await call('up__twice', ALICE);
        const state = first.body.result?.requestState;
        const refusal = await call('up__twice', ALICE, { state, responses: no });
        expect((refusal.body.result?._meta as Obj)?.['manifold/approval']).toBe(expected);
        const later = await call('up__twice', ALICE, { state, responses: ACCEPT }, { url: yes });
        outcomes.push({ where, expected, later: (later.body.result?._meta as Obj)?.['manifold/approval'] });
        expect(later.body.result?.isError).toBe(true);
        expect(textOf(later.body.result)).toContain('already used');
      }
    }
    expect(outcomes.every((o) => o.later === 'replayed')).toBe(true);
    expect(await upstreamCalls(mark)).toHaveLength(0);
  });

  it('49.13: an expired approval is final too: after its timeout answer, a yes on another instance is refused', async () => {
    const mark = (await upstreamCalls()).length;
    const first = await call('quick__twice', ALICE);
    const state = first.body.result?.requestState;
    const expiry = Number(unsealed(state).x);
    await eventually(() => Date.now() > expiry, 'the approval state has expired', 5_000);
    const late = await call('quick__twice', ALICE, { state, responses: ACCEPT });
    expect((late.body.result?._meta as Obj)?.['manifold/approval']).toBe('timeout');
    const again = await call('quick__twice', ALICE, { state, responses: ACCEPT }, { url: gw2.url });
    expect((again.body.result?._meta as Obj)?.['manifold/approval']).toBe('replayed');
    expect(await upstreamCalls(mark)).toHaveLength(0);
  });
});
