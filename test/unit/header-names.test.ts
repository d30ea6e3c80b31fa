import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FiledIncomingMessage,
  filedNames,
  keptShapes,
  MAX_NAMES,
  MAX_SHAPES,
  repeatsName,
  shapedHeader,
} from '../../deploy/node/http/header-names.js';
import { bundleForChild } from '../helpers/dist.js';

// The gateway's request class files header names the way Node does, from what Node did the first
// time (#18). Two real servers, one with Node's class and one with the gateway's, get the same raw
// requests; their `req.headers` must be the same, repeats and case included.

interface Seen {
  headers: IncomingHttpHeaders;
  raw: string[];
  /** Built from a kept shape (the gateway's class only). */
  shaped: boolean;
  /** What the Node lane concludes about repeated names. */
  repeats: boolean;
  /** `shapedHeader` for each key of `headers` and two absent ones (the gateway's class only). */
  byPlace: Record<string, string | undefined | null>;
}

const ABSENT = ['constructor', 'x-absent'];

function listen(
  filed: boolean,
  joinDuplicateHeaders = false,
): Promise<{ server: Server; port: number; seen: Seen[] }> {
  const seen: Seen[] = [];
  const handler = (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => {
    seen.push({
      headers: { ...req.headers },
      raw: [...req.rawHeaders],
      shaped: (req as FiledIncomingMessage)._distinct === true,
      repeats: repeatsName(req),
      byPlace: Object.fromEntries(
        [...Object.keys(req.headers), ...ABSENT].map((key) => [key, filed ? shapedHeader(req, key) : null]),
      ),
    });
    req.resume();
    req.on('end', () => res.end('ok'));
  };
  const server = filed
    ? createServer({ IncomingMessage: FiledIncomingMessage, joinDuplicateHeaders }, handler)
    : createServer({ joinDuplicateHeaders }, handler);
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve({ server, port: typeof address === 'object' && address ? address.port : 0, seen });
    });
  });
}

/** One raw HTTP/1.1 request with these header lines, answered before it resolves. */
function send(port: number, lines: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(
        `POST /mcp HTTP/1.1\r\n${lines.map((l) => `${l}\r\n`).join('')}content-length: 2\r\nconnection: close\r\n\r\n{}`,
      );
    });
    socket.on('data', () => {});
    socket.on('end', () => resolve());
    socket.on('error', reject);
  });
}

const REQUESTS: string[][] = [
  ['Host: a', 'Content-Type: application/json', 'Accept: application/json, text/event-stream'],
  ['host: a', 'mcp-method: tools/call', 'mcp-name: s__echo', 'Mcp-Protocol-Version: 2026-07-28'],
  // repeats: joined, kept first, collected, and cookies joined with "; "
  ['host: a', 'x-note: one', 'X-Note: two', 'x-note: three'],
  ['host: a', 'authorization: Bearer one', 'Authorization: Bearer two', 'content-type: a', 'content-type: b'],
  ['host: a', 'set-cookie: a=1', 'Set-Cookie: b=2', 'cookie: c=3', 'Cookie: d=4'],
  ['host: a', 'user-agent: one', 'user-agent: two', 'accept: x', 'accept: y', 'mcp-session-id: s1'],
  // the same names again, now remembered
  ['host: a', 'mcp-method: tools/call', 'mcp-name: s__echo', 'Mcp-Protocol-Version: 2026-07-28'],
  [
    'host: a',
    'x-note: one',
    'X-Note: two',
    'set-cookie: a=1',
    'set-cookie: b=2',
    'cookie: c=3',
    'cookie: d=4',
  ],
  // names Node gives no special meaning, of many shapes
  [
    'host: a',
    `x-${'long'.repeat(20)}: v`,
    'x-empty:',
    'x-spaces:   padded   ',
    'constructor: c',
    '__proto__: p',
  ],
];

describe('FiledIncomingMessage', () => {
  let plain: Awaited<ReturnType<typeof listen>>;
  let filed: Awaited<ReturnType<typeof listen>>;
  beforeAll(async () => {
    plain = await listen(false);
    filed = await listen(true);
  });
  afterAll(() => {
    plain.server.close();
    filed.server.close();
  });

  it('builds the same req.headers as Node, repeated names and case included', async () => {
    for (const lines of REQUESTS) {
      await send(plain.port, lines);
      await send(filed.port, lines);
    }
    expect(filed.seen).toHaveLength(REQUESTS.length);
    for (let i = 0; i < REQUESTS.length; i++) {
      expect(filed.seen[i]!.raw).toEqual(plain.seen[i]!.raw);
      expect(filed.seen[i]!.headers, REQUESTS[i]!.join(' | ')).toEqual(plain.seen[i]!.headers);
    }
    // What the gateway relies on, spelled out: repeats joined, or the first kept.
    expect(filed.seen[2]!.headers['x-note']).toBe('one, two, three');
    expect(filed.seen[3]!.headers.authorization).toBe('Bearer one');
    expect(filed.seen[4]!.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(filed.seen[4]!.headers.cookie).toBe('c=3; d=4');
    expect(filed.seen[1]!.headers['mcp-protocol-version']).toBe('2026-07-28');
  });

  it('leaves a server that joins every repeat to Node, after names were remembered without it', async () => {
    const plainJoin = await listen(false, true);
    const filedJoin = await listen(true, true);
    try {
      for (const lines of REQUESTS) {
        await send(plainJoin.port, lines);
        await send(filedJoin.port, lines);
      }
      for (let i = 0; i < REQUESTS.length; i++) {
        expect(filedJoin.seen[i]!.headers, REQUESTS[i]!.join(' | ')).toEqual(plainJoin.seen[i]!.headers);
      }
      expect(filedJoin.seen[3]!.headers.authorization).toBe('Bearer one, Bearer two');
    } finally {
      plainJoin.server.close();
      filedJoin.server.close();
    }
  });

  it('remembers a bounded number of names and files the rest as Node does', async () => {
    const before = filedNames();
    expect(before).toBeGreaterThan(0);
    // More distinct names than it keeps: the first ones are remembered, the rest are not.
    const names = Array.from({ length: MAX_NAMES + 20 }, (_, i) => `x-many-${i}`);
    const batches: string[][] = [];
    for (let i = 0; i < names.length; i += 50) batches.push(names.slice(i, i + 50));
    for (const batch of batches) {
      const lines = ['host: a', ...batch.map((n) => `${n}: v`), `${batch[0]}: again`];
      await send(plain.port, lines);
      await send(filed.port, lines);
      expect(filed.seen.at(-1)!.headers).toEqual(plain.seen.at(-1)!.headers);
    }
    expect(filedNames()).toBe(MAX_NAMES);
  });

  it('builds a request whose names come in a kept order from that shape, the same as Node', async () => {
    const names = [
      'Host: a',
      'content-type: application/json',
      'mcp-method: tools/call',
      'mcp-name: s__echo',
    ];
    for (const value of ['one', 'two', 'three']) {
      const lines = [...names, `x-note: ${value}`];
      await send(plain.port, lines);
      await send(filed.port, lines);
      const got = filed.seen.at(-1)!;
      expect(got.headers).toEqual(plain.seen.at(-1)!.headers);
      expect(Object.keys(got.headers)).toEqual(Object.keys(plain.seen.at(-1)!.headers));
      expect(got.headers['x-note']).toBe(value);
      // The first request of an order is filed name by name; the next ones come from its shape.
      expect(got.shaped).toBe(value !== 'one');
      // A shaped request's header is found by its place, as the object has it; others are not.
      for (const [key, found] of Object.entries(got.byPlace)) {
        if (!got.shaped) expect(found, key).toBeNull();
        else expect(found, key).toBe(ABSENT.includes(key) ? undefined : got.headers[key]);
      }
      expect(got.repeats).toBe(false);
    }
    // The same names in another order are another shape, and still Node's object.
    const swapped = [
      'content-type: application/json',
      'Host: a',
      'mcp-method: tools/call',
      'mcp-name: s__echo',
    ];
    await send(plain.port, swapped);
    await send(filed.port, swapped);
    expect(filed.seen.at(-1)!.shaped).toBe(false);
    expect(filed.seen.at(-1)!.headers).toEqual(plain.seen.at(-1)!.headers);
  });

  it('never keeps a shape whose names repeat, collect into an array or are not plain keys', async () => {
    const orders = [
      ['host: a', 'x-note: one', 'X-Note: two'],
      ['host: a', 'set-cookie: a=1'],
      ['host: a', '__proto__: p', 'x-after: 1'],
      ['host: a', 'authorization: Bearer one', 'Authorization: Bearer two'],
    ];
    for (const lines of [...orders, ...orders, ...orders]) {
      await send(plain.port, lines);
      await send(filed.port, lines);
      const got = filed.seen.at(-1)!;
      expect(got.shaped, lines.join(' | ')).toBe(false);
      expect(got.headers, lines.join(' | ')).toEqual(plain.seen.at(-1)!.headers);
    }
    // The lane still sees the repeats and joins them itself.
    expect(filed.seen.at(-1)!.repeats).toBe(true);
    expect(filed.seen.at(-1)!.headers.authorization).toBe('Bearer one');
  });

  it('keeps a bounded number of shapes, and an order it let go is filed again as Node does', async () => {
    // Names filed earlier in this file: past MAX_NAMES (the test above), a new name is never kept.
    const known = ['x-note', 'accept', 'content-type', 'user-agent', 'mcp-method', 'mcp-name', 'cookie'];
    const order = (i: number) =>
      i < known.length ? ['host: a', `${known[i]}: v`] : [`${known[i - known.length]}: v`, 'host: a'];
    expect(known.length * 2).toBeGreaterThan(MAX_SHAPES + 3);
    for (let i = 0; i < MAX_SHAPES + 3; i++) {
      await send(filed.port, order(i));
      await send(filed.port, order(i));
      expect(filed.seen.at(-1)!.shaped).toBe(true);
    }
    expect(keptShapes()).toBe(MAX_SHAPES);
    // The first order was let go: its next request is filed name by name, and learned again.
    await send(plain.port, order(0));
    await send(filed.port, order(0));
    expect(filed.seen.at(-1)!.shaped).toBe(false);
    expect(filed.seen.at(-1)!.headers).toEqual(plain.seen.at(-1)!.headers);
    await send(filed.port, order(0));
    expect(filed.seen.at(-1)!.shaped).toBe(true);
  });

  it('gives back what code assigned to req.headers', () => {
    const req = new FiledIncomingMessage(null as unknown as import('node:net').Socket);
    req.rawHeaders = ['Host', 'a'];
    const assigned = { host: 'b' };
    req.headers = assigned;
    expect(req.headers).toBe(assigned);
    expect(repeatsName(req)).toBe(false);
  });

  it('fills a shape without made code where the host forbids it, the same as Node', async () => {
    // A child Node that refuses code from strings runs this module, bundled as it is, behind a
    // real server, next to Node's own class.
    const dir = mkdtempSync(join(tmpdir(), 'manifold-header-names-'));
    try {
      bundleForChild('deploy/node/http/header-names.ts', dir, 'header-names.mjs');
      writeFileSync(
        join(dir, 'child.mjs'),
        `import { createServer, request } from 'node:http';
import { FiledIncomingMessage, shapedHeader } from './header-names.mjs';
let madeCode = true;
try { new Function('return 1'); } catch { madeCode = false; }
const seen = [];
const handler = (req, res) => {
  seen.push({ headers: { ...req.headers }, shaped: req._distinct === true, byPlace: shapedHeader(req, 'mcp-name') });
  req.resume();
  req.on('end', () => res.end('ok'));
};
const listen = (server) => new Promise((r) => server.listen(0, '127.0.0.1', () => r(server.address().port)));
const filed = await listen(createServer({ IncomingMessage: FiledIncomingMessage }, handler));
const plain = await listen(createServer(handler));
const send = (port, value) => new Promise((r) => {
  const req = request({ port, host: '127.0.0.1', method: 'POST', path: '/mcp', agent: false,
    headers: { 'Content-Type': 'application/json', 'Mcp-Name': value, 'Mcp-Method': 'tools/call' } }, (res) => { res.resume(); res.on('end', r); });
  req.end('{}');
});
const out = [];
for (const value of ['one', 'two', 'three']) {
  await send(filed, value);
  await send(plain, value);
  const [f, p] = seen.splice(0);
  // The two servers' ports differ, so their Host values do.
  f.headers.host = p.headers.host;
  out.push({ same: JSON.stringify(f.headers) === JSON.stringify(p.headers), shaped: f.shaped, byPlace: f.byPlace, value: f.headers['mcp-name'] });
}
console.log(JSON.stringify({ madeCode, out }));
process.exit(0);
`,
      );
      const printed = execFileSync(
        process.execPath,
        ['--disallow-code-generation-from-strings', join(dir, 'child.mjs')],
        {
          encoding: 'utf8',
          timeout: 20_000,
        },
      );
      const { madeCode, out } = JSON.parse(printed) as {
        madeCode: boolean;
        out: { same: boolean; shaped: boolean; byPlace: string | null; value: string }[];
      };
      expect(madeCode).toBe(false);
      expect(out.map((o) => o.same)).toEqual([true, true, true]);
      expect(out.map((o) => o.value)).toEqual(['one', 'two', 'three']);
      expect(out.map((o) => o.shaped)).toEqual([false, true, true]);
      expect(out.map((o) => o.byPlace)).toEqual([null, 'two', 'three']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
