import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectEra } from '../helpers/clients.js';
import { runCli } from '../helpers/dist.js';
import { testIssuer } from '../helpers/factories.js';
import { eventually, ROOT, startTestGateway, stopChild, type TestGateway } from '../helpers/harness.js';

/**
 * #54: `manifold search-registry` and `manifold add` against a local MCP Registry (a Node HTTP
 * server over entries copied as data, test/fixtures/registry/), and a server added that way
 * starting untrusted until `manifold retrust` (SECURITY J3).
 */

type Obj = Record<string, unknown>;
const MEMORY_VERSION = (
  JSON.parse(
    readFileSync(join(ROOT, 'node_modules/@modelcontextprotocol/server-memory/package.json'), 'utf8'),
  ) as {
    version: string;
  }
).version;

let registry: ChildProcess;
let registryUrl: string;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'manifold-registry-'));
  registry = spawn(process.execPath, [join(ROOT, 'test/fixtures/registry-server.mjs'), '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((res, rej) => {
    let buf = '';
    registry.stdout!.on('data', (d: Buffer) => {
      buf += String(d);
      const m = /listening (\d+)/.exec(buf);
      if (m) res(Number(m[1]));
    });
    registry.once('exit', () => rej(new Error('the registry exited')));
  });
  registryUrl = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  await stopChild(registry);
  rmSync(dir, { recursive: true, force: true });
});

/** A config file in the test's folder, written as given (tabs, odd spacing and all). */
function configFile(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** The egress rules let the CLI reach the loopback registry (and nothing else loopback). */
const ORIGINAL = `{
\t"gateway": {"allowedHosts": ["127.0.0.1"],   "logLevel": "warn"},
\t"mcpServers": {
\t\t"existing": { "command": "node", "args": ["x.js"] }
\t}
}
`;

const manifold = (args: string[], config: string, env: Record<string, string> = {}) =>
  runCli([...args, '--config', config, '--registry', registryUrl], { env, timeoutMs: 60_000 });

function serversOf(path: string): Record<string, Obj> {
  return (JSON.parse(readFileSync(path, 'utf8')) as { mcpServers: Record<string, Obj> }).mcpServers;
}

describe('manifold search-registry (#54)', () => {
  it('lists the latest version of each match, and skips a malformed entry without hiding the rest', async () => {
    const config = configFile('search.json', ORIGINAL);
    const r = await manifold(['search-registry', 'io.'], config);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('io.modelcontextprotocol/brave-search  1.0.2  MCP server for Brave Search');
    expect(r.stdout).not.toContain('1.0.1');
    expect(r.stdout).toContain('io.github.example/weather-mcp  0.5.0');
    expect(r.stdout).not.toContain('io.example/broken');
    expect(r.stderr).toContain('1 malformed entry was skipped');
    const none = await manifold(['search-registry', 'nothing-like-this'], config);
    expect(none.stdout).toMatch(/no server in .* matches "nothing-like-this"/);
  });
});

describe('manifold add (#54)', () => {
  it('writes a pinned npx entry with the secret as ${VAR}, and the rest of the file byte-identical', async () => {
    const config = configFile('add-npm.json', ORIGINAL);
    const r = await manifold(
      ['add', 'io.modelcontextprotocol/brave-search', '--version', '1.0.1', '--env', 'BRAVE_API_KEY'],
      config,
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('runs npx -y @modelcontextprotocol/server-brave-search@1.0.1');
    expect(r.stdout).toContain('set BRAVE_API_KEY in the gateway');
    expect(r.stdout).toContain('manifold retrust brave-search');
    expect(serversOf(config)['brave-search']).toEqual({
      command: 'npx',
      args: ['-y', '@modelcontextprotocol/server-brave-search@1.0.1'],
      env: { BRAVE_API_KEY: '${BRAVE_API_KEY}' },
      sandbox: { network: false },
      start: 'lazy',
      trust: 'review',
    });
    const after = readFileSync(config, 'utf8');
    // Every byte of the original is kept, in order, around the one inserted span.
    let prefix = 0;
    while (prefix < ORIGINAL.length && ORIGINAL[prefix] === after[prefix]) prefix++;
    let suffix = 0;
    while (suffix < ORIGINAL.length - prefix && ORIGINAL.at(-1 - suffix) === after.at(-1 - suffix)) suffix++;
    expect(prefix + suffix).toBe(ORIGINAL.length);
    const inserted = after.slice(prefix, after.length - suffix);
    expect(inserted).toContain('"brave-search"');
    // In the file's own style: tabs.
    expect(inserted).toMatch(/\n\t\t"brave-search": \{\n\t\t\t"command": "npx"/);
    // A server by that name is not overwritten.
    const again = await manifold(
      ['add', 'io.modelcontextprotocol/brave-search', '--env', 'BRAVE_API_KEY'],
      config,
    );
    expect(again.status).toBe(1);
    expect(again.stderr).toContain(
      'already has a server named brave-search; choose another name with --as NAME',
    );
    expect(readFileSync(config, 'utf8')).toBe(after);
  });

  it('fails naming a required input that was not given, and writes nothing', async () => {
    const config = configFile('add-missing.json', ORIGINAL);
    const r = await manifold(['add', 'io.modelcontextprotocol/brave-search'], config);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('needs inputs that were not given');
    expect(r.stderr).toContain(
      "BRAVE_API_KEY (secret: pass --env BRAVE_API_KEY, and set BRAVE_API_KEY in the gateway's environment): Brave Search API Key",
    );
    expect(readFileSync(config, 'utf8')).toBe(ORIGINAL);
  });

  it('never writes a secret value into the config file', async () => {
    const config = configFile('add-secret.json', ORIGINAL);
    const r = await manifold(
      ['add', 'io.modelcontextprotocol/brave-search', '--env', 'BRAVE_API_KEY=sk-live-do-not-write'],
      config,
    );
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('never writes a secret into the config file');
    expect(r.stderr).not.toContain('sk-live-do-not-write');
    expect(readFileSync(config, 'utf8')).toBe(ORIGINAL);
  });

  it('writes a PyPI package as uvx pkg==version, with the defaults the registry gives', async () => {
    const config = configFile('add-pypi.json', ORIGINAL);
    const r = await manifold(['add', 'io.github.example/weather-mcp', '--env', 'WEATHER_API_KEY'], config);
    expect(r.status).toBe(0);
    expect(serversOf(config)['weather-mcp']).toEqual({
      command: 'uvx',
      args: ['weather-mcp-server==0.5.0'],
      env: { WEATHER_API_KEY: '${WEATHER_API_KEY}', WEATHER_UNITS: 'celsius' },
      sandbox: { network: false },
      start: 'lazy',
      trust: 'review',
    });
  });

  it('writes a remote as its URL, variables filled in, with its headers', async () => {
    const config = configFile('add-remote.json', ORIGINAL);
    const r = await manifold(
      ['add', 'io.github.user/remote-weather', '--env', 'Authorization', '--as', 'weather'],
      config,
    );
    expect(r.status).toBe(0);
    expect(serversOf(config).weather).toEqual({
      type: 'streamable-http',
      url: 'https://api.example.com/mcp',
      headers: { Authorization: '${AUTHORIZATION}' },
      trust: 'review',
    });
    // What it wrote loads: manifold check reads it (the variable set as the gateway's would be).
    const check = await runCli(['check', '--config', config], { env: { AUTHORIZATION: 'Bearer x' } });
    expect(check.stderr).not.toMatch(/mcpServers\.weather/);
  });

  it('says so when the registry has no such server or version', async () => {
    const config = configFile('add-none.json', ORIGINAL);
    const r = await manifold(['add', 'io.example/does-not-exist'], config);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('has no server named io.example/does-not-exist');
    const v = await manifold(['add', 'io.modelcontextprotocol/brave-search', '--version', '9.9.9'], config);
    expect(v.status).toBe(1);
    expect(v.stderr).toContain('has no version 9.9.9 of io.modelcontextprotocol/brave-search');
    expect(readFileSync(config, 'utf8')).toBe(ORIGINAL);
  });

  it('refuses a malformed entry, naming what is wrong', async () => {
    const config = configFile('add-broken.json', ORIGINAL);
    const r = await manifold(['add', 'io.example/broken'], config);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /entry for io\.example\/broken is malformed \(server\.[a-z]+: .*\), so nothing is added/,
    );
    expect(readFileSync(config, 'utf8')).toBe(ORIGINAL);
  });

  it('J3: refuses a package that does not pin one exact version', async () => {
    const config = configFile('add-floating.json', ORIGINAL);
    const r = await manifold(['add', 'io.example/floating'], config);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('lists the version "^1.0.0", not one exact version');
    expect(readFileSync(config, 'utf8')).toBe(ORIGINAL);
  });

  it('D3: reaches the registry through the egress rules (a loopback registry needs allowedHosts)', async () => {
    const config = configFile('add-egress.json', '{ "mcpServers": {} }\n');
    const r = await manifold(['add', 'io.example/floating'], config);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/could not be reached/);
    expect(readFileSync(config, 'utf8')).toBe('{ "mcpServers": {} }\n');
  });
});

describe('a server added from the registry starts untrusted (J3)', () => {
  let gw: TestGateway | undefined;
  afterAll(async () => {
    await gw?.stop();
  });

  it('J3: its first listing is held until manifold retrust accepts it, for clients of both eras', async () => {
    const store = join(dir, 'state.db');
    const config = configFile(
      'trust.json',
      JSON.stringify(
        { gateway: { allowedHosts: ['127.0.0.1'], store: { path: store } }, mcpServers: {} },
        null,
        2,
      ),
    );
    const add = await manifold(
      ['add', 'io.github.modelcontextprotocol/server-memory', '--as', 'memory'],
      config,
    );
    expect(add.stdout).toContain(`runs npx -y @modelcontextprotocol/server-memory@${MEMORY_VERSION}`);
    expect(add.status).toBe(0);
    const raw = JSON.parse(readFileSync(config, 'utf8')) as Parameters<typeof startTestGateway>[0];
    const entry = (raw.mcpServers as Record<string, Obj>).memory!;
    expect(entry).toMatchObject({ sandbox: { network: false }, start: 'lazy', trust: 'review' });
    // npx fetches the package over the network, which a network-off sandbox does not have
    // (docs/deploy-node.md, Sandboxes); this test is about the review, so the server runs unsandboxed.
    entry.sandbox = false;
    (raw.gateway as Obj).drift = { recheckSeconds: 0 };
    writeFileSync(config, JSON.stringify(raw, null, 2));
    gw = await startTestGateway(raw, { trustPollMs: 100 });
    await eventually(
      () => gw!.logs.some((l) => l.event === 'drift.held_for_review' && l.server === 'memory'),
      'the listing held for review',
      60_000,
    );
    for (const era of ['v1', 'v2'] as const) {
      const h = await connectEra(gw.url, era);
      const tools = (await (h.client as unknown as { listTools(): Promise<{ tools: Obj[] }> }).listTools())
        .tools;
      expect(tools.filter((t) => String(t.name).startsWith('memory__'))).toEqual([]);
      await h.close();
    }
    const drift = await runCli(['drift', 'memory', '--config', config], { timeoutMs: 60_000 });
    expect(drift.status).toBe(1);
    expect(drift.stdout).toMatch(
      /memory: held for review: \d+ new item\(s\), none trusted yet; `manifold retrust memory` to accept/,
    );
    expect(drift.stdout).toContain('create_entities');
    const retrust = await runCli(['retrust', 'memory', '--yes', '--config', config], { timeoutMs: 60_000 });
    expect(retrust.status).toBe(0);
    for (const era of ['v1', 'v2'] as const) {
      const h = await connectEra(gw.url, era);
      const client = h.client as unknown as { listTools(): Promise<{ tools: Obj[] }> };
      await eventually(
        async () => (await client.listTools()).tools.some((t) => t.name === 'memory__create_entities'),
        'the accepted tools',
        30_000,
      );
      await h.close();
    }
  }, 180_000);
});

describe('GET /v0.1/servers on the gateway (#54)', () => {
  let gw: TestGateway | undefined;
  let mint: (claims: Record<string, unknown>) => Promise<string>;
  const DRIFT_TOOLS = join(ROOT, 'test/fixtures/drift-server.mjs');
  afterAll(async () => {
    await gw?.stop();
  });
  beforeAll(async () => {
    const tools = join(dir, 'gw-tools.json');
    writeFileSync(
      tools,
      JSON.stringify([{ name: 'one', description: 'One.', inputSchema: { type: 'object' } }]),
    );
    const server = { command: process.execPath, args: [DRIFT_TOOLS], env: { DRIFT_TOOLS_FILE: tools } };
    const issuer = await testIssuer('https://issuer.test', 'manifold');
    mint = (claims) => issuer.mint(claims);
    gw = await startTestGateway({
      mcpServers: { github: server, slack: server, docs: server },
      profiles: { coding: { servers: ['github'] } },
      gateway: { auth: { ...issuer.auth, profileClaim: 'profile' } },
    });
  }, 60_000);

  const list = async (token?: string, query = '') => {
    const res = await fetch(`${gw!.url.replace(/\/mcp$/, '')}/v0.1/servers${query}`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
    });
    return { status: res.status, body: (await res.json()) as { servers: Obj[]; metadata: Obj } };
  };
  const names = (body: { servers: Obj[] }) => body.servers.map((s) => (s.server as Obj).name as string);

  it('A13: lists only the servers whose tools the caller may see, in the registry format', async () => {
    const r = await list(await mint({ scope: 'tools:github__* tools:docs__*' }));
    expect(r.status).toBe(200);
    expect(names(r.body)).toEqual(['local.manifold/docs', 'local.manifold/github']);
    const github = r.body.servers.find((s) => (s.server as Obj).name === 'local.manifold/github')!;
    expect(github.server).toMatchObject({
      title: 'github',
      version: 'test',
      remotes: [{ type: 'streamable-http', url: gw!.url }],
    });
    expect((github._meta as Obj)['dev.manifold/gateway']).toEqual({
      server: 'github',
      tools: ['github__one'],
    });
    // The answer is a valid ServerList: what a registry client reads.
    const { serverList, serverResponse } = await import('../../src/registry/server-json.js');
    expect(serverList.safeParse(r.body).success).toBe(true);
    for (const s of r.body.servers) expect(serverResponse.safeParse(s).success).toBe(true);
    // A server it cannot see does not exist for it, listed or asked for by name.
    const token = await mint({ scope: 'tools:github__*' });
    const one = await fetch(
      `${gw!.url.replace(/\/mcp$/, '')}/v0.1/servers/${encodeURIComponent('local.manifold/slack')}/versions/latest`,
      {
        headers: { authorization: `Bearer ${token}` },
      },
    );
    expect(one.status).toBe(404);
    const mine = await fetch(
      `${gw!.url.replace(/\/mcp$/, '')}/v0.1/servers/${encodeURIComponent('local.manifold/github')}/versions/latest`,
      {
        headers: { authorization: `Bearer ${token}` },
      },
    );
    expect(mine.status).toBe(200);
  });

  it("follows a token's profile: only its servers, reached at its endpoint", async () => {
    const r = await list(await mint({ scope: 'tools:*', profile: 'coding' }));
    expect(names(r.body)).toEqual(['local.manifold/github']);
    expect((r.body.servers[0]!.server as Obj).remotes).toEqual([
      { type: 'streamable-http', url: `${gw!.url}/coding` },
    ]);
  });

  it('pages with a cursor and searches by name', async () => {
    const token = await mint({ scope: 'tools:*' });
    const first = await list(token, '?limit=2');
    expect(names(first.body)).toEqual(['local.manifold/docs', 'local.manifold/github']);
    expect(first.body.metadata.nextCursor).toBe('local.manifold/github');
    const next = await list(token, `?limit=2&cursor=${encodeURIComponent('local.manifold/github')}`);
    expect(names(next.body)).toEqual(['local.manifold/slack']);
    expect(next.body.metadata.nextCursor).toBeUndefined();
    expect(names((await list(token, '?search=sla')).body)).toEqual(['local.manifold/slack']);
  });

  it('A1: refuses a caller without a token, like /mcp', async () => {
    const res = await fetch(`${gw!.url.replace(/\/mcp$/, '')}/v0.1/servers`);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer resource_metadata=/);
  });
});
