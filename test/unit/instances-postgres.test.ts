import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresInstances, STALE_MS } from '../../deploy/node/store/postgres/instances.js';
import { openPostgresStore, type PostgresStateStore } from '../../deploy/node/store/postgres/store.js';
import { freshDatabase } from '../helpers/postgres.js';

// The registry of instances and the forward itself (deploy/node/store/postgres/instances.ts), on a real Postgres
// and a real HTTP listener standing in for the holder; clocks are given, so staleness is exact.
let store: PostgresStateStore;
let holder: Server;
let origin: string;
const seen: { path?: string; headers?: IncomingHttpHeaders; body?: string }[] = [];

beforeAll(async () => {
  store = await openPostgresStore(await freshDatabase('instances'));
  holder = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => {
      body += c;
    });
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers, body });
      if (req.url === '/moved') {
        res.writeHead(307, { location: 'http://169.254.169.254/' }).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-holder': 'yes' });
      res.write('event: message\ndata: {"one":1}\n\n');
      setTimeout(() => res.end('event: message\ndata: {"two":2}\n\n'), 20);
    });
  });
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(holder.address() as AddressInfo).port}`;
}, 600_000);

afterAll(async () => {
  holder?.close();
  await store?.close();
});

const request = (path = '/mcp') => ({
  path,
  headers: { host: 'mcp.example.com', authorization: 'Bearer t', 'content-type': 'application/json' },
  body: '{"jsonrpc":"2.0","id":1,"method":"tools/call"}',
  signal: new AbortController().signal,
});

describe('PostgresInstances', () => {
  it('forwards to a registered instance: same path, body and Host; the answer streams back unchanged', async () => {
    const a = new PostgresInstances(store.pool);
    const b = new PostgresInstances(store.pool);
    await a.register(origin);
    try {
      const answer = await b.send(a.id, request('/mcp/ops'));
      expect(answer?.status).toBe(200);
      expect(answer?.headers.get('x-holder')).toBe('yes');
      expect(await answer?.text()).toBe(
        'event: message\ndata: {"one":1}\n\nevent: message\ndata: {"two":2}\n\n',
      );
      const got = seen.at(-1)!;
      expect(got.path).toBe('/mcp/ops');
      expect(got.body).toBe(request().body);
      expect(got.headers?.host).toBe('mcp.example.com');
      expect(got.headers?.authorization).toBe('Bearer t');
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('an unknown id, a stale row, a stopped instance and a redirect are all "no answer"', async () => {
    let clock = 1_000_000;
    const a = new PostgresInstances(store.pool, undefined, () => clock);
    const b = new PostgresInstances(store.pool, undefined, () => clock);
    try {
      expect(await b.send('no-such-instance', request())).toBeUndefined();
      await a.register(origin);
      expect((await b.send(a.id, request()))?.status).toBe(200);
      // Not seen for longer than STALE_MS (its heartbeat stopped): gone.
      clock += STALE_MS + 1;
      expect(await b.send(a.id, request())).toBeUndefined();
      // A redirect is never followed.
      const m = new PostgresInstances(store.pool, undefined, () => clock);
      await m.register(`${origin}`);
      const before = seen.length;
      expect(await b.send(m.id, request('/moved'))).toBeUndefined();
      expect(seen.length).toBe(before + 1);
      await m.close();
      // Closed: out of the registry at once.
      expect(await b.send(m.id, request())).toBeUndefined();
      const { rows } = await store.pool.query('SELECT id FROM manifold_instances WHERE id = $1', [m.id]);
      expect(rows).toEqual([]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('nothing listening at a fresh row: no answer, not a throw', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const dead = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const a = new PostgresInstances(store.pool);
    const b = new PostgresInstances(store.pool);
    try {
      await a.register(dead);
      expect(await b.send(a.id, request())).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
    }
  });
});
