import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openConfiguredStore } from '../../deploy/node/store/open.js';
import { openSqliteStore } from '../../deploy/node/store/sqlite.js';
import { ManifoldError } from '../../src/errors.js';
import { MIGRATIONS } from '../../src/store/schema.js';
import { identityOf, MemoryStateStore, sameIdentity } from '../../src/store/state.js';
import {
  baselineOf,
  ID,
  type StoreFixture,
  serverConfig,
  storeContract,
  TOOLS,
  tool,
} from '../shared/store-contract.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'manifold-store-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const memory: StoreFixture = {
  open: async () => new MemoryStateStore(),
  async corrupt(store, name, column, text) {
    // Reaches into the private rows: the memory store keeps the same JSON text a database holds.
    const rows = (store as unknown as { rows: Map<string, Record<string, unknown>> }).rows;
    rows.get(name)![column] = text;
  },
};

const sqlite: StoreFixture = {
  open: async () => openSqliteStore(join(dir, 'state', 'manifold.db')),
  async corrupt(_store, name, column, text) {
    const db = new Database(join(dir, 'state', 'manifold.db'));
    db.prepare(`UPDATE servers SET ${column} = ? WHERE name = ?`).run(text, name);
    db.close();
  },
};

storeContract('MemoryStateStore', memory);
storeContract('SqlStateStore over SQLite', sqlite);

describe('identityOf', () => {
  it('is the command line for stdio, without env or cwd', async () => {
    const id = identityOf(serverConfig({ env: { TOKEN: 'sk-1' }, cwd: '/home/me' }));
    expect(id).toEqual({ name: 'github', transport: 'stdio', target: '["npx","-y","@example/github-mcp"]' });
  });

  it('is scheme, host and path for HTTP: no userinfo, query or fragment', async () => {
    const id = identityOf(
      serverConfig({
        type: 'streamable-http',
        command: undefined,
        args: [],
        url: 'https://me:pw@MCP.example.com:8443/v1/mcp?key=abc#x',
        headers: { Authorization: 'Bearer x' },
      }),
    );
    expect(id).toEqual({
      name: 'github',
      transport: 'streamable-http',
      target: 'https://mcp.example.com:8443/v1/mcp',
    });
  });

  it('redacts interpolated secrets, so rotating one keeps the identity', async () => {
    const config = (key: string) =>
      serverConfig({ type: 'sse', args: [], url: `https://mcp.example.com/${key}/sse`, command: undefined });
    const a = identityOf(config('key-aaaa'), ['key-aaaa']);
    const b = identityOf(config('key-bbbb'), ['key-bbbb']);
    expect(a.target).toBe('https://mcp.example.com/[secret]/sse');
    expect(sameIdentity(a, b)).toBe(true);
    const stdio = identityOf(serverConfig({ args: ['--token', 'tok-123456'] }), ['tok-123', 'tok-123456']);
    // Longest first: a secret that contains another is redacted whole, not as "[secret]456".
    expect(stdio.target).toBe('["npx","--token","[secret]"]');
  });
});

describe('SqlStateStore on a SQLite file', () => {
  const path = () => join(dir, 'state', 'manifold.db');

  it('creates its directory 0700 and file 0600, in WAL mode', async () => {
    openSqliteStore(path()).close();
    expect(statSync(join(dir, 'state')).mode & 0o777).toBe(0o700);
    expect(statSync(path()).mode & 0o777).toBe(0o600);
    const db = new Database(path());
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    db.close();
  });

  it('migrates idempotently: reopening, or opening twice at once, keeps version and data', async () => {
    const a = openSqliteStore(path());
    const b = openSqliteStore(path());
    await a.saveCatalog(ID, TOOLS, 1000);
    await a.createBaseline(ID, baselineOf(TOOLS), 1000);
    a.close();
    b.close();
    const c = openSqliteStore(path());
    expect(await c.get('github')).toMatchObject({ catalog: TOOLS, baseline: baselineOf(TOOLS) });
    c.close();
    const db = new Database(path());
    expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe(
      MIGRATIONS.length,
    );
    db.close();
  });

  it('refuses a database written by a newer schema', async () => {
    openSqliteStore(path()).close();
    const db = new Database(path());
    db.prepare("UPDATE meta SET value = ? WHERE key = 'schema_version'").run(MIGRATIONS.length + 1);
    db.close();
    let error: unknown;
    try {
      openSqliteStore(path());
    } catch (e) {
      error = e;
    }
    expect(error instanceof ManifoldError && error.code).toBe('ERR_CONFIG');
    expect(String((error as Error).message)).toMatch(/newer Manifold/);
    // The refusal left the file as it was.
    const again = new Database(path());
    expect(again.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe(
      MIGRATIONS.length + 1,
    );
    again.close();
  });

  it("two connections see each other's retrust through the epoch", async () => {
    const gateway = openSqliteStore(path());
    const cli = openSqliteStore(path());
    await gateway.saveCatalog(ID, TOOLS, 1000);
    await gateway.createBaseline(ID, baselineOf(TOOLS), 1000);
    expect((await cli.get('github'))!.baseline).toEqual(baselineOf(TOOLS));
    expect(await gateway.trustEpoch()).toBe(0);

    const next = baselineOf([tool('search', 'Changed.')], 'v2');
    await cli.retrust(ID, next, 2000);
    expect(await gateway.trustEpoch()).toBe(1);
    expect((await gateway.get('github'))!.baseline).toEqual(next);
    // The gateway's TOFU cannot undo the CLI's decision.
    expect(await gateway.createBaseline(ID, baselineOf(TOOLS), 3000)).toBe(false);
    gateway.close();
    cli.close();
  });

  it('never writes env, headers, userinfo, query or interpolated values to disk', async () => {
    const secrets = ['sk-secret-123', 'sk-secret-456', 'sk-secret-path', 'sk-secret-arg'];
    const stdio = serverConfig({
      env: { TOKEN: 'sk-secret-123' },
      cwd: '/srv/sk-secret-cwd',
      args: ['--key', 'sk-secret-arg'],
    });
    const http = serverConfig({
      name: 'remote',
      type: 'streamable-http',
      command: undefined,
      args: [],
      url: 'https://user:sk-secret-pw@mcp.example.com/sk-secret-path/mcp?key=sk-secret-q',
      headers: { Authorization: 'Bearer sk-secret-456' },
    });
    const store = openSqliteStore(path());
    for (const server of [stdio, http]) {
      const id = identityOf(server, secrets);
      await store.saveCatalog(id, TOOLS, 1000);
      await store.createBaseline(id, baselineOf(TOOLS), 1000);
      await store.retrust(id, baselineOf(TOOLS, 'v2'), 2000);
    }
    // Read the WAL while it still holds the writes, then again after close has checkpointed.
    const check = () => {
      const files = readdirSync(join(dir, 'state'));
      expect(files).toContain('manifold.db');
      for (const f of files) {
        const bytes = readFileSync(join(dir, 'state', f));
        for (const s of [...secrets, 'sk-secret-pw', 'sk-secret-q', 'sk-secret-cwd']) {
          expect(bytes.includes(s), `${s} in ${f}`).toBe(false);
        }
      }
      return files;
    };
    expect(check()).toContain('manifold.db-wal');
    store.close();
    check();
    const reopened = openSqliteStore(path());
    expect((await reopened.get('remote'))!.identity.target).toBe('https://mcp.example.com/[secret]/mcp');
    reopened.close();
  });
});

describe('openConfiguredStore: a SQLite file that cannot be the store', () => {
  it('names the setting, the file and the fix beside SQLite’s own words', async () => {
    const notADatabase = join(dir, 'notes.txt');
    writeFileSync(notADatabase, 'these are notes, not a SQLite file\n'.repeat(200));
    const failure = await openConfiguredStore({ path: notADatabase }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ManifoldError);
    expect((failure as ManifoldError).code).toBe('ERR_CONFIG');
    const message = (failure as Error).message;
    expect(message).toContain(`gateway.store.path, ${notADatabase}`);
    expect(message).toContain('file is not a database');
    expect(message).toContain('"store": false');
    // A folder where the file should be: the same shape of error.
    const folder = join(dir, 'a-folder.db');
    mkdirSync(folder);
    const second = await openConfiguredStore({ path: folder }).catch((e: unknown) => e);
    expect((second as Error).message).toContain(`gateway.store.path, ${folder}`);
  });
});
