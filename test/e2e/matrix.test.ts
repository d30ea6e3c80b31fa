import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baselineFrom } from '../../src/guards/drift/verdict.js';
import { encodeHeaderValue } from '../../src/protocol/headers.js';
import { identityOf } from '../../src/store/state.js';
import {
  type AnyHandle,
  connectLegacy,
  connectModern,
  DRIFT,
  type LegacyHandle,
  type ModernHandle,
  REFERENCE,
  startHttpTap,
  startReferenceHttp,
  type TapExchange,
  type TapLine,
  tapStdio,
} from '../helpers/clients.js';
import { memoryStdio, stdioServer, testIssuer } from '../helpers/factories.js';
import {
  EVERYTHING,
  eventually,
  type Spawned,
  startEverythingHttp,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';
import { MODERN, modernRequest, parseSse } from '../helpers/modern.js';

// The era matrix: {legacy v1 client, modern v2 client} x {legacy upstream over stdio, legacy
// upstream over streamable HTTP, modern upstream over streamable HTTP, modern upstream over stdio},
// plus server-memory, all behind one gateway (JWT auth, small pages, small result caps).

const ISS = 'https://issuer.example';
const AUD = 'manifold-matrix';
const CAP = 600;
const SUB = 'io.modelcontextprotocol/subscriptionId';

type Result = Record<string, unknown> & {
  content?: unknown;
  isError?: boolean;
  _meta?: Record<string, unknown>;
};
type Progress = { progress: number; total?: number; message?: string };

/** What a test can learn about the traffic an upstream really got (through its tap). */
interface UpstreamView {
  /** A position in the traffic; later queries look only past it. */
  mark(): number;
  /** The id of the tools/call for `tool` (upstream name) sent after `mark`. */
  callId(mark: number, tool: string): string | number | undefined;
  /** The upstream was told the call is cancelled: notifications/cancelled, or its stream closed. */
  cancelled(id: string | number): boolean;
  /** The upstream answered the call (result or error). */
  answered(id: string | number): boolean;
  /** Request headers of the tools/call, for HTTP upstreams. */
  headersOf?(id: string | number): Record<string, unknown> | undefined;
  /** The params of the tools/call as the upstream received them. */
  paramsOf(id: string | number): Record<string, unknown> | undefined;
  /** The gateway's subscriptions/listen to this (modern) upstream was acknowledged and is open. */
  listening(): boolean;
  /** How many notifications/tools/list_changed the upstream sent the gateway so far. */
  listChangedSent(): number;
  /** The tool names of the last tools/list answer the upstream sent the gateway. */
  lastListing(): string[] | undefined;
}

/** Tool names of the last answer among `answers`; listings here are one page. */
function lastTools(answers: Record<string, unknown>[]): string[] | undefined {
  const last = answers.at(-1)?.result as { tools?: { name: string }[]; nextCursor?: unknown } | undefined;
  if (!last?.tools) return undefined;
  if (last.nextCursor !== undefined) throw new Error('the upstream paged its listing: read every page');
  return last.tools.map((t) => t.name);
}

function stdioView(lines: () => TapLine[]): UpstreamView {
  return {
    mark: () => lines().length,
    callId(mark, tool) {
      const call = lines()
        .slice(mark)
        .find(
          (l) =>
            l.dir === 'in' &&
            l.msg.method === 'tools/call' &&
            (l.msg.params as { name?: unknown } | undefined)?.name === tool,
        );
      return call?.msg.id as string | number | undefined;
    },
    cancelled: (id) =>
      lines().some(
        (l) =>
          l.dir === 'in' &&
          l.msg.method === 'notifications/cancelled' &&
          (l.msg.params as { requestId?: unknown } | undefined)?.requestId === id,
      ),
    answered: (id) =>
      lines().some((l) => l.dir === 'out' && l.msg.id === id && ('result' in l.msg || 'error' in l.msg)),
    paramsOf: (id) =>
      lines().find((l) => l.dir === 'in' && l.msg.method === 'tools/call' && l.msg.id === id)?.msg.params as
        | Record<string, unknown>
        | undefined,
    listening() {
      const all = lines();
      const listen = all.find((l) => l.dir === 'in' && l.msg.method === 'subscriptions/listen');
      if (!listen) return false;
      const id = listen.msg.id;
      const ack = all.some(
        (l) =>
          l.dir === 'out' &&
          l.msg.method === 'notifications/subscriptions/acknowledged' &&
          (l.msg.params as { _meta?: Record<string, unknown> } | undefined)?._meta?.[SUB] === id,
      );
      const ended = all.some((l) => l.dir === 'out' && l.msg.id === id);
      return ack && !ended;
    },
    listChangedSent: () =>
      lines().filter((l) => l.dir === 'out' && l.msg.method === 'notifications/tools/list_changed').length,
    lastListing() {
      const all = lines();
      const ids = new Set(
        all.filter((l) => l.dir === 'in' && l.msg.method === 'tools/list').map((l) => l.msg.id),
      );
      return lastTools(all.filter((l) => l.dir === 'out' && ids.has(l.msg.id)).map((l) => l.msg));
    },
  };
}

function messagesOf(ex: TapExchange): Record<string, unknown>[] {
  const text = ex.response.trim();
  if (!text) return [];
  if (text.startsWith('{')) {
    try {
      return [JSON.parse(text) as Record<string, unknown>];
    } catch {
      return [];
    }
  }
  // A stream cut mid-event leaves a partial last event: parse only complete ones.
  const complete = ex.ended ? ex.response : ex.response.slice(0, ex.response.lastIndexOf('\n\n') + 2);
  try {
    return parseSse(complete);
  } catch {
    return [];
  }
}

/**
 * An HTTP upstream: legacy ones are told by notifications/cancelled (2025-11-25), modern ones by
 * the closing of the request's stream (2026-07-28 patterns/cancellation).
 */
function httpView(exchanges: TapExchange[], era: 'legacy' | 'modern'): UpstreamView {
  const callOf = (id: string | number) =>
    exchanges.find((e) => e.body?.method === 'tools/call' && e.body.id === id);
  return {
    mark: () => exchanges.length,
    callId(mark, tool) {
      const call = exchanges
        .slice(mark)
        .find(
          (e) =>
            e.body?.method === 'tools/call' &&
            (e.body.params as { name?: unknown } | undefined)?.name === tool,
        );
      return call?.body?.id as string | number | undefined;
    },
    cancelled(id) {
      if (era === 'modern') return callOf(id)?.closedEarly === true;
      return exchanges.some(
        (e) =>
          e.body?.method === 'notifications/cancelled' &&
          (e.body.params as { requestId?: unknown } | undefined)?.requestId === id,
      );
    },
    answered(id) {
      return exchanges.some((e) => messagesOf(e).some((m) => m.id === id && ('result' in m || 'error' in m)));
    },
    headersOf: (id) => callOf(id)?.headers as Record<string, unknown> | undefined,
    paramsOf: (id) => callOf(id)?.body?.params as Record<string, unknown> | undefined,
    listening: () =>
      exchanges.some(
        (e) =>
          e.body?.method === 'subscriptions/listen' &&
          !e.ended &&
          !e.closedEarly &&
          messagesOf(e).some((m) => m.method === 'notifications/subscriptions/acknowledged'),
      ),
    listChangedSent: () =>
      exchanges
        .filter((e) => e.body?.method === 'subscriptions/listen')
        .flatMap(messagesOf)
        .filter((m) => m.method === 'notifications/tools/list_changed').length,
    lastListing: () =>
      lastTools(
        exchanges
          .filter((e) => e.body?.method === 'tools/list' && e.ended)
          .flatMap((e) => messagesOf(e).filter((m) => m.id === e.body?.id && 'result' in m)),
      ),
  };
}

/** One upstream column of the matrix. */
interface Column {
  label: string;
  /** Gateway server name (= prefix). */
  server: string;
  era: 'legacy' | 'modern';
  protocolVersion: string;
  known: string[];
  simple: { tool: string; args: Record<string, unknown>; text: string };
  /** The progress notifications expected, as `progress/total message`. */
  progress: { tool: string; args: Record<string, unknown>; expected: string[] };
  slow: { tool: string; args: Record<string, unknown> };
  /** Calls of tools of this server that the tenant token does not grant. */
  denied: { tool: string; args: Record<string, unknown> }[];
  big: { tool: string; args: Record<string, unknown> };
  /** Where a visible catalog change is made for this kind of upstream. */
  change: { server: string; tool: string; label: string };
  view: () => UpstreamView;
}

const textOf = (r: Result): string =>
  ((r.content ?? []) as { type: string; text?: string }[])
    .filter((c) => c.type === 'text')
    .map((c) => c.text ?? '')
    .join('\n');

const failureOf = (p: Promise<unknown>): Promise<string> =>
  p.then(
    (r) => `resolved: ${JSON.stringify(r).slice(0, 300)}`,
    (e: unknown) => String((e as Error)?.message ?? e),
  );

async function callTool(
  h: AnyHandle,
  name: string,
  args: Record<string, unknown>,
  options: { signal?: AbortSignal; onprogress?: (p: Progress) => void } = {},
): Promise<Result> {
  const opts = { timeout: 20_000, ...options };
  if (h.era === 'legacy') {
    return (await h.client.callTool({ name, arguments: args }, CallToolResultSchema, opts)) as Result;
  }
  return (await h.client.callTool({ name, arguments: args }, opts)) as unknown as Result;
}

/** Every page, cursor by cursor, as the client's own API exposes pages. */
async function listPages(h: AnyHandle): Promise<{ names: string[]; pages: number }> {
  const names: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    pages++;
    if (pages > 100) throw new Error('the listing never ends');
    let page: { tools: { name: string }[]; nextCursor?: string };
    if (h.era === 'legacy') page = await h.client.listTools(cursor ? { cursor } : {});
    else if (cursor) page = await h.client.listTools({ cursor });
    // The v2 client aggregates when no cursor is given: the first page is asked for directly.
    else page = await h.client.request({ method: 'tools/list', params: {} });
    names.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
    if (!cursor) return { names, pages };
  }
}

/** What a client sees now: the legacy client pages; the v2 client uses its own aggregate. */
async function visibleNames(h: AnyHandle): Promise<string[]> {
  if (h.era === 'legacy') return (await listPages(h)).names;
  return (await h.client.listTools()).tools.map((t) => t.name);
}

describe('era matrix: legacy and modern clients x legacy and modern upstreams, over stdio and HTTP', () => {
  let gw: TestGateway;
  let everythingHttp: Spawned;
  let refHttp: Awaited<ReturnType<typeof startReferenceHttp>>;
  let refLegacyHttp: Awaited<ReturnType<typeof startReferenceHttp>>;
  const stops: (() => Promise<void>)[] = [];
  let views: Record<string, UpstreamView> = {};
  let httpExchanges: TapExchange[][] = [];
  let legacy: LegacyHandle;
  let modern: ModernHandle;
  const tenant: Partial<Record<'legacy' | 'modern', AnyHandle>> = {};
  let tenantToken = '';
  let toolsFile = '';
  const driftTool = (name: string) => ({
    name,
    description: `Drift tool ${name}.`,
    inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
  });
  const writeDriftTools = (names: string[]) => writeFileSync(toolsFile, JSON.stringify(names.map(driftTool)));

  /** server-everything, the same over stdio and HTTP; its catalog never changes, so `change` is another server. */
  const everythingColumn = (label: string, server: 'ev' | 'eh', change: Column['change']): Column => ({
    label,
    server,
    era: 'legacy',
    protocolVersion: '2025-11-25',
    known: ['echo', 'get-sum', 'trigger-long-running-operation'],
    simple: { tool: 'echo', args: { message: 'hello matrix' }, text: 'Echo: hello matrix' },
    progress: {
      tool: 'trigger-long-running-operation',
      args: { duration: 0.3, steps: 3 },
      expected: ['1/3', '2/3', '3/3'],
    },
    slow: { tool: 'trigger-long-running-operation', args: { duration: 120, steps: 1 } },
    denied: [{ tool: 'get-sum', args: { a: 1, b: 2 } }],
    big: { tool: 'echo', args: { message: 'x'.repeat(5000) } },
    change,
    view: () => views[server]!,
  });
  /** The reference fixture speaks the same tools over HTTP and stdio: one column shape for both. */
  const referenceColumn = (label: string, server: 'rh' | 'rs') => ({
    label,
    server,
    era: 'modern' as const,
    protocolVersion: MODERN,
    known: ['test_simple_text', 'test_tool_with_progress', 'test_custom_header', 'slow_compute'],
    simple: {
      tool: 'test_simple_text',
      args: {},
      text: 'This is a simple text response for testing.',
    },
    progress: {
      tool: 'test_tool_with_progress',
      args: {},
      expected: ['0/100 step 0', '50/100 step 50', '100/100 step 100'],
    },
    slow: { tool: 'slow_compute', args: { seconds: 120, label: 'never' } },
    denied: [
      { tool: 'test_tool_with_progress', args: {} },
      // A tool whose schema mirrors an argument into Mcp-Param-Region.
      { tool: 'test_custom_header', args: { region: 'eu-west-1', query: 'q' } },
    ],
    big: { tool: 'greet', args: { name: 'y'.repeat(5000) } },
    change: { server, tool: 'test_dynamic_tool', label: 'test_trigger_tool_change' },
    view: () => views[server]!,
  });
  const columns: Column[] = [
    everythingColumn('legacy stdio', 'ev', { server: 'ds', tool: 'beta', label: 'drift-server over stdio' }),
    everythingColumn('legacy HTTP', 'eh', {
      server: 'rl',
      tool: 'test_dynamic_tool',
      label: 'reference fixture pinned to 2025-11-25',
    }),
    referenceColumn('modern HTTP', 'rh'),
    referenceColumn('modern stdio', 'rs'),
  ];
  const kinds = ['legacy', 'modern'] as const;
  const handle = (kind: 'legacy' | 'modern'): AnyHandle => (kind === 'legacy' ? legacy : modern);

  beforeAll(async () => {
    const issuer = await testIssuer(ISS, AUD);
    const mint = (sub: string, scope: string) => issuer.mint({ scope }, sub);

    const dir = mkdtempSync(join(tmpdir(), 'manifold-matrix-'));
    toolsFile = join(dir, 'tools.json');
    writeDriftTools(['alpha', 'beta']);

    [everythingHttp, refHttp, refLegacyHttp] = await Promise.all([
      startEverythingHttp('streamableHttp'),
      startReferenceHttp(),
      startReferenceHttp(),
    ]);
    stops.push(everythingHttp.stop, refHttp.stop, refLegacyHttp.stop);
    // test_dynamic_tool starts unlisted; toggling it on before the gateway's first listing makes
    // it part of the trusted baseline, so that each later toggle is a change clients can see.
    for (const url of [refHttp.url, refLegacyHttp.url]) {
      const r = await modernRequest(url, 'tools/call', { name: 'test_trigger_tool_change', arguments: {} });
      expect(JSON.stringify(r.body.result)).toContain('now listed');
    }
    const [ehTap, rhTap] = await Promise.all([startHttpTap(everythingHttp.port), startHttpTap(refHttp.port)]);
    stops.push(ehTap.stop, rhTap.stop);
    const evTap = tapStdio('ev', process.execPath, [EVERYTHING, 'stdio']);
    const rsTap = tapStdio('rs', process.execPath, [REFERENCE, 'stdio']);
    httpExchanges = [ehTap.exchanges, rhTap.exchanges];
    views = {
      ev: stdioView(evTap.lines),
      eh: httpView(ehTap.exchanges, 'legacy'),
      rh: httpView(rhTap.exchanges, 'modern'),
      rs: stdioView(rsTap.lines),
    };

    gw = await startTestGateway({
      mcpServers: {
        ev: { command: evTap.command, args: evTap.args, maxResultBytes: CAP },
        eh: { url: `http://127.0.0.1:${ehTap.port}/mcp`, maxResultBytes: CAP },
        rh: { url: `http://127.0.0.1:${rhTap.port}/mcp`, maxResultBytes: CAP },
        rs: { command: rsTap.command, args: rsTap.args, maxResultBytes: CAP },
        mem: memoryStdio({ env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') } }),
        ds: stdioServer(DRIFT, [], { env: { DRIFT_TOOLS_FILE: toolsFile } }),
        rl: {
          url: refLegacyHttp.url,
          protocol: '2025-11-25',
          tools: { allow: ['test_simple_text', 'test_trigger_tool_change', 'test_dynamic_tool'] },
        },
      },
      gateway: {
        pageSize: 10,
        allowedHosts: [ehTap.port, rhTap.port, refLegacyHttp.port].map((p) => `127.0.0.1:${p}`),
        auth: issuer.auth,
      },
    });
    const everyone = await mint('matrix-user', 'tools:*');
    tenantToken = await mint(
      'matrix-tenant',
      `${columns.map((c) => `tools:${c.server}__${c.simple.tool}`).join(' ')} tools:mem__read_graph tools:ds__*`,
    );
    [legacy, modern] = await Promise.all([
      connectLegacy(gw.url, everyone),
      connectModern(gw.url, everyone, { listen: true }),
    ]);
  });

  afterAll(async () => {
    for (const h of [legacy, modern, tenant.legacy, tenant.modern]) await h?.close().catch(() => {});
    await gw?.stop();
    for (const stop of stops) await stop().catch(() => {});
  });

  it('setup: every upstream is ready in the era it speaks, and each client speaks its own era', async () => {
    const health = Object.fromEntries(gw.gateway.health().upstreams.map((u) => [u.name, u]));
    for (const c of columns) {
      expect(health[c.server], c.label).toMatchObject({
        state: 'ready',
        era: c.era,
        protocolVersion: c.protocolVersion,
      });
    }
    expect(health.mem).toMatchObject({ state: 'ready', era: 'legacy' });
    expect(health.ds).toMatchObject({ state: 'ready', era: 'legacy' });
    expect(health.rl).toMatchObject({ state: 'ready', era: 'legacy', protocolVersion: '2025-11-25' });

    // Legacy client: a session from initialize, and the GET stream for server notifications.
    expect(legacy.transport.sessionId).toMatch(/.+/);
    expect(legacy.wire[0]?.body?.method).toBe('initialize');
    await eventually(
      () => legacy.wire.some((w) => w.method === 'GET' && w.status === 200),
      'the legacy client has its GET stream open',
    );

    // Modern client: server/discover, never initialize, never a session.
    expect(modern.client.getProtocolEra()).toBe('modern');
    expect(modern.client.getNegotiatedProtocolVersion()).toBe(MODERN);
    expect(modern.wire[0]?.body?.method).toBe('server/discover');
    expect(modern.wire.some((w) => w.body?.method === 'initialize')).toBe(false);
    for (const w of modern.wire) {
      expect(w.headers['mcp-session-id']).toBeUndefined();
      expect(w.responseHeaders?.['mcp-session-id']).toBeUndefined();
    }
    expect(modern.subscription?.honoredFilter).toEqual({ toolsListChanged: true });
    const listen = modern.wire.find((w) => w.body?.method === 'subscriptions/listen');
    expect(listen?.status).toBe(200);
    expect(listen?.responseHeaders?.['content-type']).toContain('text/event-stream');
  });

  for (const col of columns.filter((c) => c.era === 'modern')) {
    it(`setup: the gateway listens for list_changed on the ${col.label} upstream (subscriptions/listen, acknowledged)`, async () => {
      await eventually(
        () => col.view().listening(),
        `an acknowledged subscriptions/listen from the gateway to ${col.server} that stays open`,
        5000,
      );
    });
  }

  describe('1. list', () => {
    for (const kind of kinds) {
      for (const col of columns) {
        it(`${kind} client × ${col.label} upstream: list`, async () => {
          const h = handle(kind);
          const { names, pages } = await listPages(h);
          // pageSize 10: the listing takes many pages, each reached through the previous cursor.
          expect(pages).toBeGreaterThan(5);
          expect(new Set(names).size).toBe(names.length);
          const mine = names.filter((n) => n.startsWith(`${col.server}__`));
          for (const t of col.known) expect(mine).toContain(`${col.server}__${t}`);
          // Every tool the upstream listed to the gateway (as seen on the wire), no more and no
          // fewer, under its prefix.
          const upstream = col.view().lastListing();
          expect(upstream?.length).toBeGreaterThan(col.known.length);
          expect([...mine].sort()).toEqual(upstream!.map((t) => `${col.server}__${t}`).sort());
          if (h.era === 'modern') {
            // The v2 client's own aggregate walk agrees with the page-by-page walk.
            const all = (await h.client.listTools(undefined, { cacheMode: 'bypass' })).tools.map(
              (t) => t.name,
            );
            expect(all).toEqual(names);
            const sent = h.wire.filter((w) => w.body?.method === 'tools/list');
            expect(
              sent.some((w) => typeof (w.body?.params as { cursor?: unknown })?.cursor === 'string'),
            ).toBe(true);
          }
        });
      }
      it(`${kind} client × server-memory (legacy stdio): list`, async () => {
        const { names } = await listPages(handle(kind));
        expect(names).toContain('mem__create_entities');
        expect(names).toContain('mem__read_graph');
      });
    }
  });

  describe('2. call', () => {
    for (const kind of kinds) {
      for (const col of columns) {
        it(`${kind} client × ${col.label} upstream: call`, async () => {
          const view = col.view();
          const mark = view.mark();
          const r = await callTool(handle(kind), `${col.server}__${col.simple.tool}`, col.simple.args);
          expect(r.isError).toBeFalsy();
          expect(textOf(r)).toBe(col.simple.text);
          // Upstream, the gateway spoke the upstream's era, whatever the client's.
          const id = view.callId(mark, col.simple.tool);
          expect(id, 'the call as the upstream received it').toBeDefined();
          const meta = (view.paramsOf(id!)?._meta ?? {}) as Record<string, unknown>;
          const headers = view.headersOf?.(id!);
          if (col.era === 'modern') {
            expect(meta['io.modelcontextprotocol/protocolVersion']).toBe(MODERN);
            expect(meta['io.modelcontextprotocol/clientInfo']).toMatchObject({ name: 'manifold' });
            if (headers) {
              expect(headers).toMatchObject({
                'mcp-protocol-version': MODERN,
                'mcp-method': 'tools/call',
                'mcp-name': col.simple.tool,
              });
              expect(headers['mcp-session-id']).toBeUndefined();
            }
          } else {
            expect(meta['io.modelcontextprotocol/protocolVersion']).toBeUndefined();
            if (headers) {
              expect(headers['mcp-protocol-version']).toBe('2025-11-25');
              expect(headers['mcp-session-id']).toMatch(/.+/);
            }
          }
          // Dressed for the client's era, never carrying the upstream's own identity.
          expect(JSON.stringify(r)).not.toContain('manifold-reference-server');
          if (kind === 'legacy') expect(r).not.toHaveProperty('resultType');
        });
      }
      it(`${kind} client × server-memory (legacy stdio): call`, async () => {
        const h = handle(kind);
        const entity = `matrix-${kind}`;
        const created = await callTool(h, 'mem__create_entities', {
          entities: [{ name: entity, entityType: 'test', observations: [`seen by the ${kind} client`] }],
        });
        expect(created.isError).toBeFalsy();
        const graph = await callTool(h, 'mem__read_graph', {});
        expect(JSON.stringify(graph.content)).toContain(`seen by the ${kind} client`);
      });
    }
  });

  describe('3. progress', () => {
    for (const kind of kinds) {
      for (const col of columns) {
        it(`${kind} client × ${col.label} upstream: progress`, async () => {
          const events: string[] = [];
          const r = await callTool(handle(kind), `${col.server}__${col.progress.tool}`, col.progress.args, {
            onprogress: (p) =>
              events.push(
                `progress ${p.progress}/${p.total}${p.message === undefined ? '' : ` ${p.message}`}`,
              ),
          });
          events.push('result');
          expect(r.isError).toBeFalsy();
          expect(events).toEqual([...col.progress.expected.map((p) => `progress ${p}`), 'result']);
        });
      }
    }
  });

  describe('4. cancellation', () => {
    for (const kind of kinds) {
      for (const col of columns) {
        for (const streamed of [false, true]) {
          // Without a progress token the answer is one JSON body; with one it is an SSE stream.
          const variant = streamed ? ' (streamed answer, with a progress token)' : '';
          it(`${kind} client × ${col.label} upstream: cancellation${variant}`, async () => {
            const h = handle(kind);
            const view = col.view();
            const exposed = `${col.server}__${col.slow.tool}`;
            const audits = (verdict: string) =>
              gw.logs.filter(
                (l) => l.event === 'audit.tools_call' && l.tool === exposed && l.verdict === verdict,
              ).length;
            const errorsBefore = audits('error');
            const allowedBefore = audits('allowed');
            const mark = view.mark();
            const ac = new AbortController();
            const outcome = failureOf(
              callTool(h, exposed, col.slow.args, {
                signal: ac.signal,
                ...(streamed ? { onprogress: () => {} } : {}),
              }),
            );
            let id: string | number | undefined;
            await eventually(() => {
              id = view.callId(mark, col.slow.tool);
              return id !== undefined;
            }, 'the call reached the upstream');
            ac.abort(new Error('the user gave up'));
            expect(await outcome).not.toMatch(/^resolved/);
            await eventually(() => view.cancelled(id!), `the upstream was told that call ${id} is cancelled`);
            await eventually(() => audits('error') === errorsBefore + 1, 'the audit line with verdict error');
            // The upstream never answered (its work takes two minutes) and nothing was relayed.
            expect(view.answered(id!)).toBe(false);
            expect(audits('allowed')).toBe(allowedBefore);
          });
        }
      }
    }
  });

  describe('5. list_changed after a verified change', () => {
    const dynamic = (server: string) => `${server}__test_dynamic_tool`;

    it('modern stdio upstream: a tool that appears is withheld until re-trusted, and the re-trust is announced', async () => {
      const before = { legacy: legacy.listChanged.count, modern: modern.listChanged.count };
      const r = await callTool(legacy, 'rs__test_trigger_tool_change', {});
      expect(textOf(r)).toContain('now listed');
      await eventually(
        () =>
          gw.logs.some(
            (l) => l.event === 'drift.withheld' && l.server === 'rs' && l.tool === 'test_dynamic_tool',
          ),
        'the new tool was seen and withheld',
      );
      expect(await visibleNames(legacy)).not.toContain(dynamic('rs'));
      expect(await visibleNames(modern)).not.toContain(dynamic('rs'));
      // What `manifold retrust rs` does: a new baseline from what the server lists now.
      const upstream = gw.gateway.pool.get('rs')!;
      expect(upstream.tools.map((t) => t.name)).toContain('test_dynamic_tool');
      await gw.gateway.store.retrust(
        identityOf(upstream.config),
        await baselineFrom(upstream.tools),
        Date.now(),
      );
      await gw.gateway.pollTrust();
      await eventually(
        () => legacy.listChanged.count > before.legacy && modern.listChanged.count > before.modern,
        'both clients told about the re-trusted tool',
      );
      // Told once: the withheld appearance changed nothing they could see, so it was not
      // announced (it would have come first, on the same stream).
      expect(legacy.listChanged.count).toBe(before.legacy + 1);
      expect(modern.listChanged.count).toBe(before.modern + 1);
      expect(await visibleNames(legacy)).toContain(dynamic('rs'));
      expect(await visibleNames(modern)).toContain(dynamic('rs'));
    });

    // Column by column, the modern HTTP upstream last: a late notification from one column's
    // change must not land in another column's count.
    for (const col of [columns[0]!, columns[1]!, columns[3]!, columns[2]!]) {
      for (const kind of kinds) {
        const { server, tool } = col.change;
        const exposed = `${server}__${tool}`;
        it(`${kind} client × ${col.label} upstream (${col.change.label}): list_changed`, async () => {
          const h = handle(kind);
          const other = kind === 'legacy' ? modern : legacy;
          const present = (await visibleNames(h)).includes(exposed);
          const before = { mine: h.listChanged.count, other: other.listChanged.count };
          // For the reference fixture the test can also see the upstream's own announcement.
          const upstream = server === col.server ? col.view() : undefined;
          const announcedBefore = upstream?.listChangedSent() ?? 0;
          if (server === 'ds') {
            writeDriftTools(present ? ['alpha'] : ['alpha', 'beta']);
          } else {
            const r = await callTool(h, `${server}__test_trigger_tool_change`, {});
            expect(textOf(r), 'before the change, the gateway showed what the upstream lists').toContain(
              present ? 'now unlisted' : 'now listed',
            );
          }
          if (upstream) {
            // The change reaches the gateway as the upstream's notifications/tools/list_changed on
            // the gateway's subscriptions/listen stream (not only through some later re-list).
            await eventually(
              () => upstream.listChangedSent() > announcedBefore,
              `${server} announced the change on the gateway's subscriptions/listen stream`,
              5000,
            );
          }
          await eventually(
            () => h.listChanged.count > before.mine,
            `notifications/tools/list_changed on the ${kind} client's ${kind === 'legacy' ? 'GET' : 'subscriptions/listen'} stream`,
          );
          // Announced after verification: a listing made now already shows the change. (A
          // removed tool is gone; a trusted tool coming back is trusted again.)
          expect((await visibleNames(h)).includes(exposed)).toBe(!present);
          // Let the other client's copy of this notification arrive before the next test counts.
          await eventually(() => other.listChanged.count > before.other, 'the other client was told too');
        });
      }
    }
  });

  describe('6. JWT-scoped tenant', () => {
    beforeAll(async () => {
      [tenant.legacy, tenant.modern] = await Promise.all([
        connectLegacy(gw.url, tenantToken, 'matrix-tenant-legacy'),
        connectModern(gw.url, tenantToken, { name: 'matrix-tenant-modern', listen: true }),
      ]);
    });

    for (const kind of kinds) {
      for (const col of columns) {
        it(`${kind} client × ${col.label} upstream: JWT-scoped tenant`, async () => {
          const h = tenant[kind]!;
          const granted = `${col.server}__${col.simple.tool}`;
          const { names } = await listPages(h);
          expect(names.filter((n) => n.startsWith(`${col.server}__`))).toEqual([granted]);
          const ok = await callTool(h, granted, col.simple.args);
          expect(textOf(ok)).toBe(col.simple.text);
          const unknownName = `${col.server}__no_such_tool`;
          for (const denied of col.denied) {
            // Same arguments to a tool that does not exist: the two must be indistinguishable.
            const hiddenName = `${col.server}__${denied.tool}`;
            const hidden = await failureOf(callTool(h, hiddenName, denied.args));
            const unknown = await failureOf(callTool(h, unknownName, denied.args));
            expect(hidden).toContain(`Unknown tool: ${hiddenName}`);
            expect(hidden.replace(hiddenName, 'X')).toBe(unknown.replace(unknownName, 'X'));
            // And the refusal is audited as one.
            expect(
              gw.logs.some(
                (l) =>
                  l.event === 'audit.tools_call' &&
                  l.tool === hiddenName &&
                  l.subject === 'matrix-tenant' &&
                  l.verdict === 'denied',
              ),
            ).toBe(true);
          }
        });
      }
    }
  });

  describe('6b. list_changed follows what a tenant can see', () => {
    for (const kind of kinds) {
      it(`${kind} client (JWT-scoped tenant): told about a change it can see, not about one it cannot`, async () => {
        const h = tenant[kind]!;
        const before = {
          tenant: h.listChanged.count,
          legacy: legacy.listChanged.count,
          modern: modern.listChanged.count,
        };
        // A change outside the tenant's grants (rs__test_dynamic_tool), announced to the others ...
        await callTool(legacy, 'rs__test_trigger_tool_change', {});
        await eventually(
          () => legacy.listChanged.count > before.legacy && modern.listChanged.count > before.modern,
          'the unrestricted clients were told about rs',
        );
        // ... then one inside them (ds__beta). Both would travel on the same stream, in order.
        const present = (await listPages(h)).names.includes('ds__beta');
        writeDriftTools(present ? ['alpha'] : ['alpha', 'beta']);
        await eventually(() => h.listChanged.count > before.tenant, 'the tenant was told about ds');
        expect(h.listChanged.count).toBe(before.tenant + 1);
        expect((await listPages(h)).names.includes('ds__beta')).toBe(!present);
        await eventually(
          () => legacy.listChanged.count > before.legacy + 1 && modern.listChanged.count > before.modern + 1,
          'the unrestricted clients were told about ds too',
        );
      });
    }
  });

  it('no HTTP upstream ever received a client’s bearer token or a client session id', () => {
    const tokenLike = /^Bearer /i;
    const exchanges = httpExchanges.flat();
    expect(exchanges.filter((e) => e.body?.method === 'tools/call').length).toBeGreaterThan(20);
    for (const e of exchanges) {
      expect(String(e.headers.authorization ?? '')).not.toMatch(tokenLike);
      const sid = e.headers['mcp-session-id'];
      if (sid !== undefined) expect(sid).not.toBe(legacy.transport.sessionId);
    }
  });

  describe('7. oversized result', () => {
    for (const kind of kinds) {
      for (const col of columns) {
        it(`${kind} client × ${col.label} upstream: oversized result`, async () => {
          const r = await callTool(handle(kind), `${col.server}__${col.big.tool}`, col.big.args);
          const text = textOf(r);
          expect(text).toMatch(/\[… truncated: \d+ of \d+ bytes\]$/);
          expect(Buffer.byteLength(JSON.stringify(r.content))).toBeLessThan(CAP);
          expect(r._meta?.['manifold/truncated']).toBe(true);
        });
      }
    }
  });

  describe('8. Mcp-Param mirroring (x-mcp-header)', () => {
    for (const kind of kinds) {
      for (const col of columns.filter((c) => c.era === 'modern')) {
        it(`${kind} client × ${col.label} upstream: test_custom_header`, async () => {
          const h = handle(kind);
          // The v2 client mirrors arguments from its cached listing, as a real client would.
          if (h.era === 'modern') await h.client.listTools();
          const view = col.view();
          for (const region of ['eu-west-1', 'São Paulo']) {
            const mark = view.mark();
            const r = await callTool(h, `${col.server}__test_custom_header`, { region, query: 'q' });
            expect(r.isError, textOf(r)).toBeFalsy();
            expect(textOf(r)).toBe(`region=${region} query=q`);
            const id = view.callId(mark, 'test_custom_header');
            expect(id).toBeDefined();
            if (view.headersOf)
              expect(view.headersOf(id!)?.['mcp-param-region']).toBe(encodeHeaderValue(region));
          }
        });
      }
    }
  });
});
