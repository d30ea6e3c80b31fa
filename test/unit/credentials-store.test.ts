/**
 * The CredentialStore contract (#19, src/store/credentials-types.ts), one suite run against the
 * memory store, SQLite (real better-sqlite3, the Node file and, through the same SqlExec, the
 * Durable Object) and a real Postgres (test/helpers/postgres.ts). Also: a database written by the
 * previous schema gains the credentials tables on open and keeps what it held.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PG_MIGRATIONS } from '../../deploy/node/store/postgres/schema.js';
import { openPostgresStore, type PostgresStateStore } from '../../deploy/node/store/postgres/store.js';
import { openSqliteStore } from '../../deploy/node/store/sqlite.js';
import { MemoryCredentialStore } from '../../src/store/credentials.js';
import type { CredentialStore, StoredToken } from '../../src/store/credentials-types.js';
import { MIGRATIONS } from '../../src/store/schema.js';
import { freshDatabase } from '../helpers/postgres.js';
import { ID, TOOLS } from '../shared/store-contract.js';

interface Opened {
  store: CredentialStore;
  /** Writes a column of a token row behind the store's back (undefined: the store has no rows to corrupt). */
  corrupt?(column: string, value: string | number | null): Promise<void>;
  /** Column, a value no Manifold writes, the value it had. */
  corruptions?: [string, string | number | null, string | number | null][];
  close(): Promise<void>;
}

const ISSUER = 'https://as.example.com';
const token = (extra: Partial<Omit<StoredToken, 'version'>> = {}): Omit<StoredToken, 'version'> => ({
  issuer: ISSUER,
  resource: 'https://mcp.example.com/mcp',
  sealed: 'v1.aXY.Y2lwaGVy',
  scope: ['repo', 'offline_access'],
  expiresAt: 1_700_000_000_000,
  ...extra,
});

function credentialContract(name: string, open: () => Promise<Opened>, sql = true): void {
  describe(`${name}: the credential store contract`, () => {
    let opened: Opened;
    let store: CredentialStore;
    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });
    afterEach(async () => {
      await opened.close();
    });

    it('stores a client per key and issuer, replaces it, and drops every other issuer', async () => {
      expect(await store.getClient('github', ISSUER)).toBeUndefined();
      const dcr = {
        clientId: 'c1',
        secret: 'v1.sealed',
        authMethod: 'client_secret_basic',
        source: 'dcr',
        redirectUri: 'https://gw.example.com/oauth/callback',
      } as const;
      await store.putClient('github', ISSUER, dcr, 1000);
      expect(await store.getClient('github', ISSUER)).toEqual(dcr);
      // The CLI's own registration is another key; a public client has no secret.
      const cli = {
        clientId: 'c2',
        authMethod: 'none',
        source: 'dcr',
        redirectUri: 'http://127.0.0.1:5000/oauth/callback',
      } as const;
      await store.putClient('github#cli', ISSUER, cli, 1000);
      expect(await store.getClient('github#cli', ISSUER)).toEqual(cli);
      const cimd = {
        clientId: 'https://gw.example.com/oauth/client-metadata.json',
        authMethod: 'none',
        source: 'cimd',
        redirectUri: dcr.redirectUri,
      } as const;
      await store.putClient('github', ISSUER, cimd, 2000);
      expect(await store.getClient('github', ISSUER)).toEqual(cimd);
      await store.putClient('github', 'https://other.example.com', dcr, 2000);
      await store.putClient('github', 'https://third.example.com', dcr, 2000);
      expect(await store.dropClientsExcept('github', ISSUER)).toBe(2);
      expect(await store.getClient('github', 'https://other.example.com')).toBeUndefined();
      expect(await store.getClient('github', ISSUER)).toEqual(cimd);
      expect(await store.getClient('github#cli', ISSUER)).toEqual(cli);
      expect(await store.dropClientsExcept('nothing', ISSUER)).toBe(0);
    });

    it('writes a token once when there is none, then only over the version read (compare-and-set)', async () => {
      expect(await store.getToken('github', '')).toBeUndefined();
      expect(await store.putToken('github', '', token(), undefined, 1000)).toBe(true);
      const first = await store.getToken('github', '');
      expect(first).toEqual({ ...token(), version: 1 });
      // A second first write (another instance that also saw no row) loses.
      expect(await store.putToken('github', '', token({ sealed: 'v1.other' }), undefined, 1000)).toBe(false);
      // Two refreshes raced from version 1: exactly one is written.
      const a = token({ sealed: 'v1.a', expiresAt: 2_000 });
      const b = token({ sealed: 'v1.b', expiresAt: 3_000 });
      const won = await Promise.all([
        store.putToken('github', '', a, 1, 2000),
        store.putToken('github', '', b, 1, 2000),
      ]);
      expect(won.filter(Boolean)).toHaveLength(1);
      const now = await store.getToken('github', '');
      expect(now).toEqual({ ...(won[0] ? a : b), version: 2 });
      expect(await store.putToken('github', '', a, 5, 3000)).toBe(false);
      // No expiry and no scope survive as such.
      const { expiresAt: _, ...bare } = token({ scope: [] });
      expect(await store.putToken('github', '', bare, 2, 3000)).toBe(true);
      expect(await store.getToken('github', '')).toEqual({ ...bare, version: 3 });
    });

    it('49.16: a login replaces whatever is stored, one version past it, and a refresh of the older version then loses', async () => {
      // No row yet: the login's token is the first.
      expect(await store.replaceToken('github', '', token({ sealed: 'v1.cli' }), 1000)).toBe(1);
      // Another process wrote meanwhile (the CLI, another instance): this process read version 1.
      expect(await store.putToken('github', '', token({ sealed: 'v1.refreshed' }), 1, 1500)).toBe(true);
      // A login finishing here, whatever version it last saw, is the newest token.
      expect(
        await store.replaceToken('github', '', token({ sealed: 'v1.http', scope: ['a', 'b'] }), 2000),
      ).toBe(3);
      expect(await store.getToken('github', '')).toEqual({
        ...token({ sealed: 'v1.http', scope: ['a', 'b'] }),
        version: 3,
      });
      // A refresh that continued version 2 never undoes it.
      expect(await store.putToken('github', '', token({ sealed: 'v1.late' }), 2, 2500)).toBe(false);
      expect((await store.getToken('github', ''))?.sealed).toBe('v1.http');
      // Two logins at once: both are written, one after the other, and versions still order them.
      const versions = await Promise.all([
        store.replaceToken('github', '', token({ sealed: 'v1.x' }), 3000),
        store.replaceToken('github', '', token({ sealed: 'v1.y' }), 3000),
      ]);
      expect([...versions].sort()).toEqual([4, 5]);
      const last = versions[0] === 5 ? 'v1.x' : 'v1.y';
      expect(await store.getToken('github', '')).toMatchObject({ sealed: last, version: 5 });
    });

    it('keeps subjects and servers apart, lists without the sealed column, deletes one or all', async () => {
      await store.putToken('github', '["t","alice"]', token({ sealed: 'v1.alice' }), undefined, 1000);
      await store.putToken(
        'github',
        '["t","bob"]',
        token({ sealed: 'v1.bob', scope: ['read'] }),
        undefined,
        1000,
      );
      await store.putToken('github', '', token({ sealed: 'v1.gw' }), undefined, 1000);
      await store.putToken('linear', '["t","alice"]', token({ sealed: 'v1.linear' }), undefined, 1000);
      expect((await store.getToken('github', '["t","alice"]'))?.sealed).toBe('v1.alice');
      expect((await store.getToken('linear', '["t","alice"]'))?.sealed).toBe('v1.linear');
      const listed = await store.listTokens('github');
      expect(listed).toEqual([
        { subject: '', issuer: ISSUER, scope: ['repo', 'offline_access'], expiresAt: 1_700_000_000_000 },
        {
          subject: '["t","alice"]',
          issuer: ISSUER,
          scope: ['repo', 'offline_access'],
          expiresAt: 1_700_000_000_000,
        },
        { subject: '["t","bob"]', issuer: ISSUER, scope: ['read'], expiresAt: 1_700_000_000_000 },
      ]);
      expect(JSON.stringify(listed)).not.toContain('v1.');
      expect(await store.deleteToken('github', '["t","bob"]')).toBe(1);
      expect(await store.deleteToken('github', '["t","bob"]')).toBe(0);
      expect(await store.deleteToken('github')).toBe(2);
      expect(await store.listTokens('github')).toEqual([]);
      expect((await store.getToken('linear', '["t","alice"]'))?.sealed).toBe('v1.linear');
      // After a delete, a first write is a first write again.
      expect(await store.putToken('github', '', token(), undefined, 4000)).toBe(true);
      expect((await store.getToken('github', ''))?.version).toBe(1);
    });

    // Only a SQL store has columns that something else could have written.
    if (!sql) return;
    it('reads a row whose columns are not what a Manifold writes as absent, never a crash', async () => {
      await store.putToken('github', '', token(), undefined, 1000);
      for (const [column, bad, good] of opened.corruptions ?? []) {
        await opened.corrupt?.(column, bad);
        expect(await store.getToken('github', '')).toBeUndefined();
        await opened.corrupt?.(column, good);
        expect(await store.getToken('github', '')).toEqual({ ...token(), version: 1 });
      }
    });
  });
}

credentialContract(
  'MemoryCredentialStore',
  async () => ({ store: new MemoryCredentialStore(), close: async () => {} }),
  false,
);

let dir: string;
let files = 0;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'manifold-credentials-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});
const freshFile = () => join(dir, `state-${++files}.db`);

credentialContract('SqlCredentialStore (SQLite)', async () => {
  const path = freshFile();
  const opened = openSqliteStore(path);
  return {
    store: opened.credentials,
    async corrupt(column, value) {
      const db = new Database(path);
      db.prepare(`UPDATE oauth_tokens SET ${column} = ?`).run(value);
      db.close();
    },
    // SQLite keeps a text in an integer column (a number in a text one becomes text).
    corruptions: [
      ['sealed', '', token().sealed],
      ['version', 'one', 1],
      ['expires_at', 'soon', token().expiresAt ?? null],
    ],
    close: async () => opened.close(),
  };
});

describe('SQLite: a database of the previous schema', () => {
  it('gains the credentials tables on open and keeps its rows', async () => {
    const path = freshFile();
    const db = new Database(path);
    db.exec('CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL)');
    // The schema just before the credentials tables (later migrations may follow them).
    const before = MIGRATIONS.findIndex((m) => m.includes('CREATE TABLE oauth_clients'));
    for (const statement of MIGRATIONS.slice(0, before)) db.exec(statement);
    db.prepare("INSERT INTO meta (key, value) VALUES ('schema_version', ?)").run(before);
    db.prepare(
      "INSERT INTO servers (name, transport, target, catalog, catalog_at, created_at) VALUES ('github', ?, ?, ?, 1, 1)",
    ).run(ID.transport, ID.target, JSON.stringify(TOOLS));
    db.close();
    const opened = openSqliteStore(path);
    try {
      expect((await opened.get('github'))?.catalog).toEqual(TOOLS);
      expect(await opened.credentials.putToken('github', '', token(), undefined, 1000)).toBe(true);
      expect((await opened.credentials.getToken('github', ''))?.version).toBe(1);
    } finally {
      opened.close();
    }
    const check = new Database(path);
    expect(check.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe(
      MIGRATIONS.length,
    );
    check.close();
    expect(MIGRATIONS.slice(before, before + 2).join()).toMatch(/oauth_clients[\s\S]*oauth_tokens/);
  });
});

// A real Postgres, started for this file; a fresh database per store.
let databases = 0;
const freshUrl = () => freshDatabase(`credentials_${++databases}`);

describe('Postgres', () => {
  credentialContract('SqlCredentialStore (Postgres)', async () => {
    const opened = await openPostgresStore(await freshUrl());
    return {
      store: opened.credentials,
      async corrupt(column, value) {
        await opened.pool.query(`UPDATE manifold_oauth_tokens SET ${column} = $1`, [value]);
      },
      corruptions: [['sealed', '', token().sealed]],
      close: async () => opened.close(),
    };
  });

  it('two instances racing a refresh on one database: one write wins, both read it', async () => {
    const url = await freshUrl();
    const [a, b] = await Promise.all([openPostgresStore(url), openPostgresStore(url)]);
    try {
      expect(await a.credentials.putToken('github', '', token(), undefined, 1000)).toBe(true);
      const tries = Array.from({ length: 6 }, (_, i) =>
        (i % 2 ? a : b).credentials.putToken('github', '', token({ sealed: `v1.${i}` }), 1, 2000),
      );
      expect((await Promise.all(tries)).filter(Boolean)).toHaveLength(1);
      const [ra, rb] = await Promise.all([
        a.credentials.getToken('github', ''),
        b.credentials.getToken('github', ''),
      ]);
      expect(ra?.version).toBe(2);
      expect(rb).toEqual(ra);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('a database of the previous schema gains the credentials tables on open and keeps its rows', async () => {
    const url = await freshUrl();
    const pool = new pg.Pool({ connectionString: url });
    // The schema just before the credentials tables (later migrations may follow them).
    const before = PG_MIGRATIONS.findIndex((m) => m.includes('CREATE TABLE manifold_oauth_clients'));
    try {
      await pool.query('CREATE TABLE manifold_meta (key TEXT PRIMARY KEY NOT NULL, value BIGINT NOT NULL)');
      for (const statement of PG_MIGRATIONS.slice(0, before)) await pool.query(statement);
      await pool.query("INSERT INTO manifold_meta (key, value) VALUES ('schema_version', $1)", [before]);
      await pool.query(
        "INSERT INTO manifold_servers (name, transport, target, catalog, catalog_at, created_at) VALUES ('github', $1, $2, $3, 1, 1)",
        [ID.transport, ID.target, JSON.stringify(TOOLS)],
      );
    } finally {
      await pool.end();
    }
    const opened: PostgresStateStore = await openPostgresStore(url);
    try {
      expect((await opened.get('github'))?.catalog).toEqual(TOOLS);
      expect(await opened.credentials.putToken('github', '', token(), undefined, 1000)).toBe(true);
      expect(await opened.credentials.getToken('github', '')).toEqual({ ...token(), version: 1 });
      const { rows } = await opened.pool.query(
        "SELECT value FROM manifold_meta WHERE key = 'schema_version'",
      );
      expect(rows[0].value).toBe(PG_MIGRATIONS.length);
      expect(PG_MIGRATIONS.slice(before, before + 2).join()).toMatch(
        /manifold_oauth_clients[\s\S]*manifold_oauth_tokens/,
      );
    } finally {
      await opened.close();
    }
  });
});
