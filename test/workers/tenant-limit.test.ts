import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEASE_PATH, tenantObjectName } from '../../deploy/workers/tenant-limit.js';
import { blockOf, WINDOW_MS } from '../../src/auth/leased-limit.js';
import { ROOT } from '../helpers/harness.js';

// #15 on Workers: one Durable Object per tenant counts its calls; every isolate leases blocks
// from it. Real workerd (Miniflare): the fixture Worker runs twice, as two Workers ("a" defines
// the tenant objects, "b" binds a's namespace), so two isolates with their own limiters.
const FIXTURE = join(ROOT, 'test/workers/fixtures/limit-worker.ts');
/** The limiters' clock, 10 s into a window; the object keeps no clock of its own. */
const NOW = 30_000 * WINDOW_MS + 10_000;
const WINDOW = NOW - 10_000;

interface Take {
  ok: number;
  refused: number;
  isolate: string;
  results: unknown[];
}
interface State {
  hits: number;
  rows: { window_start: number; tenant: string; used: number }[];
}

describe('workers: rate limits counted in the tenant’s Durable Object', () => {
  let dir: string;
  let mf: Miniflare;
  let isolates: { fetch: (url: string, init?: RequestInit) => Promise<Response> }[];

  const post = async <T>(on: number, path: string, body: unknown): Promise<T> => {
    const res = await isolates[on]!.fetch(`http://limit.test${path}`, {
      method: 'POST',
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as T;
  };
  const take = (on: number, tenant: string, n: number, limit: number | null, now = NOW) =>
    post<Take>(on, '/take', { tenant, n, limit, now });
  const drain = async (on: number, tenant: string, limit: number, now = NOW) =>
    (await post<{ ok: number }>(on, '/drain', { tenant, limit, now })).ok;
  const state = async (tenant: string): Promise<State> =>
    (await (
      await isolates[0]!.fetch(`http://limit.test/state?tenant=${encodeURIComponent(tenant)}`)
    ).json()) as State;
  /** Lease requests both isolates have sent to the tenant's object so far. */
  const sent = async (tenant: string): Promise<number> => {
    let n = 0;
    for (const i of isolates)
      n += ((await (await i.fetch(`http://limit.test/sent?tenant=${tenant}`)).json()) as { sent: number })
        .sent;
    return n;
  };
  const raw = async (
    tenant: string,
    body: string | undefined,
    init: { method?: string; url?: string } = {},
  ) => {
    const query = new URLSearchParams({ tenant, ...(init.url ? { url: init.url } : {}) });
    const res = await isolates[0]!.fetch(`http://limit.test/raw?${query}`, {
      method: init.method ?? 'POST',
      ...(body === undefined ? {} : { body }),
    });
    return { status: res.status, body: await res.text() };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-limit-'));
    const scriptPath = join(dir, 'limit-worker.js');
    // As `npm run build:workers` bundles the Worker entry.
    await build({
      entryPoints: [FIXTURE],
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      conditions: ['workerd', 'worker', 'browser'],
      mainFields: ['browser', 'module', 'main'],
      external: ['cloudflare:workers'],
      outfile: scriptPath,
      logLevel: 'warning',
    });
    // modulesRoot: module names are paths under it, and the bundle is in a scratch directory.
    const worker = { modules: true, modulesRoot: dir, scriptPath, compatibilityDate: '2026-04-01' };
    mf = new Miniflare({
      workers: [
        { ...worker, name: 'a', durableObjects: { TENANTS: { className: 'LimitTenant', useSQLite: true } } },
        { ...worker, name: 'b', durableObjects: { TENANTS: { className: 'LimitTenant', scriptName: 'a' } } },
      ],
    });
    await mf.ready;
    isolates = (await Promise.all([mf.getWorker('a'), mf.getWorker('b')])) as never;
  }, 120_000);

  afterAll(async () => {
    await mf?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the tenant object’s name is tenant:<tenant>', () => {
    expect(tenantObjectName('acme')).toBe('tenant:acme');
  });

  it('concurrent takes over two isolates never grant more than the limit in a window; drained, exactly the limit', async () => {
    const limit = 100;
    expect(blockOf(limit)).toBe(5);
    // Six requests at once on each isolate, each taking 30 calls at once: 360 calls for 100.
    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => take(i % 2, 'acme', 30, limit)));
    expect(new Set(burst.map((t) => t.isolate)).size).toBe(2);
    const allowed = burst.reduce((n, t) => n + t.ok, 0);
    expect(allowed).toBeGreaterThan(0);
    expect(allowed).toBeLessThanOrEqual(limit);
    expect(burst.reduce((n, t) => n + t.ok + t.refused, 0)).toBe(360);
    // Every refusal in the window says when it ends: 50 s away.
    for (const t of burst)
      for (const r of t.results)
        if (!(r as { ok: boolean }).ok) expect(r).toEqual({ ok: false, retryAfterSeconds: 50 });
    let s = await state('acme');
    expect(s.rows).toEqual([{ window_start: WINDOW, tenant: 'acme', used: limit }]);
    // Every lease request either isolate sent reached the object, and nothing else did.
    expect(s.hits).toBe(await sent('acme'));
    // A call that finds its isolate's lease still out sends its own (no request waits on another's
    // I/O): in a burst this wide, about one lease request per call.
    expect(s.hits).toBeGreaterThan(2);
    // Leases an isolate holds are spent by that isolate only; together, exactly the limit.
    expect(allowed + (await drain(0, 'acme', limit)) + (await drain(1, 'acme', limit))).toBe(limit);

    // The next window grants again; two windows on, the first is swept.
    expect(
      (await drain(0, 'acme', limit, NOW + WINDOW_MS)) + (await drain(1, 'acme', limit, NOW + WINDOW_MS)),
    ).toBe(limit);
    expect(await drain(1, 'acme', limit, NOW + 2 * WINDOW_MS)).toBe(limit);
    s = await state('acme');
    expect(s.rows.map((r) => [r.window_start - WINDOW, r.used])).toEqual([
      [WINDOW_MS, limit],
      [2 * WINDOW_MS, limit],
    ]);
  });

  it('one request per block: calls in turn spend the isolate’s block without asking the object', async () => {
    const limit = 200;
    for (let i = 0; i < 40; i++) expect((await take(i % 2, 'steady', 1, limit)).ok).toBe(1);
    // Blocks of 10, 20 calls per isolate: two leases each.
    expect(await sent('steady')).toBe(4);
    expect(await state('steady')).toEqual({
      hits: 4,
      rows: [{ window_start: WINDOW, tenant: 'steady', used: 40 }],
    });
  });

  it('a tenant without a limit never reaches its object', async () => {
    const results = await Promise.all([take(0, 'free', 50, null), take(1, 'free', 50, null)]);
    expect(results.map((t) => t.ok)).toEqual([50, 50]);
    expect(await sent('free')).toBe(0);
    expect(await state('free')).toEqual({ hits: 0, rows: [] });
  });

  it('two tenants are counted apart, each in its own object', async () => {
    const [x, y] = await Promise.all([take(0, 'x-corp', 20, 5), take(1, 'y-corp', 20, 8)]);
    expect(x.ok + (await drain(0, 'x-corp', 5))).toBe(5);
    expect(y.ok + (await drain(1, 'y-corp', 8))).toBe(8);
    expect((await state('x-corp')).rows).toEqual([{ window_start: WINDOW, tenant: 'x-corp', used: 5 }]);
    expect((await state('y-corp')).rows).toEqual([{ window_start: WINDOW, tenant: 'y-corp', used: 8 }]);
  });

  it('inside the tenant’s object, its own calls lease from its storage directly, counted with the isolates’', async () => {
    const limit = 40;
    const inside = async (n: number) => {
      const query = new URLSearchParams({
        tenant: 'own',
        n: String(n),
        limit: String(limit),
        now: String(NOW),
      });
      const res = await isolates[1]!.fetch(`http://limit.test/object-take?${query}`);
      expect(res.status).toBe(200);
      return ((await res.json()) as { ok: number }).ok;
    };
    const [a, b] = await Promise.all([take(0, 'own', 30, limit), inside(30)]);
    expect(a.ok + b).toBeLessThanOrEqual(limit);
    const rest = (await drain(0, 'own', limit)) + (await inside(limit));
    expect(a.ok + b + rest).toBe(limit);
    // Only the isolate's leases were requests to the object.
    expect(await state('own')).toEqual({
      hits: await sent('own'),
      rows: [{ window_start: WINDOW, tenant: 'own', used: limit }],
    });
  });

  it('an object that does not grant a lease: the call is refused, retry after 1 s (fail closed), and not asked again at once', async () => {
    const first = await take(0, 'broken', 1, 10);
    expect(first.results).toEqual([{ ok: false, retryAfterSeconds: 1 }]);
    const again = await take(0, 'broken', 5, 10);
    expect(again.results).toEqual(Array(5).fill({ ok: false, retryAfterSeconds: 1 }));
    expect(await sent('broken')).toBe(1);
    // A second on, it asks again.
    expect((await take(0, 'broken', 1, 10, NOW + 1000)).results).toEqual([
      { ok: false, retryAfterSeconds: 1 },
    ]);
    expect(await sent('broken')).toBe(2);
    expect(await state('broken')).toEqual({ hits: 2, rows: [] });
  });

  it('bad lease bodies get 400 (a long one 413, another method 405), never a throw; good ones are still answered', async () => {
    const good = { tenant: 'bad-input', window: WINDOW, block: 2, limit: 3 };
    const bad: unknown[] = [
      'not json',
      '',
      'null',
      '[]',
      '"text"',
      '{}',
      { ...good, tenant: '' },
      { ...good, tenant: 7 },
      { ...good, tenant: 'x'.repeat(1025) },
      { ...good, window: -WINDOW_MS },
      { ...good, window: WINDOW + 1 },
      { ...good, window: '60000' },
      { ...good, window: 1e300 },
      { ...good, block: 0 },
      { ...good, block: 1.5 },
      { ...good, block: 4 },
      { ...good, limit: 0 },
      { ...good, limit: -3 },
      { ...good, limit: null },
      { ...good, limit: Number.MAX_SAFE_INTEGER + 2 },
      { ...good, extra: true },
      { tenant: 'bad-input', window: WINDOW, block: 2 },
    ];
    for (const body of bad) {
      const answer = await raw('bad-input', typeof body === 'string' ? body : JSON.stringify(body));
      expect({ body, status: answer.status }).toEqual({ body, status: 400 });
      expect(JSON.parse(answer.body).error).toMatch(/^bad lease: /);
    }
    const long = await raw('bad-input', JSON.stringify({ ...good, tenant: 'x'.repeat(5000) }));
    expect(long.status).toBe(413);
    expect((await raw('bad-input', undefined, { method: 'GET' })).status).toBe(405);
    // The lease path on any other host is not a lease (a request forwarded from outside).
    expect(
      (await raw('bad-input', JSON.stringify(good), { url: `https://example.com${LEASE_PATH}` })).status,
    ).toBe(404);
    expect((await state('bad-input')).rows).toEqual([]);
    const grants = [];
    for (let i = 0; i < 3; i++) grants.push(JSON.parse((await raw('bad-input', JSON.stringify(good))).body));
    expect(grants).toEqual([{ granted: 2 }, { granted: 1 }, { granted: 0 }]);
  });
});
