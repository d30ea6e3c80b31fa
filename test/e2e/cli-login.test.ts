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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../deploy/node/sqlite-store.js';
import { type AuthServer, startAuthServer } from '../fixtures/oauth-as.mjs';
import { type ProtectedServer, startProtectedServer } from '../fixtures/protected-server.mjs';
import { CLI, ensureDist } from '../helpers/dist.js';
import { connectClient, freePort, startTestGateway } from '../helpers/harness.js';
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
function startLogin(args: string[]): { child: ChildProcess; url: Promise<string>; done: Promise<Run> } {
  const child = spawn(process.execPath, [CLI, 'login', ...args, '--config', configFile, '--no-open'], {
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
