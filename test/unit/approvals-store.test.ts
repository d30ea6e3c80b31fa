/**
 * #52: the approvals queue's store contract (src/store/approvals.ts), one suite run against every
 * implementation: memory, SQLite (the same SqlExec code a Durable Object runs) and Postgres, then
 * the races that only a shared database can lose: one decision and one run across instances.
 */
import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../deploy/node/store/postgres/store.js';
import { openSqliteStore } from '../../deploy/node/store/sqlite.js';
import {
  type ApprovalStore,
  effectiveStatus,
  MemoryApprovalStore,
  type StagedApproval,
} from '../../src/store/approvals.js';
import { freshDatabase } from '../helpers/postgres.js';

const BOUNDS = { perPrincipal: 3, perTenant: 5 };
let made = 0;

function staged(extra: Partial<StagedApproval> = {}): StagedApproval {
  made++;
  return {
    id: `a-${made}`,
    principal: '["acme","alice"]',
    tenant: 'acme',
    subject: 'alice',
    server: 'gh',
    tool: 'gh__delete_repo',
    digest: 'd1',
    shown: '{"repo": "x"}',
    risk: 'destructive',
    createdAt: 1000 + made,
    expiresAt: 100_000,
    ...extra,
  };
}

interface Opened {
  store: ApprovalStore;
  close(): Promise<void> | void;
}

function contract(label: string, open: () => Promise<Opened>): void {
  describe(label, () => {
    const using = async (fn: (s: ApprovalStore) => Promise<void>) => {
      const o = await open();
      try {
        await fn(o.store);
      } finally {
        await o.close();
      }
    };

    it('stages, finds by principal, tool and digest, and reads back every field', () =>
      using(async (s) => {
        const a = staged();
        expect(await s.stage(a, BOUNDS, 2000)).toBe(true);
        expect(await s.get(a.id)).toEqual({ ...a, status: 'pending', delivered: false });
        expect((await s.find(a.principal, a.tool, a.digest))?.id).toBe(a.id);
        expect(await s.find(a.principal, a.tool, 'other')).toBeUndefined();
        expect(await s.find('["acme","bob"]', a.tool, a.digest)).toBeUndefined();
      }));

    it('G2: one decision counts; a second, or one after the expiry, changes nothing', () =>
      using(async (s) => {
        const a = staged();
        await s.stage(a, BOUNDS, 2000);
        expect(await s.decide(a.id, 'approved', 'root', undefined, 3000)).toBe(true);
        expect(await s.decide(a.id, 'declined', 'root', 'no', 3001)).toBe(false);
        expect(await s.get(a.id)).toMatchObject({ status: 'approved', decidedBy: 'root', decidedAt: 3000 });
        const late = staged({ expiresAt: 5000 });
        await s.stage(late, BOUNDS, 2000);
        expect(await s.decide(late.id, 'approved', 'root', undefined, 5000)).toBe(false);
        expect(effectiveStatus((await s.get(late.id))!, 5000)).toBe('expired');
        expect(await s.decide('missing', 'approved', 'root', undefined, 3000)).toBe(false);
      }));

    it('a run is claimed once, only once approved and before the expiry, and keeps its result', () =>
      using(async (s) => {
        const a = staged();
        await s.stage(a, BOUNDS, 2000);
        expect(await s.claimRun(a.id, 3000)).toBe(false);
        await s.decide(a.id, 'approved', 'root', undefined, 3000);
        expect(await s.claimRun(a.id, 3001)).toBe(true);
        expect(await s.claimRun(a.id, 3002)).toBe(false);
        await s.finish(a.id, '{"content":[]}');
        expect(await s.get(a.id)).toMatchObject({ status: 'done', result: '{"content":[]}' });
        const expired = staged({ expiresAt: 4000 });
        await s.stage(expired, BOUNDS, 2000);
        await s.decide(expired.id, 'approved', 'root', undefined, 3000);
        expect(await s.claimRun(expired.id, 4000)).toBe(false);
      }));

    it('an outcome is delivered once, after which the same call finds nothing', () =>
      using(async (s) => {
        const a = staged();
        await s.stage(a, BOUNDS, 2000);
        await s.decide(a.id, 'declined', 'root', 'freeze', 3000);
        expect(await s.deliver(a.id)).toBe(true);
        expect(await s.deliver(a.id)).toBe(false);
        expect(await s.find(a.principal, a.tool, a.digest)).toBeUndefined();
        expect((await s.get(a.id))?.reason).toBe('freeze');
      }));

    it('G4: pending approvals are bounded per principal, then per tenant; decided ones free room', () =>
      using(async (s) => {
        const mine = [staged(), staged(), staged()];
        for (const a of mine) expect(await s.stage(a, BOUNDS, 2000)).toBe(true);
        expect(await s.stage(staged(), BOUNDS, 2000)).toBe(false);
        // Another subject of the tenant still has room, up to the tenant's bound.
        const bob = { principal: '["acme","bob"]', subject: 'bob' };
        expect(await s.stage(staged(bob), BOUNDS, 2000)).toBe(true);
        expect(await s.stage(staged(bob), BOUNDS, 2000)).toBe(true);
        expect(await s.stage(staged(bob), BOUNDS, 2000)).toBe(false);
        // Another tenant is untouched by acme's flood.
        expect(await s.stage(staged({ principal: '["other","carol"]', tenant: 'other' }), BOUNDS, 2000)).toBe(
          true,
        );
        await s.decide(mine[0]!.id, 'declined', 'root', undefined, 3000);
        expect(await s.stage(staged(), BOUNDS, 3000)).toBe(true);
      }));

    it('lists newest first, by status (expired included) and tenant, within the limit', () =>
      using(async (s) => {
        const a = staged({ expiresAt: 4000 });
        const b = staged();
        const c = staged({ principal: '["other","carol"]', tenant: 'other', subject: 'carol' });
        for (const x of [a, b, c]) await s.stage(x, BOUNDS, 2000);
        await s.decide(b.id, 'approved', 'root', undefined, 3000);
        const ids = async (q: Parameters<ApprovalStore['list']>[0], now = 5000) =>
          (await s.list(q, now)).map((r) => r.id);
        expect(await ids({ limit: 10 })).toEqual([c.id, b.id, a.id]);
        expect(await ids({ limit: 2 })).toEqual([c.id, b.id]);
        expect(await ids({ limit: 10, status: 'expired' })).toEqual([a.id]);
        expect(await ids({ limit: 10, status: 'pending' })).toEqual([c.id]);
        expect(await ids({ limit: 10, status: 'approved' })).toEqual([b.id]);
        expect(await ids({ limit: 10, tenant: 'acme' })).toEqual([b.id, a.id]);
      }));
  });
}

contract('MemoryApprovalStore', async () => ({ store: new MemoryApprovalStore(), close: () => {} }));
contract('SQLite approvals', async () => {
  const s = openSqliteStore(':memory:');
  return { store: s.approvals!, close: () => s.close() };
});
contract('Postgres approvals', async () => {
  const s = await openPostgresStore(await freshDatabase('approvals'));
  return { store: s.approvals, close: () => s.close() };
});

describe('Postgres approvals shared by two instances', () => {
  it('one decision and one run win across instances, however many race for them', async () => {
    const url = await freshDatabase('approvals_race');
    const [a, b] = await Promise.all([openPostgresStore(url), openPostgresStore(url)]);
    try {
      const x = staged();
      await a.approvals.stage(x, BOUNDS, 2000);
      const decisions = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 ? a : b).approvals.decide(x.id, i % 3 ? 'approved' : 'declined', `op${i}`, undefined, 3000),
        ),
      );
      expect(decisions.filter(Boolean)).toHaveLength(1);
      const decided = (await b.approvals.get(x.id))!;
      if (decided.status === 'approved') {
        const runs = await Promise.all(
          Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).approvals.claimRun(x.id, 3001)),
        );
        expect(runs.filter(Boolean)).toHaveLength(1);
      }
      const y = staged();
      await b.approvals.stage(y, BOUNDS, 2000);
      await a.approvals.decide(y.id, 'approved', 'root', undefined, 3000);
      const runs = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).approvals.claimRun(y.id, 3001)),
      );
      expect(runs.filter(Boolean)).toHaveLength(1);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
