import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { SWEEP_EVERY } from '../../deploy/node/store/postgres/rate-limit.js';
import { openPostgresStore, PostgresStateStore } from '../../deploy/node/store/postgres/store.js';
import { blockOf, WINDOW_MS } from '../../src/auth/leased-limit.js';
import type { TakeResult } from '../../src/auth/rate-limit.js';
import { callLimiter, type TakeCall } from '../../src/auth/shared-limit.js';
import { parseConfigObject } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import { createJsonLogger } from '../../src/lib/log.js';
import { eventually, freePort } from '../helpers/harness.js';
import { freshDatabase } from '../helpers/postgres.js';

/** A clock the test moves by hand, starting 10 s into a window. */
function manualClock(start = 1_000 * WINDOW_MS + 10_000) {
  let t = start;
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
}

function configWith(
  callsPerMinute: number,
  tenants: Record<string, { callsPerMinute?: number }> = {},
): Config {
  const parsed = parseConfigObject({ mcpServers: { gh: { command: 'x' } }, gateway: { callsPerMinute } }, {});
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  // Only `tenants` is read from auth here; the rest of an auth section is not what this tests.
  parsed.config.gateway.auth = { tenants } as never;
  return parsed.config;
}

const okCount = (results: TakeResult[]) => results.filter((r) => r.ok).length;

describe('callLimiter, in memory (no shared store)', () => {
  it("counts a tenant's calls against the gateway's limit", async () => {
    const clock = manualClock();
    const take = callLimiter(() => configWith(3), clock.now);
    const results = await Promise.all(Array.from({ length: 5 }, () => take('acme')));
    expect(results).toEqual([
      { ok: true },
      { ok: true },
      { ok: true },
      { ok: false, retryAfterSeconds: 20 },
      { ok: false, retryAfterSeconds: 20 },
    ]);
  });

  it("a tenant's own limit overrides the gateway's, and a reloaded config applies to the next call", async () => {
    const clock = manualClock();
    let config = configWith(1, { acme: { callsPerMinute: 2 } });
    const take = callLimiter(() => config, clock.now);
    const oks = async (tenant: string, n: number) =>
      (await Promise.all(Array.from({ length: n }, () => take(tenant)))).map((r) => r.ok);
    expect(await oks('acme', 3)).toEqual([true, true, false]);
    expect(await oks('other', 2)).toEqual([true, false]);
    // One second on: the old limit (2/min) has refilled a third of a call, the reloaded one (100/min) more than one.
    clock.advance(1000);
    config = configWith(1, { acme: { callsPerMinute: 100 } });
    expect((await take('acme')).ok).toBe(true);
  });
});

describe('the Postgres limiter: one count per tenant for every instance', () => {
  let databases = 0;
  const stores: PostgresStateStore[] = [];
  /** Two "instances": two stores, each with its own pool, on one fresh database. */
  const twoInstances = async () => {
    const url = await freshDatabase(`limits_${++databases}`);
    const pair = await Promise.all([openPostgresStore(url), openPostgresStore(url)]);
    stores.push(...pair);
    return pair;
  };
  afterAll(async () => {
    for (const s of stores) await s.close().catch(() => {});
  });

  it('two instances at 30/min take at most 30 together in a window, interleaved; the next window grants again', async () => {
    const [a, b] = await twoInstances();
    const clock = manualClock();
    const takeA = a.callLimiter({ perTenant: () => 30, now: clock.now });
    const takeB = b.callLimiter({ perTenant: () => 30, now: clock.now });
    const first: TakeResult[] = [];
    for (let i = 0; i < 50; i++) first.push(await (i % 2 ? takeA : takeB)('acme'));
    expect(okCount(first)).toBe(30);
    // Both instances were served (blocks of one at this limit), then both refused until the window ends.
    expect(first.slice(0, 30).every((r) => r.ok)).toBe(true);
    expect(first.slice(30)).toEqual(Array(20).fill({ ok: false, retryAfterSeconds: 50 }));
    clock.advance(WINDOW_MS);
    const second: TakeResult[] = [];
    for (let i = 0; i < 50; i++) second.push(await (i % 3 ? takeA : takeB)('acme'));
    expect(okCount(second)).toBe(30);
    const { rows } = await a.pool.query(
      'SELECT window_start, used FROM manifold_rate_windows ORDER BY window_start',
    );
    expect(rows.map((r) => r.used)).toEqual([30, 30]);
  });

  it('concurrent takes spread over both instances never pass the limit, and most are answered locally', async () => {
    const [a, b] = await twoInstances();
    const clock = manualClock();
    const limit = 200;
    const takes = [a, b].map((s) =>
      s.callLimiter({ perTenant: (t) => (t === 'free' ? undefined : limit), now: clock.now }),
    );
    const results = await Promise.all(Array.from({ length: 500 }, (_, i) => takes[i % 2]!('acme')));
    expect(okCount(results)).toBe(limit);
    // A lease is a block of limit/20: 100 calls in turn over two instances take 5 leases each.
    expect(blockOf(limit)).toBe(10);
    for (let i = 0; i < 100; i++) expect(await takes[i % 2]!('gamma')).toEqual({ ok: true });
    // Another tenant has its own count; a tenant without a limit never touches the database.
    expect(okCount(await Promise.all(Array.from({ length: 20 }, (_, i) => takes[i % 2]!('beta'))))).toBe(20);
    expect(await takes[0]!('free')).toEqual({ ok: true });
    const { rows } = await a.pool.query('SELECT tenant, used FROM manifold_rate_windows ORDER BY tenant');
    expect(rows).toEqual([
      { tenant: 'acme', used: 200 },
      { tenant: 'beta', used: 20 },
      { tenant: 'gamma', used: 100 },
    ]);
  });

  it('the limit is read per call: a reload that raises it grants more in the same window, one that lowers it no more', async () => {
    const [a, b] = await twoInstances();
    const clock = manualClock();
    let limit = 4;
    const takes = [a, b].map((s) => s.callLimiter({ perTenant: () => limit, now: clock.now }));
    const burst = async (n: number) => {
      const results: TakeResult[] = [];
      for (let i = 0; i < n; i++) results.push(await takes[i % 2]!('acme'));
      return okCount(results);
    };
    expect(await burst(8)).toBe(4);
    limit = 6;
    expect(await burst(8)).toBe(2);
    limit = 3;
    expect(await burst(8)).toBe(0);
  });

  it('windows older than the previous one are swept as leases go by', async () => {
    const [a] = await twoInstances();
    const clock = manualClock();
    const take = a.callLimiter({ perTenant: () => 5, now: clock.now });
    expect(await take('old')).toEqual({ ok: true });
    clock.advance(2 * WINDOW_MS);
    // Blocks of one: every take below is a lease, and one of them triggers the sweep.
    for (let i = 1; i < SWEEP_EVERY; i++) expect(await take(`t${i}`)).toEqual({ ok: true });
    const tenants = async () =>
      (await a.pool.query<{ tenant: string }>('SELECT tenant FROM manifold_rate_windows')).rows.map(
        (r) => r.tenant,
      );
    await eventually(async () => !(await tenants()).includes('old'), 'the old window is swept');
    expect(await tenants()).toHaveLength(SWEEP_EVERY - 1);
  });

  it('a leased block is spent locally; once the database is gone, a call that needs a lease is refused (fail closed)', async () => {
    const [a] = await twoInstances();
    const clock = manualClock();
    const take: TakeCall = a.callLimiter({ perTenant: () => 200, now: clock.now });
    expect(await take('acme')).toEqual({ ok: true });
    await a.pool.end();
    // The other 9 calls of the block need no database.
    for (let i = 0; i < 9; i++) expect(await take('acme')).toEqual({ ok: true });
    expect(await take('acme')).toEqual({ ok: false, retryAfterSeconds: 1 });
  });

  it('an unreachable database refuses with Retry-After 1 s and logs without the URL or its password', async () => {
    const port = await freePort();
    const url = `postgres://manifold:pg-s3cret-value@127.0.0.1:${port}/none`;
    const lines: string[] = [];
    const log = createJsonLogger({ level: 'debug', write: (l) => lines.push(l) });
    const pool = new pg.Pool({ connectionString: url, connectionTimeoutMillis: 2000 });
    const store = new PostgresStateStore(pool, { connectionString: url }, log);
    stores.push(store);
    const clock = manualClock();
    const take = store.callLimiter({ perTenant: () => 30, now: clock.now });
    expect(await take('acme')).toEqual({ ok: false, retryAfterSeconds: 1 });
    // Within the next second nothing asks the dead database again: refused at once.
    expect(await take('acme')).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'warn', event: 'rate_limit.store_unavailable' });
    expect(lines[0]).not.toContain('pg-s3cret-value');
    expect(lines[0]).not.toContain(url);
    // Unlimited tenants are not affected by the outage.
    const open = store.callLimiter({ perTenant: () => undefined, now: clock.now });
    expect(await open('acme')).toEqual({ ok: true });
  });
});
