/**
 * `manifold login` and `manifold logout` (#19, design §4.7), the built CLI run as an operator runs
 * it: against a real authorization server (oidc-provider, test/fixtures/oauth-as.mjs) and a real
 * protected MCP server (test/fixtures/protected-server.mjs). The browser is played by a fetch that
 * follows the authorization server's redirects (test/helpers/oauth-browser.ts) back to the CLI's
 * loopback listener. The token lands in the configured SQLite store, and a gateway started on
 * that store afterwards calls the server as the signed-in user.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../deploy/node/store/sqlite.js';
import { type AuthServer, startAuthServer } from '../fixtures/oauth-as.mjs';
import { type ProtectedServer, startProtectedServer } from '../fixtures/protected-server.mjs';
import { type AnyHandle, connectEra, resultText } from '../helpers/clients.js';
import { CLI, ensureDist } from '../helpers/dist.js';
import {
  connectClient,
  eventually,
  freePort,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';
import { browse } from '../helpers/oauth-browser.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let dir: string;
let as: AuthServer;
let protectedServer: ProtectedServer;
let mcpUrl: string;
let raw: { mcpServers: Record<string, unknown>; gateway: Record<string, unknown> };
let configFile: string;
const storePath = () => join(dir, 'state.db');

/**
 * A CLI run to its end (the commands that need no browser). Never spawnSync: the authorization
 * server runs in this process and must answer the CLI's revocation meanwhile.
 */
function manifold(args: string[], config = configFile): Promise<Run> {
  const child = spawn(process.execPath, [CLI, ...args, '--config', config], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  return new Promise((res) => child.once('close', (code) => res({ code, stdout, stderr })));
}

/** `manifold login`, left running until it prints the authorization URL. */
function startLogin(
  args: string[],
  config = configFile,
): { child: ChildProcess; url: Promise<string>; done: Promise<Run> } {
  const child = spawn(process.execPath, [CLI, 'login', ...args, '--config', config, '--no-open'], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const url = new Promise<string>((res, rej) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const m = /^\s+(http\S+)$/m.exec(stdout);
      if (m) res(m[1]!);
    });
    child.once('close', () => rej(new Error(`login exited before printing a URL:\n${stdout}\n${stderr}`)));
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const done = new Promise<Run>((res) => child.once('close', (code) => res({ code, stdout, stderr })));
  return { child, url, done };
}

function writeConfig(servers: Record<string, unknown>, gateway: Record<string, unknown> = {}): string {
  const file = join(dir, `manifold-${Object.keys(servers).join('-')}-${Object.keys(gateway).join('-')}.json`);
  writeFileSync(file, JSON.stringify({ mcpServers: servers, gateway: { ...raw.gateway, ...gateway } }));
  return file;
}

beforeAll(async () => {
  ensureDist();
  dir = mkdtempSync(join(tmpdir(), 'manifold-cli-login-'));
  const port = await freePort();
  mcpUrl = `http://127.0.0.1:${port}/mcp`;
  as = await startAuthServer({ resource: mcpUrl, registration: true });
  protectedServer = await startProtectedServer({ port, issuer: as.issuer });
  raw = {
    mcpServers: { prot: { url: mcpUrl, auth: 'gateway' } },
    gateway: {
      store: { path: storePath() },
      oauth: { secret: 'x'.repeat(48) },
      // Loopback upstreams and the authorization server are reached only when listed.
      allowedHosts: [`127.0.0.1:${port}`, `127.0.0.1:${as.port}`],
    },
  };
  configFile = join(dir, 'manifold.json');
  writeFileSync(configFile, JSON.stringify(raw));
}, 240_000);

afterAll(async () => {
  await protectedServer?.close();
  await as?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('manifold login and logout', () => {
  it('signs the gateway in through a browser, and a gateway on the same store calls as that user', async () => {
    const login = startLogin(['prot']);
    const url = await login.url;
    const redirectUri = new URL(url).searchParams.get('redirect_uri')!;
    // The CLI's own loopback callback (RFC 8252 §7.3), not the gateway's.
    expect(redirectUri).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/oauth\/callback$/);
    const page = await browse(url, { callback: redirectUri, user: 'alice' });
    expect(page.status).toBe(200);
    expect(page.body).toContain('signed in to prot');
    expect(page.body).not.toMatch(/eyJ/);
    const run = await login.done;
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/signed in to prot/);
    // Nothing printed or logged carries a token.
    expect(`${run.stdout}${run.stderr}`).not.toMatch(/eyJ[\w-]+\.[\w-]+\./);

    // The token is in the store, sealed, for the deployment identity; the CLI registered itself
    // apart from the gateway (`prot#cli`).
    const store = openSqliteStore(storePath());
    try {
      const tokens = await store.credentials.listTokens('prot');
      expect(tokens).toEqual([expect.objectContaining({ subject: '', issuer: as.issuer })]);
      const sealed = (await store.credentials.getToken('prot', ''))!.sealed;
      expect(sealed).toMatch(/^v1\./);
      expect(await store.credentials.getClient('prot#cli', as.issuer)).toMatchObject({ source: 'dcr' });
      expect(await store.credentials.getClient('prot', as.issuer)).toBeUndefined();
    } finally {
      store.close();
    }
    expect(as.events.counts.authorization_code).toBe(1);

    const gateway = await startTestGateway(raw);
    try {
      const client = await connectClient(gateway.url);
      const tools = await client.listTools();
      expect(tools.tools.map((t) => t.name)).toContain('prot__whoami');
      const who = await client.callTool({ name: 'prot__whoami', arguments: {} });
      const text = (who.content as { type: string; text: string }[])[0]!.text;
      expect(JSON.parse(text)).toMatchObject({ sub: 'alice' });
      await client.close();
    } finally {
      await gateway.stop();
    }
  }, 120_000);

  it('logout revokes at the authorization server and deletes the token', async () => {
    const revoked = as.events.counts.revocation;
    const run = await manifold(['logout', 'prot']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/signed the gateway out of prot \(1 token removed\)/);
    expect(as.events.counts.revocation).toBeGreaterThan(revoked);
    const store = openSqliteStore(storePath());
    try {
      expect(await store.credentials.listTokens('prot')).toEqual([]);
    } finally {
      store.close();
    }
    // Nothing left to sign out of: still a success, and it says so.
    const again = await manifold(['logout', 'prot', '--all']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/\(0 tokens removed\)/);
  }, 60_000);

  it('a sign-in the user refuses ends the command with exit 1 and the rule', async () => {
    const login = startLogin(['prot', '--subject', '["acme","bob"]']);
    const url = await login.url;
    const redirectUri = new URL(url).searchParams.get('redirect_uri')!;
    // The authorization server answers the browser with an error, and the right state.
    const state = new URL(url).searchParams.get('state')!;
    const back = `${redirectUri}?${new URLSearchParams({ error: 'access_denied', state, iss: as.issuer })}`;
    const stray = await fetch(`${redirectUri}?state=forged`);
    // A request this command did not start is refused, and the wait goes on.
    expect(stray.status).toBe(400);
    const res = await fetch(back);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/authorization-denied/);
    const run = await login.done;
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/authorization-denied/);
  }, 60_000);

  it('refuses what it cannot do, with exit 2 for usage and 1 for a refusal', async () => {
    const usage = await manifold(['login']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/usage: manifold login SERVER/);
    const unknown = await manifold(['login', 'nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no server named nope .*configured: prot/);
    const both = await manifold(['logout', 'prot', '--all', '--subject', 'x']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--subject and --all exclude each other/);

    const staticFile = writeConfig({ plain: { url: mcpUrl, headers: { 'x-api-key': 'k' } } });
    const plain = await manifold(['login', 'plain'], staticFile);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/nothing to sign in to/);

    const memoryFile = writeConfig({ prot: { url: mcpUrl, auth: 'gateway' } }, { store: false });
    const memory = await manifold(['login', 'prot'], memoryFile);
    expect(memory.code).toBe(1);
    expect(memory.stderr).toMatch(/gateway\.store is false/);

    const ccFile = writeConfig({
      cc: {
        url: mcpUrl,
        auth: { mode: 'gateway', grant: 'client_credentials', clientId: 'c', clientSecret: 's' },
      },
    });
    const cc = await manifold(['login', 'cc'], ccFile);
    expect(cc.code).toBe(1);
    expect(cc.stderr).toMatch(/client_credentials/);
  });
});

/**
 * 49.16: the CLI login and the gateway's own (HTTP) login, in either order, with a gateway running
 * on the same SQLite file as the CLI (two processes, one store): every instance ends up with the
 * newest token, and each login asks for the union of the scopes asked so far (a scope step-up,
 * RFC 6750 §3.1 `insufficient_scope`, included).
 */
describe('49.16: the CLI and HTTP logins leave every instance with the newest token and every scope asked', () => {
  type Obj = Record<string, unknown>;
  const opened: { stop(): Promise<unknown> }[] = [];
  let runs = 0;

  afterEach(async () => {
    for (const o of opened.splice(0).reverse()) await o.stop().catch(() => {});
  });

  /** A running gateway and a CLI config on a store of their own. */
  async function deployment(): Promise<{ gw: TestGateway; config: string }> {
    const n = ++runs;
    const gateway = { ...raw.gateway, store: { path: join(dir, `step-${n}.db`) } };
    const config = join(dir, `step-${n}.json`);
    writeFileSync(config, JSON.stringify({ mcpServers: raw.mcpServers, gateway }));
    const gw = await startTestGateway({ mcpServers: raw.mcpServers, gateway }, { waitReady: false });
    opened.push(gw);
    return { gw, config };
  }

  /** The gateway's own login: the admin route, then the browser back to the gateway's callback. */
  async function httpLogin(gw: TestGateway, user: string): Promise<string[]> {
    const res = await fetch(new URL('/admin/servers/prot/login', gw.url), { method: 'POST' });
    expect(res.status).toBe(200);
    const begun = (await res.json()) as { authorizationUrl: string };
    const page = await browse(begun.authorizationUrl, {
      callback: `${new URL(gw.url).origin}/oauth/callback`,
      user,
    });
    expect(page.status).toBe(200);
    return page.request.get('scope')?.split(' ') ?? [];
  }

  /** `manifold login prot` as an operator runs it, signed in as `user`: the scopes it asked for. */
  async function cliLogin(config: string, user: string): Promise<string[]> {
    const login = startLogin(['prot'], config);
    const url = await login.url;
    const redirectUri = new URL(url).searchParams.get('redirect_uri')!;
    const page = await browse(url, { callback: redirectUri, user });
    expect(page.status).toBe(200);
    const run = await login.done;
    expect(run.code, run.stderr).toBe(0);
    return new URL(url).searchParams.get('scope')?.split(' ') ?? [];
  }

  async function client(gw: TestGateway, era: 'v1' | 'v2'): Promise<AnyHandle['client']> {
    const h = await connectEra(gw.url, era);
    opened.push({ stop: () => h.close() });
    return h.client;
  }

  async function call(c: AnyHandle['client'], tool: string): Promise<Obj | undefined> {
    try {
      const r = await c.callTool({ name: `prot__${tool}`, arguments: {} });
      return r.isError ? undefined : (JSON.parse(resultText(r)) as Obj);
    } catch {
      return undefined;
    }
  }

  const ready = (gw: TestGateway) =>
    eventually(() => gw.gateway.pool.get('prot')?.state === 'ready', 'prot ready');

  it('49.16: after a step-up, manifold login asks for the union and the running gateway then succeeds without a restart (v1 and v2)', async () => {
    const { gw, config } = await deployment();
    const first = await httpLogin(gw, 'alice');
    expect(first).toContain('repo:read');
    expect(first).not.toContain('repo:write');
    await ready(gw);
    const v1 = await client(gw, 'v1');
    const v2 = await client(gw, 'v2');
    expect(await call(v1, 'list_repos')).toMatchObject({ owner: 'alice' });
    // 403 insufficient_scope for repo:write: a step-up login is needed. A client that tries again
    // meanwhile asks for the same step-up, not for more than `maxStepUps` allows.
    for (const c of [v2, v1, v2]) expect(await call(c, 'create_issue')).toBeUndefined();
    const health = (await (await fetch(new URL('/healthz', gw.url))).json()) as { upstreams: Obj[] };
    expect(health.upstreams.find((u) => u.name === 'prot')?.auth).toMatchObject({ state: 'needs-login' });

    // The CLI knows nothing of the challenge but what the store holds: it asks for every scope.
    const asked = await cliLogin(config, 'alice');
    expect(asked).toEqual(expect.arrayContaining(['repo:read', 'repo:write']));
    // The gateway that saw the 403 uses the CLI's token at once: no restart, no other login.
    expect(await call(v2, 'create_issue')).toEqual({ created: true, by: 'alice' });
    expect(await call(v1, 'create_issue')).toEqual({ created: true, by: 'alice' });
  }, 120_000);

  it('49.16: a CLI login, then an HTTP login on a gateway that still holds an older token: the HTTP token is used (v1 and v2)', async () => {
    const { gw, config } = await deployment();
    await httpLogin(gw, 'alice');
    await ready(gw);
    const v1 = await client(gw, 'v1');
    expect(await call(v1, 'whoami')).toMatchObject({ sub: 'alice' });
    await cliLogin(config, 'carol');
    // The gateway's own login, later than the CLI's: its token is the newest.
    await httpLogin(gw, 'bob');
    await ready(gw);
    const v2 = await client(gw, 'v2');
    expect(await call(v2, 'whoami')).toMatchObject({ sub: 'bob' });
    expect(await call(v1, 'whoami')).toMatchObject({ sub: 'bob' });
    const store = openSqliteStore(join(dir, `step-${runs}.db`));
    try {
      expect((await store.credentials.getToken('prot', ''))?.version).toBeGreaterThan(2);
    } finally {
      store.close();
    }
  }, 120_000);

  it('49.16: an HTTP login with a step-up, then a CLI login: the CLI asks for the union and the running gateway uses its token (v1 and v2)', async () => {
    const { gw, config } = await deployment();
    await httpLogin(gw, 'alice');
    await ready(gw);
    const v1 = await client(gw, 'v1');
    expect(await call(v1, 'create_issue')).toBeUndefined();
    // The gateway's own step-up login asks for the union (as it did before 49.16).
    expect(await httpLogin(gw, 'alice')).toEqual(expect.arrayContaining(['repo:read', 'repo:write']));
    await ready(gw);
    expect(await call(v1, 'create_issue')).toEqual({ created: true, by: 'alice' });

    // Then the operator signs in from a terminal as someone else: every scope asked so far, again.
    const asked = await cliLogin(config, 'bob');
    expect(asked).toEqual(expect.arrayContaining(['repo:read', 'repo:write']));
    await eventually(
      async () => (await call(v1, 'whoami'))?.sub === 'bob',
      "the running gateway uses the CLI's token",
    );
    const v2 = await client(gw, 'v2');
    expect(await call(v2, 'create_issue')).toEqual({ created: true, by: 'bob' });
    expect(await call(v1, 'create_issue')).toEqual({ created: true, by: 'bob' });
  }, 120_000);
});
