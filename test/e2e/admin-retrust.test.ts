import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectLegacy, connectModern, DRIFT } from '../helpers/clients.js';
import { eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { testIssuer } from '../helpers/tokens.js';

/**
 * Re-trust over HTTP (#15) with auth on: only a `manifold:admin` token may review or accept drift
 * (A1, A13), the secret-free diff is what it is shown, and both eras' clients are then served the
 * accepted definition. The flow itself runs on Node and in workerd (test/shared/scenarios.ts).
 */
const ISS = 'https://issuer.retrust';
const AUD = 'manifold-retrust';
const tool = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: {} },
});

describe('re-trust over HTTP with auth', () => {
  let dir: string;
  let toolsFile: string;
  let gw: TestGateway;
  let admin: string;
  let tenant: string;
  let base: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mf-admin-retrust-'));
    toolsFile = join(dir, 'tools.json');
    writeFileSync(toolsFile, JSON.stringify([tool('alpha', 'Alpha v1.')]));
    const issuer = await testIssuer(ISS, AUD);
    gw = await startTestGateway({
      mcpServers: {
        fx: { command: process.execPath, args: [DRIFT], env: { DRIFT_TOOLS_FILE: toolsFile } },
      },
      gateway: {
        drift: { recheckSeconds: 0 },
        auth: { issuer: ISS, audience: AUD, publicKey: issuer.publicKey },
      },
    });
    admin = await issuer.mint({ scope: 'manifold:admin tools:*' }, 'ops');
    tenant = await issuer.mint({ scope: 'tools:*' }, 'acme');
    base = `${gw.url.replace(/\/mcp$/, '')}/admin/servers/fx`;
  });
  afterAll(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const as = (token: string | undefined, path: string, body?: unknown) =>
    fetch(`${base}/${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  it('A1: no token is 401 with WWW-Authenticate; a tenant token is 403, for review and accept alike', async () => {
    const none = await as(undefined, 'drift');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer resource_metadata=/);
    expect((await as(tenant, 'drift')).status).toBe(403);
    expect((await as(tenant, 'retrust', { digest: 'x' })).status).toBe(403);
    expect((await as(admin, 'drift')).status).toBe(200);
  });

  it('an admin reviews and accepts one tool; legacy and modern clients are served it, the rest stays held', async () => {
    const legacy = await connectLegacy(gw.url, tenant);
    const modern = await connectModern(gw.url, tenant);
    try {
      writeFileSync(toolsFile, JSON.stringify([tool('alpha', 'Alpha v2.'), tool('beta', 'Beta, new.')]));
      // Over stdio the fixture announces list_changed: the gateway re-lists and quarantines.
      await eventually(async () => {
        const r = (await (await as(admin, 'drift')).json()) as { changes: number };
        return r.changes === 2;
      }, 'both changes pending');
      const bad = await as(admin, 'retrust', { nope: true });
      expect(bad.status).toBe(400);
      const review = (await (await as(admin, 'drift?tool=alpha')).json()) as {
        tool: string;
        changes: number;
        lines: string[];
        digest: string;
      };
      expect(review).toMatchObject({ tool: 'alpha', changes: 1 });
      expect(review.lines.join('\n')).toContain('+ Alpha v2.');
      // The review of the whole server does not accept one tool, and the reverse.
      const whole = (await (await as(admin, 'drift')).json()) as { digest: string };
      expect((await as(admin, 'retrust', { digest: whole.digest, tool: 'alpha' })).status).toBe(409);
      const ok = await as(admin, 'retrust', { digest: review.digest, tool: 'alpha' });
      expect(await ok.json()).toEqual({ retrusted: 'fx', tool: 'alpha', changes: 1 });
      for (const h of [legacy, modern]) {
        await eventually(async () => {
          const tools = (await h.client.listTools()).tools;
          return tools.find((t) => t.name === 'fx__alpha')?.description === 'Alpha v2.';
        }, `${h.era} client served the accepted alpha`);
        const names = (await h.client.listTools()).tools.map((t) => t.name);
        expect(names).not.toContain('fx__beta');
      }
      const left = (await (await as(admin, 'drift')).json()) as { changes: number; lines: string[] };
      expect(left.changes).toBe(1);
      expect(left.lines.join('\n')).toContain('beta');
    } finally {
      await legacy.close();
      await modern.close();
    }
  });
});
