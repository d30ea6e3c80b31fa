import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, DRIFT } from '../helpers/clients.js';
import type { TestGateway } from '../helpers/harness.js';
import { freshDatabase, startInstances, stopInstances } from '../helpers/postgres.js';
import { parsePromText } from '../helpers/prom-text.js';

// #15: "rate limits enforced across instances". Three gateways on one Postgres, one tenant's
// calls spread over all of them from a legacy and a modern client each: one count for all.
const INSTANCES = 3;
const LIMIT = 9;
const WINDOW_MS = 60_000;

type Outcome = { ok: true } | { ok: false; code: unknown; data: unknown; message: string };

async function call(h: AnyHandle): Promise<Outcome> {
  try {
    const r = (await h.client.callTool({ name: 'fx__alpha', arguments: {} })) as { isError?: boolean };
    expect(r.isError).not.toBe(true);
    return { ok: true };
  } catch (e) {
    const err = e as { code?: unknown; data?: unknown; message?: string };
    return { ok: false, code: err.code, data: err.data, message: String(err.message) };
  }
}

describe('rate limits shared by gateways on one Postgres', () => {
  let url: string;
  let dir: string;
  const gateways: TestGateway[] = [];
  const clients: AnyHandle[] = [];

  beforeAll(async () => {
    url = await freshDatabase('limits');
    dir = mkdtempSync(join(tmpdir(), 'mf-pg-rate-'));
    const toolsFile = join(dir, 'tools.json');
    writeFileSync(
      toolsFile,
      JSON.stringify([{ name: 'alpha', description: 'Alpha.', inputSchema: { type: 'object' } }]),
    );
    const raw = {
      mcpServers: { fx: { command: process.execPath, args: [DRIFT], env: { DRIFT_TOOLS_FILE: toolsFile } } },
      gateway: {
        store: { postgres: '${MANIFOLD_PG_URL}' },
        callsPerMinute: LIMIT,
        drift: { recheckSeconds: 0 },
      },
    };
    const env = { MANIFOLD_PG_URL: url };
    await startInstances(raw, env, INSTANCES, { gateways, clients });
  }, 600_000);

  afterAll(async () => {
    await stopInstances({ gateways, clients });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('calls spread over three instances and both eras are allowed exactly the limit; the rest are refused with retryAfterSeconds and counted', async () => {
    // The count is per one-minute window: start well inside one, so the burst cannot straddle two.
    const into = Date.now() % WINDOW_MS;
    if (into > WINDOW_MS - 20_000) await new Promise((r) => setTimeout(r, WINDOW_MS - into + 100));
    const outcomes: Outcome[] = [];
    for (let round = 0; round < 4; round++) {
      // Each round asks every client at once: instances race for the same row.
      outcomes.push(...(await Promise.all(clients.map((c) => call(c)))));
    }
    const allowed = outcomes.filter((o) => o.ok).length;
    expect(allowed).toBe(LIMIT);
    const refused = outcomes.filter((o): o is Extract<Outcome, { ok: false }> => !o.ok);
    expect(refused).toHaveLength(4 * clients.length - LIMIT);
    for (const r of refused) {
      expect(r.code).toBe(-32029);
      expect(r.message).toContain('rate limit for tenant exceeded');
      const seconds = (r.data as { retryAfterSeconds?: unknown }).retryAfterSeconds;
      expect(seconds).toBeGreaterThanOrEqual(1);
      expect(seconds).toBeLessThanOrEqual(60);
    }
    // Refused in both eras and on every instance: one count, not one per instance or era.
    const refusedAt = outcomes.flatMap((o, i) => (o.ok ? [] : [i % clients.length]));
    expect(new Set(refusedAt.map((c) => clients[c]!.era))).toEqual(new Set(['legacy', 'modern']));
    expect(new Set(refusedAt.map((c) => Math.floor(c / 2)))).toEqual(new Set([0, 1, 2]));

    // The database holds the one count: one window, exactly the limit.
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const { rows } = await db.query('SELECT tenant, used::int AS used FROM manifold_rate_windows');
      expect(rows).toEqual([{ tenant: 'default', used: LIMIT }]);
    } finally {
      await db.end();
    }

    // Each instance's metrics count its own refusals; together, every refusal.
    let counted = 0;
    for (const gw of gateways) {
      const res = await fetch(new URL('/metrics', gw.url));
      expect(res.status).toBe(200);
      counted +=
        parsePromText(await res.text()).value('manifold_rate_limited_total', { tenant: 'default' }) ?? 0;
    }
    expect(counted).toBe(refused.length);
  });
});
