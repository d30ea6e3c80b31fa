import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../deploy/node/store/postgres/store.js';
import { openSqliteStore } from '../../deploy/node/store/sqlite.js';
import { MemoryStateStore, type StateStore } from '../../src/store/state.js';
import { freshDatabase } from '../helpers/postgres.js';

/**
 * #52's stored servers and tokens, one contract for memory and for the one set of queries on
 * SQLite and on Postgres (src/store/stored-servers.ts, tokens.ts): each change bumps its epoch
 * exactly when it changed something, and a revocation is granted once.
 */
function contract(label: string, open: () => Promise<StateStore>): void {
  describe(label, () => {
    const using = async (fn: (s: StateStore) => Promise<void>) => {
      const s = await open();
      try {
        await fn(s);
      } finally {
        await s.close?.();
      }
    };

    it('stored servers: put adds or replaces with an epoch bump; remove bumps only when there was one', () =>
      using(async (s) => {
        const servers = s.storedServers!;
        expect(await servers.epoch()).toBe(0);
        await servers.put({
          name: 'b',
          entry: { url: 'https://b.example/mcp' },
          updatedBy: 'ops',
          updatedAt: 1,
        });
        await servers.put({ name: 'a', entry: { command: 'x' }, updatedBy: 'ops', updatedAt: 2 });
        await servers.put({ name: 'a', entry: { command: 'y' }, updatedBy: 'root', updatedAt: 3 });
        expect(await servers.epoch()).toBe(3);
        expect(await servers.list()).toEqual([
          { name: 'a', entry: { command: 'y' }, updatedBy: 'root', updatedAt: 3 },
          { name: 'b', entry: { url: 'https://b.example/mcp' }, updatedBy: 'ops', updatedAt: 1 },
        ]);
        expect(await servers.remove('nope')).toBe(false);
        expect(await servers.epoch()).toBe(3);
        expect(await servers.remove('a')).toBe(true);
        expect(await servers.epoch()).toBe(4);
        expect((await servers.list()).map((x) => x.name)).toEqual(['b']);
      }));

    it('tokens: seen once, listed newest first, revoked once (with an epoch bump), expired ones gone', () =>
      using(async (s) => {
        const tokens = s.tokens!;
        await tokens.seen(
          { id: 't1', subject: 'alice', tenant: 'acme', expiresAt: 5_000, firstSeen: 100 },
          100,
        );
        await tokens.seen(
          { id: 't2', subject: 'bob', tenant: 'acme', expiresAt: 9_000, firstSeen: 200 },
          200,
        );
        await tokens.seen(
          { id: 't1', subject: 'mallory', tenant: 'x', expiresAt: 9_999, firstSeen: 300 },
          300,
        );
        expect((await tokens.list(10, 300)).map((t) => [t.id, t.subject])).toEqual([
          ['t2', 'bob'],
          ['t1', 'alice'],
        ]);
        expect(await tokens.revoke('nope', 'ops', 400)).toBe(false);
        expect(await tokens.epoch()).toBe(0);
        expect(await tokens.revoke('t1', 'ops', 400)).toBe(true);
        expect(await tokens.revoke('t1', 'ops', 500)).toBe(false);
        expect(await tokens.epoch()).toBe(1);
        expect(await tokens.revoked(600)).toEqual(['t1']);
        expect((await tokens.list(10, 600))[1]).toMatchObject({ id: 't1', revokedAt: 400, revokedBy: 'ops' });
        // Past its expiry a token cannot be revoked, and is no longer listed.
        expect(await tokens.revoke('t2', 'ops', 9_500)).toBe(false);
        expect(await tokens.revoked(6_000)).toEqual([]);
        expect((await tokens.list(10, 6_000)).map((t) => t.id)).toEqual(['t2']);
      }));
  });
}

contract('memory', async () => new MemoryStateStore());
contract('SQLite', async () => openSqliteStore(':memory:'));
contract('Postgres', async () => openPostgresStore(await freshDatabase('admin_stores')));
