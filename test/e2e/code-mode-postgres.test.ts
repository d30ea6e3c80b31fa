import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpTap, startReferenceHttp } from '../helpers/clients.js';
import { startTestGateway, type TestGateway } from '../helpers/harness.js';
import { META_CAPS, modernRequest } from '../helpers/modern.js';
import { freshDatabase } from '../helpers/postgres.js';

/**
 * #50, SECURITY H4: a modern client's run that paused for approval on one instance is resumed on
 * another sharing Postgres. The upstream (the reference fixture, over HTTP through a tap) counts
 * every call on the wire: a call the run completed before the question is never sent again, the
 * approved call is sent once, and neither a replayed answer nor another program sends anything.
 */
type Obj = Record<string, unknown>;

describe('code mode across instances on one Postgres (#50)', () => {
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let tap: Awaited<ReturnType<typeof startHttpTap>>;
  const gateways: TestGateway[] = [];
  const env = { MANIFOLD_CURSOR_SECRET: 'one-secret-every-instance-shares-0123456789' };
  const sent = (tool: string) =>
    tap.exchanges.filter((x) => x.body?.method === 'tools/call' && (x.body.params as Obj)?.name === tool)
      .length;
  const CODE = `
    const a = await tools.ref__test_multiple_content_types({});
    const b = await tools.ref__test_simple_text({});
    return [a.content.length, b.content[0].text, Math.random(), Date.now()];
  `;
  const runCode = (url: string, code: string, extra: Obj = {}) =>
    modernRequest(
      url,
      'tools/call',
      { name: 'manifold__run_code', arguments: { code }, ...extra },
      { meta: { [META_CAPS]: { elicitation: { form: {} } } } },
    );
  const YES = { 'manifold.approval': { action: 'accept', content: { approve: true } } };

  beforeAll(async () => {
    ref = await startReferenceHttp();
    tap = await startHttpTap(ref.port);
    const url = await freshDatabase('codemode');
    const raw = {
      mcpServers: {
        ref: {
          url: `http://127.0.0.1:${tap.port}/mcp`,
          approval: { ask: ['test_simple_text'], timeoutSeconds: 60 },
        },
      },
      gateway: {
        allowedHosts: [`127.0.0.1:${tap.port}`],
        store: { postgres: url },
        cursorSecret: '${MANIFOLD_CURSOR_SECRET}',
        catalog: { mode: 'code' },
      },
    };
    gateways.push(await startTestGateway(raw, { env }), await startTestGateway(raw, { env }));
  }, 120_000);

  afterAll(async () => {
    for (const gw of gateways) await gw.stop();
    await tap?.stop();
    await ref?.stop();
  });

  it('H4: a retry on another instance replays the completed calls and sends the approved one once', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const first = await runCode(a.url, CODE);
    const asked = first.body.result as Obj;
    expect(asked.resultType, JSON.stringify(first.body)).toBe('input_required');
    expect(Object.keys(asked.inputRequests as Obj)).toEqual(['manifold.approval']);
    expect(sent('test_multiple_content_types')).toBe(1);
    expect(sent('test_simple_text')).toBe(0);

    const retry = { requestState: asked.requestState, inputResponses: YES };
    const done = await runCode(b.url, CODE, retry);
    const result = done.body.result as { structuredContent: { result: unknown[] }; isError?: boolean };
    expect(result.isError).toBeUndefined();
    expect(result.structuredContent.result.slice(0, 2)).toEqual([
      expect.any(Number),
      'This is a simple text response for testing.',
    ]);
    expect(sent('test_multiple_content_types')).toBe(1);
    expect(sent('test_simple_text')).toBe(1);

    // The same answer again, on the first instance: the approval is spent, nothing is sent.
    const again = await runCode(a.url, CODE, retry);
    const replayed = again.body.result as { isError?: boolean; content: { text: string }[] };
    expect(replayed.isError).toBe(true);
    expect(replayed.content[0]!.text).toMatch(/already used/);
    expect(sent('test_multiple_content_types')).toBe(1);
    expect(sent('test_simple_text')).toBe(1);

    // Audit: both instances wrote the run's calls under one run id, via code.
    const inner = gateways
      .flatMap((g) => g.logs)
      .filter((l) => l.event === 'audit.tools_call' && l.via === 'code');
    expect(new Set(inner.map((l) => l.run)).size).toBe(1);
  });

  it('H4: a retry with another program sends nothing and is refused', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const before = { m: sent('test_multiple_content_types'), s: sent('test_simple_text') };
    const first = await runCode(a.url, CODE);
    const state = (first.body.result as Obj).requestState;
    expect(sent('test_multiple_content_types')).toBe(before.m + 1);
    const other = await runCode(b.url, `await tools.ref__test_simple_text({}); ${CODE}`, {
      requestState: state,
      inputResponses: YES,
    });
    expect(other.body.error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(/another program/),
    });
    expect(sent('test_multiple_content_types')).toBe(before.m + 1);
    expect(sent('test_simple_text')).toBe(before.s);
  });

  it('the program sees the same clock and random numbers on the replay', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const code = `const r = Math.random(); const t = Date.now(); await tools.ref__test_simple_text({}); return [r, t];`;
    const first = await runCode(a.url, code);
    const asked = first.body.result as Obj;
    const done = await runCode(b.url, code, { requestState: asked.requestState, inputResponses: YES });
    const [r, t] = (done.body.result as { structuredContent: { result: number[] } }).structuredContent.result;
    expect(typeof r).toBe('number');
    expect(t).toBeLessThanOrEqual(Date.now());
    // A second run of the same program is a new run: its own seed.
    const fresh = await runCode(a.url, code);
    const freshAsked = fresh.body.result as Obj;
    const freshDone = await runCode(a.url, code, {
      requestState: freshAsked.requestState,
      inputResponses: YES,
    });
    expect(
      (freshDone.body.result as { structuredContent: { result: number[] } }).structuredContent.result[0],
    ).not.toBe(r);
  });
});
