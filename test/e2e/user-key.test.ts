import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testIssuer } from '../helpers/factories.js';
import { ROOT, startTestGateway, stopChild, type TestGateway } from '../helpers/harness.js';
import { giveKey } from '../helpers/key-page.js';

/**
 * #52: a user's own key (`auth: {"mode": "user-key"}`), with clients of both eras: a caller
 * without a key gets a URL elicitation (legacy -32042, modern input_required) to the gateway's
 * page, pastes the key there, and their calls then carry it, and only theirs; a client that cannot
 * elicit gets the link in an isError text; a 401 drops the key and asks again; the key is stored
 * sealed and never logged. The upstream (test/fixtures/key-server.mjs) answers with the key each
 * call came with.
 */
type Obj = Record<string, unknown>;
const ISS = 'https://issuer.user-key';
const AUD = 'manifold-user-key';
const KEY_SERVER = resolve(ROOT, 'test/fixtures/key-server.mjs');

describe("a user's own key (#52)", () => {
  let dir: string;
  let child: ChildProcess;
  let port: number;
  let gw: TestGateway;
  let tokens: Record<string, string>;
  const text = (r: unknown) =>
    ((r as { content: { text: string }[] }).content ?? []).map((c) => c.text).join('');

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mf-user-key-'));
    child = spawn(process.execPath, [KEY_SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
    port = await new Promise<number>((res) =>
      child.stdout!.once('data', (d) => res(Number(String(d).trim()))),
    );
    const issuer = await testIssuer(ISS, AUD);
    gw = await startTestGateway(
      {
        mcpServers: {
          keyed: {
            url: `http://127.0.0.1:${port}/mcp`,
            auth: { mode: 'user-key' },
            // The deployment's own key: it lists the tools; callers' calls carry their own.
            headers: { Authorization: 'Bearer ${OPERATOR_KEY}' },
          },
        },
        gateway: {
          auth: { ...issuer.auth },
          oauth: { secret: '${MANIFOLD_OAUTH_SECRET}' },
          allowedHosts: [`127.0.0.1:${port}`],
          store: { path: join(dir, 'state.db') },
        },
      },
      {
        env: {
          OPERATOR_KEY: 'key-operator',
          MANIFOLD_OAUTH_SECRET: 'an-oauth-secret-of-at-least-32-characters!',
        },
      },
    );
    tokens = {
      alice: await issuer.mint({ scope: 'tools:*' }, 'alice'),
      bob: await issuer.mint({ scope: 'tools:*' }, 'bob'),
      carol: await issuer.mint({ scope: 'tools:*' }, 'carol'),
    };
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
    if (child) await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  });

  const legacy = async (who: string, elicit: boolean) => {
    const client = new LegacyClient(
      { name: `${who}-v1`, version: '1.0.0' },
      { capabilities: elicit ? { elicitation: { url: {} } } : {} },
    );
    await client.connect(
      new LegacyTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens[who]}` } },
      }),
    );
    return client;
  };

  it('legacy client: -32042 to the key page, then its calls carry its own key', async () => {
    const alice = await legacy('alice', true);
    try {
      const refused = await alice.callTool({ name: 'keyed__whoami', arguments: {} }).then(
        () => undefined,
        (e: { code?: number; data?: { elicitations?: Obj[] } }) => e,
      );
      expect(refused?.code).toBe(-32042);
      const elicitation = refused?.data?.elicitations?.[0];
      expect(elicitation).toMatchObject({ mode: 'url' });
      const link = String(elicitation?.url);
      expect(new URL(link).pathname).toBe('/keys/keyed');
      // An altered link stores nothing.
      expect(await giveKey(`${link}x`, 'key-mallory').catch(() => 404)).toBe(404);
      expect(await giveKey(link, 'key-alice')).toBe(200);
      expect(text(await alice.callTool({ name: 'keyed__whoami', arguments: {} }))).toBe(
        'called with key-alice',
      );
    } finally {
      await alice.close();
    }
  });

  it('modern client: input_required with a URL elicitation; answered, the retry carries its own key', async () => {
    const client = new ModernClient(
      { name: 'bob-v2', version: '1.0.0' },
      { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    const asked: Obj[] = [];
    client.setRequestHandler('elicitation/create', async (r) => {
      asked.push(r.params as Obj);
      expect(await giveKey(String((r.params as Obj).url), 'key-bob')).toBe(200);
      return { action: 'accept' } as never;
    });
    await client.connect(
      new ModernTransport(new URL(gw.url), {
        requestInit: { headers: { authorization: `Bearer ${tokens.bob}` } },
      }),
    );
    try {
      expect(text(await client.callTool({ name: 'keyed__whoami', arguments: {} }))).toBe(
        'called with key-bob',
      );
      expect(asked).toEqual([expect.objectContaining({ mode: 'url' })]);
      // Alice's key stays hers.
      const alice = await legacy('alice', true);
      expect(text(await alice.callTool({ name: 'keyed__whoami', arguments: {} }))).toBe(
        'called with key-alice',
      );
      await alice.close();
    } finally {
      await client.close();
    }
  });

  it("a client that cannot elicit gets the link in an isError text; the deployment key is never a caller's", async () => {
    const carol = await legacy('carol', false);
    try {
      const r = (await carol.callTool({ name: 'keyed__whoami', arguments: {} })) as { isError?: boolean };
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/\/keys\/keyed\?t=/);
      const seen = (await (await fetch(`http://127.0.0.1:${port}/seen`)).json()) as string[];
      expect(seen).toContain('Bearer key-operator');
      expect(text(r)).not.toContain('key-operator');
    } finally {
      await carol.close();
    }
  });

  it('a 401 from the server drops the key, and the next call asks again', async () => {
    await fetch(`http://127.0.0.1:${port}/reject?key=key-alice`, { method: 'POST' });
    const alice = await legacy('alice', true);
    try {
      const failed = await alice.callTool({ name: 'keyed__whoami', arguments: {} }).then(
        (r) => r,
        (e: unknown) => e,
      );
      expect(text(failed)).not.toContain('called with');
      const again = await alice.callTool({ name: 'keyed__whoami', arguments: {} }).then(
        () => undefined,
        (e: { code?: number }) => e,
      );
      expect(again?.code).toBe(-32042);
    } finally {
      await alice.close();
    }
  });

  it('keys are stored sealed, never logged, never shown in the admin view', async () => {
    const db = new Database(join(dir, 'state.db'), { readonly: true });
    try {
      const rows = db
        .prepare("SELECT subject, sealed FROM oauth_tokens WHERE server = 'keyed'")
        .all() as Obj[];
      expect(rows.length).toBeGreaterThan(0);
      expect(JSON.stringify(rows)).not.toMatch(/key-(alice|bob)/);
    } finally {
      db.close();
    }
    expect(JSON.stringify(gw.logs)).not.toMatch(/key-(alice|bob|operator)/);
  });
});
