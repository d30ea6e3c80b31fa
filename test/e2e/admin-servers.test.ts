import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern } from '../helpers/clients.js';
import { EVERYTHING, eventually, MEMORY, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { freshDatabase } from '../helpers/postgres.js';

/**
 * #52: servers through the admin API. Real upstreams (server-everything from the file,
 * server-memory added through the API), clients of both eras seeing the merged catalog, a dry run
 * that answers with the config file's own errors and a diff, the file's servers locked, every
 * change audited with who made it, kept across a restart (SQLite) and applied by every instance
 * sharing a store (Postgres).
 */
type Obj = Record<string, unknown>;

const api = async (gw: TestGateway, method: string, path: string, body?: unknown) => {
  const r = await fetch(`${new URL(gw.url).origin}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: r.status, body: (await r.json()) as Obj };
};
const toolNames = async (h: AnyHandle): Promise<string[]> =>
  (h.era === 'legacy'
    ? (await h.client.listTools()).tools
    : (await h.client.listTools(undefined, { cacheMode: 'bypass' })).tools
  ).map((t) => t.name);
const MEM = { command: process.execPath, args: [MEMORY] };

describe('servers through the admin API (#52)', () => {
  let dir: string;
  let gw: TestGateway;
  const clients: AnyHandle[] = [];
  const raw = () => ({
    mcpServers: { ev: { command: process.execPath, args: [EVERYTHING, 'stdio'] } },
    gateway: { store: { path: join(dir, 'state.db') } },
  });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mf-admin-servers-'));
    // A stored server's ${VAR} is read where the host keeps it: on Node, the environment.
    process.env.MEM_TOKEN = 'memory-secret-value-123';
    gw = await startTestGateway(raw(), { trustPollMs: 200 });
    clients.push(await connectLegacy(gw.url), await connectModern(gw.url));
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the file servers with their source, state and era, and reads one without its secrets', async () => {
    const list = await api(gw, 'GET', '/admin/servers');
    expect(list.status).toBe(200);
    expect(list.body.servers).toEqual([
      expect.objectContaining({
        name: 'ev',
        source: 'file',
        editable: false,
        transport: 'stdio',
        state: 'ready',
        era: 'legacy',
      }),
    ]);
    const one = await api(gw, 'GET', '/admin/servers/ev');
    expect(one.body).toMatchObject({ name: 'ev', config: { type: 'stdio', env: {} } });
    expect((await api(gw, 'GET', '/admin/servers/nope')).status).toBe(404);
  });

  it("a dry run answers with the config file's errors, paths and fixes, applying nothing", async () => {
    const bad = await api(gw, 'POST', '/admin/servers?dryRun=1', {
      name: 'mem',
      config: {
        command: process.execPath,
        args: [MEMORY],
        timeoutMs: -5,
        headers: { Authorization: 'Bearer s3cr3t-token' },
      },
    });
    expect(bad.status).toBe(200);
    expect(bad.body.applied).toBe(false);
    const errors = bad.body.errors as { path: string; message: string; fix?: string }[];
    const paths = errors.map((e) => e.path);
    expect(paths).toContain('mcpServers.mem.timeoutMs');
    expect(paths).toContain('mcpServers.mem.headers.Authorization');
    expect(errors.every((e) => typeof e.message === 'string')).toBe(true);
    expect(JSON.stringify(bad.body)).not.toContain('s3cr3t-token');
    const good = await api(gw, 'POST', '/admin/servers?dryRun=1', { name: 'mem', config: MEM });
    expect(good.body).toMatchObject({ errors: [], applied: false, diff: { change: 'added' } });
    expect((await api(gw, 'GET', '/admin/servers/mem')).status).toBe(404);
    // The same errors without a dry run are a 400, and nothing is stored.
    expect((await api(gw, 'POST', '/admin/servers', { name: 'mem', config: { command: 42 } })).status).toBe(
      400,
    );
  });

  it('I4: adds a server both eras see, changes it, and removes it; each change an audit line naming who', async () => {
    const added = await api(gw, 'POST', '/admin/servers', {
      name: 'mem',
      config: { ...MEM, env: { MEMORY_NOTE: '${MEM_TOKEN}' } },
    });
    expect(added.body).toMatchObject({ errors: [] });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ applied: true, diff: { change: 'added' } });
    for (const c of clients) {
      await eventually(async () => (await toolNames(c)).includes('mem__read_graph'), `${c.era} sees mem`);
    }
    const read = await api(gw, 'GET', '/admin/servers/mem');
    expect(read.body).toMatchObject({
      source: 'api',
      editable: true,
      updatedBy: 'anonymous',
      // As written: the reference, never the value it stands for.
      config: { env: { MEMORY_NOTE: '${MEM_TOKEN}' } },
    });
    expect(JSON.stringify(read.body)).not.toContain('memory-secret-value-123');
    expect((await api(gw, 'POST', '/admin/servers', { name: 'mem', config: MEM })).status).toBe(409);

    const retuned = { ...MEM, env: { MEMORY_NOTE: '${MEM_TOKEN}' }, tools: { deny: ['delete_*'] } };
    const dry = await api(gw, 'PUT', '/admin/servers/mem?dryRun=1', { config: retuned });
    expect(dry.body).toMatchObject({
      applied: false,
      diff: { change: 'retuned', fields: expect.arrayContaining(['tools']) },
    });
    const changed = await api(gw, 'PUT', '/admin/servers/mem', { config: retuned });
    expect(changed.status).toBe(200);
    for (const c of clients) {
      await eventually(
        async () => !(await toolNames(c)).includes('mem__delete_entities'),
        `${c.era} loses delete_entities`,
      );
      expect(await toolNames(c)).toContain('mem__read_graph');
    }

    const removed = await api(gw, 'DELETE', '/admin/servers/mem');
    expect(removed.body).toMatchObject({ applied: true, diff: { change: 'removed' } });
    for (const c of clients) {
      await eventually(
        async () => !(await toolNames(c)).some((n) => n.startsWith('mem__')),
        `${c.era} loses mem`,
      );
    }
    const actions = gw.logs.filter((l) => l.event === 'audit.admin').map((l) => [l.action, l.server, l.by]);
    expect(actions).toEqual(
      expect.arrayContaining([
        ['server.add', 'mem', 'anonymous'],
        ['server.change', 'mem', 'anonymous'],
        ['server.remove', 'mem', 'anonymous'],
      ]),
    );
  });

  it("the file's servers are locked by default: no change, no override, no removal", async () => {
    expect((await api(gw, 'PUT', '/admin/servers/ev', { config: MEM })).status).toBe(409);
    expect((await api(gw, 'DELETE', '/admin/servers/ev')).status).toBe(409);
    expect((await api(gw, 'POST', '/admin/servers', { name: 'ev', config: MEM })).status).toBe(409);
    expect((await api(gw, 'DELETE', '/admin/servers/nope')).status).toBe(404);
  });

  it('I4: a server added through the API survives a restart (SQLite)', async () => {
    expect((await api(gw, 'POST', '/admin/servers', { name: 'kept', config: MEM })).status).toBe(201);
    for (const c of clients) await c.close();
    clients.length = 0;
    await gw.stop();
    gw = await startTestGateway(raw(), { trustPollMs: 200 });
    const c = await connectModern(gw.url);
    clients.push(c);
    await eventually(
      async () => (await toolNames(c)).includes('kept__read_graph'),
      'the stored server is back',
    );
    expect((await api(gw, 'GET', '/admin/servers/kept')).body).toMatchObject({
      source: 'api',
      state: 'ready',
    });
  });
});

describe('servers through the admin API, shared by two instances on Postgres (#52)', () => {
  const gateways: TestGateway[] = [];
  const clients: AnyHandle[] = [];

  beforeAll(async () => {
    const url = await freshDatabase('admin_servers');
    const raw = {
      mcpServers: { ev: { command: process.execPath, args: [EVERYTHING, 'stdio'] } },
      gateway: { store: { postgres: '${MANIFOLD_PG_URL}' } },
    };
    const env = { MANIFOLD_PG_URL: url };
    gateways.push(
      ...(await Promise.all([
        startTestGateway(raw, { env, trustPollMs: 200 }),
        startTestGateway(raw, { env, trustPollMs: 200 }),
      ])),
    );
    clients.push(await connectLegacy(gateways[1]!.url), await connectModern(gateways[1]!.url));
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    for (const g of gateways) await g.stop();
  });

  it('a server added on one instance is served by the other within seconds, and removed likewise', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    expect((await api(a, 'POST', '/admin/servers', { name: 'mem', config: MEM })).status).toBe(201);
    for (const c of clients) {
      await eventually(
        async () => (await toolNames(c)).includes('mem__read_graph'),
        `${c.era} on B sees mem`,
        15_000,
      );
    }
    expect((await api(b, 'GET', '/admin/servers/mem')).body).toMatchObject({
      source: 'api',
      updatedBy: 'anonymous',
    });
    expect((await api(b, 'DELETE', '/admin/servers/mem')).status).toBe(200);
    await eventually(
      async () => (await api(a, 'GET', '/admin/servers/mem')).status === 404,
      'A drops mem',
      15_000,
    );
  });
});
