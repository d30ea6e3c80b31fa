import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client as ModernClient } from '@modelcontextprotocol/client';
import { StdioClientTransport as ModernStdio } from '@modelcontextprotocol/client/stdio';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as LegacyStdio } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DRIFT } from '../helpers/clients.js';
import { CLI, run } from '../helpers/dist.js';
import { testIssuer } from '../helpers/factories.js';
import { eventually, ROOT } from '../helpers/harness.js';

/**
 * #54: `manifold stdio`, the gateway for a client that only starts stdio servers. The built CLI
 * runs as a real child process of SDK clients of both eras (their StdioClientTransport), as a
 * client's config would start it; and through `npx` from the packed tarball.
 */

type Obj = Record<string, unknown>;
type Era = 'v1' | 'v2';

let dir: string;
let toolsFile: string;

const tools = (extra: Obj[] = []) => [
  {
    name: 'echo',
    description: 'Echo.',
    inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
  },
  { name: 'danger', description: 'Needs a yes.', inputSchema: { type: 'object' } },
  ...extra,
];

/** What the process wrote to stdout, one JSON-RPC message a line. */
const linesOf = (out: string) =>
  out
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Obj);

function config(name: string, gateway: Obj = {}): string {
  const path = join(dir, name);
  writeFileSync(
    path,
    JSON.stringify({
      gateway: { store: false, ...gateway },
      mcpServers: {
        fx: {
          command: process.execPath,
          args: [DRIFT],
          env: { DRIFT_TOOLS_FILE: toolsFile, DRIFT_ECHO_ARGS: '1' },
          approval: { ask: ['danger'] },
        },
      },
    }),
  );
  return path;
}

interface Handle {
  list(): Promise<string[]>;
  call(name: string, args?: Obj): Promise<{ text: string; isError: boolean }>;
  asked: Obj[];
  listChanged: { count: number };
  close(): Promise<void>;
}

const shape = (r: unknown) => {
  const res = r as { content?: { text?: string }[]; isError?: unknown };
  return { text: (res.content ?? []).map((c) => c.text ?? '').join('\n'), isError: res.isError === true };
};

/** An SDK client of `era` that starts `command args` as its stdio server. */
async function connect(
  era: Era,
  args: string[],
  options: {
    command?: string;
    env?: Record<string, string>;
    cwd?: string;
    answer?: 'accept' | 'decline';
  } = {},
): Promise<Handle> {
  const asked: Obj[] = [];
  const listChanged = { count: 0 };
  const server = {
    command: options.command ?? process.execPath,
    args,
    env: { ...(process.env as Record<string, string>), ...options.env },
    stderr: 'pipe' as const,
    ...(options.cwd ? { cwd: options.cwd } : {}),
  };
  const reply = async (params: Obj) => {
    asked.push(params);
    return options.answer === 'decline'
      ? { action: 'decline' }
      : { action: 'accept', content: { approve: true } };
  };
  const caps = { elicitation: { form: {} } };
  if (era === 'v1') {
    const client = new LegacyClient({ name: 'stdio-v1', version: '1.0.0' }, { capabilities: caps });
    client.setRequestHandler(ElicitRequestSchema, async (r) => (await reply(r.params as Obj)) as never);
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      listChanged.count++;
    });
    await client.connect(new LegacyStdio(server));
    return {
      asked,
      listChanged,
      list: async () => (await client.listTools()).tools.map((t) => t.name),
      call: async (name, a = {}) => shape(await client.callTool({ name, arguments: a })),
      close: () => client.close(),
    };
  }
  const client = new ModernClient(
    { name: 'stdio-v2', version: '1.0.0' },
    { capabilities: caps, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  client.setRequestHandler('elicitation/create', async (r) => (await reply(r.params as Obj)) as never);
  await client.connect(new ModernStdio(server));
  return {
    asked,
    listChanged,
    list: async () => (await client.listTools()).tools.map((t) => t.name),
    call: async (name, a = {}) => shape(await client.callTool({ name, arguments: a })),
    close: () => client.close(),
  };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'manifold-stdio-'));
  toolsFile = join(dir, 'tools.json');
  writeFileSync(toolsFile, JSON.stringify(tools()));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('manifold stdio (#54)', () => {
  for (const era of ['v1', 'v2'] as const) {
    describe(`a ${era === 'v1' ? '2025-11-25' : '2026-07-28'} client`, () => {
      let h: Handle;
      let logFile: string;
      beforeAll(async () => {
        logFile = join(dir, `${era}.log`);
        h = await connect(era, [CLI, 'stdio', '--config', config(`${era}.json`), '--log-file', logFile]);
      }, 60_000);
      afterAll(async () => {
        await h?.close();
      });

      it('lists and calls through the same gateway: the same catalog, names and audit', async () => {
        await eventually(async () => (await h.list()).includes('fx__echo'), 'the catalog');
        expect((await h.list()).sort()).toEqual(['fx__danger', 'fx__echo']);
        const r = await h.call('fx__echo', { q: 'hi' });
        expect(r).toEqual({ text: 'called echo {"q":"hi"}', isError: false });
        await eventually(
          () => readFileSync(logFile, 'utf8').includes('"event":"audit.tools_call"'),
          'the audit line in the log file',
        );
        const bad = await h.call('fx__echo', { q: 5 });
        expect(bad.isError).toBe(true);
        expect(bad.text).toMatch(/Invalid arguments/);
      });

      it('asks this client for approval by elicitation, and runs the call once accepted', async () => {
        const r = await h.call('fx__danger', {});
        expect(h.asked.length).toBeGreaterThan(0);
        expect(r).toEqual({ text: 'called danger {}', isError: false });
      });

      if (era === 'v1') {
        it('relays list_changed from its session stream after a verified change', async () => {
          const before = h.listChanged.count;
          writeFileSync(
            toolsFile,
            JSON.stringify(tools([{ name: 'more', description: 'More.', inputSchema: { type: 'object' } }])),
          );
          // A new tool is withheld by drift, so nothing a client sees changed; a removed one is announced.
          writeFileSync(toolsFile, JSON.stringify([tools()[0]]));
          await eventually(() => h.listChanged.count > before, 'tools/list_changed on stdout', 20_000);
          writeFileSync(toolsFile, JSON.stringify(tools()));
        });
      }
    });
  }

  it('writes nothing but JSON-RPC lines to stdout; logs go to stderr', async () => {
    const path = config('raw.json');
    const lines = [
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-11-25',
          capabilities: {},
          clientInfo: { name: 'raw', version: '1' },
        },
      },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    ]
      .map((m) => JSON.stringify(m))
      .join('\n');
    const child = spawn(process.execPath, [CLI, 'stdio', '--config', path], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      err += d;
    });
    child.stdin.write(`${lines}\n{not json\n`);
    await eventually(() => out.split('\n').filter(Boolean).length >= 3, 'three answers', 30_000);
    child.stdin.end();
    await new Promise((r) => child.once('close', r));
    const messages = linesOf(out);
    for (const m of messages) expect(m.jsonrpc).toBe('2.0');
    expect(messages.find((m) => m.id === 1)?.result).toMatchObject({ protocolVersion: '2025-11-25' });
    expect(messages.find((m) => m.id === null)?.error).toMatchObject({ code: -32700 });
    expect(err).toContain('"event":"stdio.serving"');
  }, 60_000);

  for (const era of ['2025-11-25', '2026-07-28'] as const) {
    it(`${era}: a line over maxBodyBytes is refused unread, to its id, and the next one is served`, async () => {
      const path = config(`big-${era}.json`, { maxBodyBytes: 4096 });
      const meta = {
        'io.modelcontextprotocol/protocolVersion': era,
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
      };
      const opening =
        era === '2025-11-25'
          ? [
              {
                jsonrpc: '2.0',
                id: 1,
                method: 'initialize',
                params: { protocolVersion: era, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
              },
              { jsonrpc: '2.0', method: 'notifications/initialized' },
            ]
          : [];
      const params = era === '2025-11-25' ? {} : { _meta: meta };
      // The id first (legacy), or last as the SDKs write it (modern): either way it is found.
      const pad = { ...params, pad: 'x'.repeat(50_000) };
      const big =
        era === '2025-11-25'
          ? { jsonrpc: '2.0', id: 2, method: 'tools/list', params: pad }
          : { method: 'tools/list', params: pad, jsonrpc: '2.0', id: 2 };
      const after = { jsonrpc: '2.0', id: 3, method: 'tools/list', params };
      const child = spawn(process.execPath, [CLI, 'stdio', '--config', path], {
        stdio: ['pipe', 'pipe', 'ignore'],
      });
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        out += d;
      });
      const text = [...opening, big, after].map((m) => JSON.stringify(m)).join('\n');
      // Written in pieces, as a pipe delivers a long line.
      for (let i = 0; i < text.length; i += 8192) child.stdin.write(text.slice(i, i + 8192));
      child.stdin.write('\n');
      const answers = () => linesOf(out);
      await eventually(() => answers().some((m) => m.id === 3), 'the answer after the long line', 30_000);
      child.stdin.end();
      await new Promise((r) => child.once('close', r));
      const refused = answers().filter((m) => m.id === 2);
      expect(refused).toEqual([
        {
          jsonrpc: '2.0',
          id: 2,
          error: {
            code: -32600,
            message: 'request body exceeds 4096 bytes',
            data: { manifold: 'ERR_BODY_TOO_LARGE' },
          },
        },
      ]);
      expect(answers().some((m) => m.id === null)).toBe(false);
      expect((answers().find((m) => m.id === 3)?.result as Obj | undefined)?.tools).toEqual(
        expect.arrayContaining([expect.objectContaining({ name: 'fx__echo' })]),
      );
    }, 60_000);
  }

  it('holds no more of a line than maxBodyBytes, however long it grows before its newline', async () => {
    const path = config('huge.json');
    const child = spawn(process.execPath, [CLI, 'stdio', '--config', path], {
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    const rssMb = () =>
      Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) / 1024;
    const write = (s: string) =>
      new Promise<void>((r) => {
        if (child.stdin.write(s)) r();
        else child.stdin.once('drain', () => r());
      });
    // Measured from a settled process: one ping answered first.
    await write('{"jsonrpc":"2.0","id":0,"method":"ping"}\n');
    await eventually(() => out.includes('"id":0'), 'the first answer', 30_000);
    await write('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"');
    const before = rssMb();
    const mib = 'x'.repeat(1 << 20);
    for (let i = 0; i < 384; i++) await write(mib);
    // 384 MiB of one line went in: held, it would take at least as much; read and dropped, the
    // chunks are garbage the heap collects as it goes.
    expect(rssMb() - before).toBeLessThan(128);
    await write('"}}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n');
    await eventually(() => out.includes('"id":2'), 'the answer after the long line', 30_000);
    child.stdin.end();
    await new Promise((r) => child.once('close', r));
    const refused = linesOf(out).find((m) => m.id === 1);
    expect(refused).toMatchObject({ error: { code: -32600, data: { manifold: 'ERR_BODY_TOO_LARGE' } } });
  }, 60_000);

  describe('who the client is', () => {
    it('A1: with gateway.auth, a token from --token-file is verified like any other, and grants apply', async () => {
      const issuer = await testIssuer('https://issuer.test', 'manifold');
      const path = config('auth.json', { auth: issuer.auth });
      const tokenFile = join(dir, 'token');
      writeFileSync(tokenFile, `${await issuer.mint({ scope: 'tools:fx__echo' })}\n`);
      for (const era of ['v1', 'v2'] as const) {
        const h = await connect(era, [CLI, 'stdio', '--config', path, '--token-file', tokenFile]);
        try {
          await eventually(async () => (await h.list()).length > 0, 'the catalog');
          expect(await h.list()).toEqual(['fx__echo']);
          const hidden = await h
            .call('fx__danger', {})
            .catch((e: Error) => ({ text: e.message, isError: true }));
          expect(hidden.isError).toBe(true);
          expect(hidden.text).toMatch(/Unknown tool/);
        } finally {
          await h.close();
        }
      }
      // MANIFOLD_TOKEN works the same; a token from another issuer is refused on every request.
      const other = await testIssuer('https://issuer.test', 'manifold');
      const bad = await connect('v1', [CLI, 'stdio', '--config', path], {
        env: { MANIFOLD_TOKEN: await other.mint({ scope: 'tools:*' }) },
      }).catch((e: Error) => e);
      expect(bad).toBeInstanceOf(Error);
      // No token at all: refused at start, naming the fix.
      const none = await run(process.execPath, [CLI, 'stdio', '--config', path], {
        env: { MANIFOLD_TOKEN: '' },
      });
      expect(none.status).toBe(2);
      expect(none.stdout).toBe('');
      expect(none.stderr).toContain('a token is needed: pass --token-file F or set MANIFOLD_TOKEN');
    }, 120_000);

    it('without gateway.auth, gateway.localPrincipal decides what it sees', async () => {
      const path = config('local.json', { localPrincipal: { subject: 'me', grants: ['fx__echo'] } });
      const h = await connect('v2', [CLI, 'stdio', '--config', path]);
      try {
        await eventually(async () => (await h.list()).length > 0, 'the catalog');
        expect(await h.list()).toEqual(['fx__echo']);
      } finally {
        await h.close();
      }
    }, 60_000);
  });

  it('runs from the packed tarball through npx, as a client config starts it', async () => {
    const pack = mkdtempSync(join(tmpdir(), 'manifold-stdio-pack-'));
    try {
      const packed = JSON.parse(
        execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', pack], {
          cwd: ROOT,
          encoding: 'utf8',
        }),
      ) as { filename: string; name: string }[];
      execFileSync('tar', ['-xzf', join(pack, packed[0]!.filename), '-C', pack]);
      const pkg = join(pack, 'package');
      // What `npm install` of the tarball brings (its one external, better-sqlite3), from this checkout.
      symlinkSync(resolve(ROOT, 'node_modules'), join(pkg, 'node_modules'));
      // A project that has the package installed: npx finds its bin there, without the network.
      const project = join(pack, 'project');
      mkdirSync(join(project, 'node_modules/.bin'), { recursive: true });
      writeFileSync(join(project, 'package.json'), '{"name": "client-project", "private": true}');
      symlinkSync(pkg, join(project, 'node_modules', packed[0]!.name));
      symlinkSync(
        join('..', packed[0]!.name, 'dist/manifold.js'),
        join(project, 'node_modules/.bin/manifold'),
      );
      for (const era of ['v1', 'v2'] as const) {
        const h = await connect(era, ['-y', 'manifold', 'stdio', '--config', config(`npx-${era}.json`)], {
          command: 'npx',
          cwd: project,
        });
        try {
          await eventually(async () => (await h.list()).includes('fx__echo'), 'the catalog through npx');
          expect((await h.call('fx__echo', { q: 'npx' })).text).toBe('called echo {"q":"npx"}');
        } finally {
          await h.close();
        }
      }
    } finally {
      rmSync(pack, { recursive: true, force: true });
    }
  }, 180_000);
});
