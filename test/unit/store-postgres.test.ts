import { describe, expect, inject, it } from 'vitest';
import { PG_MIGRATIONS } from '../../deploy/node/store/postgres/schema.js';
import { openPostgresStore, type PostgresStateStore } from '../../deploy/node/store/postgres/store.js';
import { ManifoldError } from '../../src/errors.js';
import { identityOf } from '../../src/store/state.js';
import { eventually } from '../helpers/harness.js';
import { freshDatabase } from '../helpers/postgres.js';
import { baselineOf, ID, serverConfig, storeContract, TOOLS, tool } from '../shared/store-contract.js';

// The run's Postgres (test/helpers/postgres.ts); a fresh database per store.
let databases = 0;
const freshUrl = () => freshDatabase(`store_${++databases}`);

storeContract('PostgresStateStore', {
  open: async () => openPostgresStore(await freshUrl()),
  async corrupt(store, name, column, text) {
    await (store as PostgresStateStore).pool.query(
      `UPDATE manifold_servers SET ${column} = $1 WHERE name = $2`,
      [text, name],
    );
  },
});

describe('PostgresStateStore shared by several instances', () => {
  it('two instances starting at once on a fresh database migrate once and record one baseline', async () => {
    const url = await freshUrl();
    const [a, b] = await Promise.all([openPostgresStore(url), openPostgresStore(url)]);
    try {
      const mine = baselineOf(TOOLS, 'a');
      const theirs = baselineOf(TOOLS, 'b');
      // Both saw no baseline, both listed (the catalog row exists), both try to trust.
      await Promise.all([a.saveCatalog(ID, TOOLS, 1000), b.saveCatalog(ID, TOOLS, 1000)]);
      const won = await Promise.all([a.createBaseline(ID, mine, 1000), b.createBaseline(ID, theirs, 1000)]);
      expect(won.filter(Boolean)).toHaveLength(1);
      const stored = (await a.get('github'))!.baseline;
      expect(stored).toEqual(won[0] ? mine : theirs);
      expect((await b.get('github'))!.baseline).toEqual(stored);
      const { rows } = await a.pool.query('SELECT count(*)::int AS n FROM manifold_servers');
      expect(rows[0].n).toBe(1);
      const version = await a.pool.query("SELECT value FROM manifold_meta WHERE key = 'schema_version'");
      expect(version.rows[0].value).toBe(PG_MIGRATIONS.length);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('a claim raced from two instances is granted exactly once', async () => {
    const url = await freshUrl();
    const [a, b] = await Promise.all([openPostgresStore(url), openPostgresStore(url)]);
    try {
      const tries = Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).claim('approve:1', 9_000, 1_000));
      expect((await Promise.all(tries)).filter(Boolean)).toHaveLength(1);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("a retrust on one instance bumps the other's epoch and replaces its baseline", async () => {
    const url = await freshUrl();
    const gateway = await openPostgresStore(url);
    const cli = await openPostgresStore(url);
    try {
      await gateway.createBaseline(ID, baselineOf(TOOLS), 1000);
      expect(await gateway.trustEpoch()).toBe(0);
      const next = baselineOf([tool('search', 'Changed.')], 'v2');
      await cli.retrust(ID, next, 2000);
      await cli.retrust(ID, next, 2500);
      expect(await gateway.trustEpoch()).toBe(2);
      expect((await gateway.get('github'))!.baseline).toEqual(next);
      // The gateway's TOFU cannot undo the CLI's decision.
      expect(await gateway.createBaseline(ID, baselineOf(TOOLS), 3000)).toBe(false);
    } finally {
      await Promise.all([gateway.close(), cli.close()]);
    }
  });

  it('a retrust is pushed to a watching instance, also after its listening connection was cut', async () => {
    const url = await freshUrl();
    const gateway = await openPostgresStore(url);
    const cli = await openPostgresStore(url);
    const listening = async () =>
      (
        await cli.pool.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'",
        )
      ).rows.map((r) => r.pid);
    try {
      let pushes = 0;
      gateway.watchTrust(() => {
        pushes++;
      });
      await eventually(async () => (await listening()).length === 1, 'the LISTEN connection');
      await cli.retrust(ID, baselineOf(TOOLS), 1000);
      await eventually(() => pushes === 1, 'the push of the first retrust');
      // The listening backend is killed: the store reconnects, and says so once (a push may be lost).
      const [pid] = await listening();
      await cli.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      await eventually(async () => {
        const now = await listening();
        return now.length === 1 && now[0] !== pid;
      }, 'a new LISTEN connection');
      await eventually(() => pushes === 2, 'the push after reconnecting');
      await cli.retrust(ID, baselineOf(TOOLS, 'v3'), 2000);
      await eventually(() => pushes === 3, 'the push of the retrust after the reconnect');
      expect(await gateway.trustEpoch()).toBe(2);
    } finally {
      await Promise.all([gateway.close(), cli.close()]);
    }
    // Closed: nothing listens any more.
    const probe = await openPostgresStore(url);
    const listeners = async () =>
      (await probe.pool.query("SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN %'")).rows.length;
    await eventually(async () => (await listeners()) === 0, 'no LISTEN connection after close');
    await probe.close();
  });

  it('refuses a database written by a newer schema, and leaves it as it was', async () => {
    const url = await freshUrl();
    const first = await openPostgresStore(url);
    await first.pool.query("UPDATE manifold_meta SET value = $1 WHERE key = 'schema_version'", [
      PG_MIGRATIONS.length + 1,
    ]);
    let error: unknown;
    try {
      await openPostgresStore(url);
    } catch (e) {
      error = e;
    }
    expect(error instanceof ManifoldError && error.code).toBe('ERR_CONFIG');
    expect(String(error)).toMatch(/newer Manifold/);
    const { rows } = await first.pool.query("SELECT value FROM manifold_meta WHERE key = 'schema_version'");
    expect(rows[0].value).toBe(PG_MIGRATIONS.length + 1);
    await first.close();
  });

  it('an unreachable or wrong database fails with a message that holds neither the URL nor its password', async () => {
    const url = `postgres://postgres:pw-sk-9f8e7d@127.0.0.1:${new URL(inject('postgresAdminUrl')).port}/no_such_database`;
    let error: unknown;
    try {
      await openPostgresStore(url);
    } catch (e) {
      error = e;
    }
    expect(error instanceof ManifoldError && error.code).toBe('ERR_CONFIG');
    const text = String((error as Error).message);
    expect(text).toMatch(/cannot open the Postgres state store \(gateway\.store\.postgres\)/);
    expect(text).toMatch(/no_such_database/);
    expect(text).not.toContain('pw-sk-9f8e7d');
    expect(text).not.toContain(url);
  });

  it('never writes env, headers, userinfo, query or interpolated values to a row', async () => {
    const secrets = ['sk-secret-123', 'sk-secret-path', 'sk-secret-arg'];
    const stdio = serverConfig({ env: { TOKEN: 'sk-secret-123' }, args: ['--key', 'sk-secret-arg'] });
    const http = serverConfig({
      name: 'remote',
      type: 'streamable-http',
      command: undefined,
      args: [],
      url: 'https://user:sk-secret-pw@mcp.example.com/sk-secret-path/mcp?key=sk-secret-q',
      headers: { Authorization: 'Bearer sk-secret-456' },
    });
    const store = await openPostgresStore(await freshUrl());
    try {
      for (const s of [stdio, http]) {
        const id = identityOf(s, secrets);
        await store.saveCatalog(id, TOOLS, 1000);
        await store.createBaseline(id, baselineOf(TOOLS), 1000);
        await store.retrust(id, baselineOf(TOOLS, 'v2'), 2000);
      }
      const { rows } = await store.pool.query('SELECT * FROM manifold_servers');
      const dump = JSON.stringify(rows);
      expect(rows).toHaveLength(2);
      for (const s of [...secrets, 'sk-secret-pw', 'sk-secret-q', 'sk-secret-456'])
        expect(dump).not.toContain(s);
      expect((await store.get('remote'))!.identity.target).toBe('https://mcp.example.com/[secret]/mcp');
    } finally {
      await store.close();
    }
  });
});
