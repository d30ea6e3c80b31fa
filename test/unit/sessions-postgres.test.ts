import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStore, type PostgresStateStore } from '../../deploy/node/store/postgres/store.js';
import { ManifoldError } from '../../src/errors.js';
import { toRpcError } from '../../src/server/mcp/errors.js';
import { SessionTable } from '../../src/server/mcp/sessions.js';
import { type SessionRecord, SharedSessions } from '../../src/server/mcp/shared-sessions.js';
import { principal } from '../helpers/factories.js';
import { eventually } from '../helpers/harness.js';
import { freshDatabase } from '../helpers/postgres.js';

// #15: legacy session records on a real Postgres (test/helpers/postgres.ts), a fresh database per case.
let databases = 0;
const fresh = async () => openPostgresStore(await freshDatabase(`sessions_${++databases}`));

const IDLE_MS = 60_000;
const record = (id: string, owner = '["alice","acme"]'): SessionRecord => ({
  id,
  owner,
  protocolVersion: '2025-06-18',
  clientCapabilities: { sampling: {}, elicitation: { form: {} } },
  createdAt: 1_000,
});
const ID = '6f1c1f7e-8a43-4a4b-9d43-0b7f3c3a1d01';

describe('legacy session records on Postgres', () => {
  let store: PostgresStateStore;
  beforeAll(async () => {
    store = await fresh();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('a record round-trips: version, capabilities, log level; the row holds no token or header', async () => {
    const sessions = store.sessionStore(IDLE_MS);
    await sessions.put(record(ID), 1_000);
    await sessions.setLogLevel(ID, 'warning');
    expect(await sessions.take(ID, '["alice","acme"]', 2_000, IDLE_MS)).toEqual({
      ...record(ID),
      logLevel: 'warning',
    });
    const { rows } = await store.pool.query('SELECT * FROM manifold_sessions');
    expect(Object.keys(rows[0]).sort()).toEqual([
      'client_capabilities',
      'created_at',
      'id',
      'log_level',
      'owner',
      'protocol_version',
      'seen_at',
    ]);
    // seen_at moved with the take: another instance's use keeps the session alive.
    expect(rows[0].seen_at).toBe(2_000);
  });

  it("A4: another owner's take finds nothing and does not keep the session alive", async () => {
    const sessions = store.sessionStore(IDLE_MS);
    const id = '6f1c1f7e-8a43-4a4b-9d43-0b7f3c3a1d02';
    await sessions.put(record(id), 1_000);
    expect(await sessions.take(id, '["bob","globex"]', 5_000, IDLE_MS)).toBeUndefined();
    const { rows } = await store.pool.query('SELECT seen_at FROM manifold_sessions WHERE id = $1', [id]);
    expect(rows[0].seen_at).toBe(1_000);
  });

  it('a record idle past the deadline is gone for take and touch, and the next put sweeps it', async () => {
    const own = await fresh();
    try {
      const sessions = own.sessionStore(IDLE_MS);
      const old = '6f1c1f7e-8a43-4a4b-9d43-0b7f3c3a1d03';
      await sessions.put(record(old), 1_000);
      expect(await sessions.touch(old, 1_000 + IDLE_MS, IDLE_MS)).toEqual({});
      await sessions.setLogLevel(old, 'debug');
      expect(await sessions.touch(old, 1_000 + IDLE_MS, IDLE_MS)).toEqual({ logLevel: 'debug' });
      const later = 1_000 + 2 * IDLE_MS + 1;
      expect(await sessions.touch(old, later, IDLE_MS)).toBeUndefined();
      expect(await sessions.take(old, '["alice","acme"]', later, IDLE_MS)).toBeUndefined();
      // The sweep runs on the first put of a process and every 64th after it.
      for (let i = 0; i < 64; i++) {
        await sessions.put(record(`00000000-0000-4000-8000-${String(i).padStart(12, '0')}`), later);
      }
      const { rows } = await own.pool.query('SELECT id FROM manifold_sessions WHERE id = $1', [old]);
      expect(rows).toEqual([]);
    } finally {
      await own.close();
    }
  });

  it('a delete is announced to every instance watching, and only a delete of a row that was there', async () => {
    const url = await freshDatabase(`sessions_${++databases}`);
    const [a, b] = await Promise.all([openPostgresStore(url), openPostgresStore(url)]);
    try {
      const gone: string[] = [];
      b.sessionStore(IDLE_MS).watch((id) => gone.push(id));
      const sa = a.sessionStore(IDLE_MS);
      // The watcher connects in the background: deletes until it has seen one of them.
      const probes: string[] = [];
      await eventually(async () => {
        const id = crypto.randomUUID();
        await sa.put(record(id), 1_000);
        await sa.delete(id);
        probes.push(id);
        return probes.some((p) => gone.includes(p));
      }, 'the LISTEN connection is up');
      const dead = '00000000-0000-4000-8000-00000000dead';
      await sa.delete(dead);
      const id = crypto.randomUUID();
      await sa.put(record(id), 1_000);
      await sa.delete(id);
      await eventually(() => gone.includes(id), 'the delete announced');
      // Notifications arrive in commit order: had the missing row's delete been announced, it
      // would be here by now.
      expect(gone).not.toContain(dead);
      expect(gone.filter((g) => g === id)).toHaveLength(1);
      expect(await sa.take(id, '["alice","acme"]', 2_000, IDLE_MS)).toBeUndefined();
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('SharedSessions over Postgres', () => {
  it("a local copy's refresh picks up a level set elsewhere, and drops a session whose row is gone without a notification", async () => {
    const store = await fresh();
    try {
      let now = 1_000;
      const table = new SessionTable({ max: 10, idleSeconds: 3600 });
      const shared = new SharedSessions(
        store.sessionStore(IDLE_MS),
        table,
        IDLE_MS,
        () => now,
        () => {},
      );
      const alice = principal({ tenant: 'acme', subject: 'alice' });
      const session = table.create(alice, '2025-11-25', now);
      await shared.opened(session);
      // Another instance sets the level (its own copy and the row).
      await store.sessionStore(IDLE_MS).setLogLevel(session.id, 'critical');
      shared.used(session);
      expect(session.logLevel).toBeUndefined(); // within the refresh interval: no query
      now += 10_001;
      shared.used(session);
      await eventually(() => session.logLevel === 'critical', 'the level read back');
      // The row goes behind the table's back (as if its notification were lost).
      await store.pool.query('DELETE FROM manifold_sessions WHERE id = $1', [session.id]);
      now += 10_001;
      shared.used(session);
      await eventually(() => table.get(session.id, alice.key) === undefined, 'the copy dropped');
    } finally {
      await store.close();
    }
  });
});

describe('a session store that does not answer', () => {
  it('makes a local miss and an initialize a 503 the client may retry, never a 404 or a 500; local sessions go on', async () => {
    const store = await fresh();
    const table = new SessionTable({ max: 10, idleSeconds: 3600 });
    const failures: string[] = [];
    const shared = new SharedSessions(
      store.sessionStore(IDLE_MS),
      table,
      IDLE_MS,
      () => 1_000,
      (what) => failures.push(what),
    );
    const alice = principal({ tenant: 'acme', subject: 'alice' });
    const held = table.create(alice, '2025-11-25', 1_000);
    await store.close();
    const outcome = await shared.find('6f1c1f7e-8a43-4a4b-9d43-0b7f3c3a1d09', alice).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(outcome instanceof ManifoldError && outcome.code).toBe('ERR_STORE_UNAVAILABLE');
    expect(toRpcError(outcome).status).toBe(503);
    const opened = table.create(alice, '2025-11-25', 1_000);
    await expect(shared.opened(opened)).rejects.toMatchObject({ code: 'ERR_STORE_UNAVAILABLE' });
    expect(failures).toEqual(['query', 'query']);
    // A session this instance holds is served from its table without the database.
    expect(table.get(held.id, alice.key)).toBe(held);
    // An id that is not a UUID is unknown without a query.
    expect(await shared.find('not-a-session', alice)).toBeUndefined();
  });
});
