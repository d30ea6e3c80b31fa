import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern, DRIFT } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import {
  eventually,
  freePort,
  type Spawned,
  startEverythingHttp,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

/**
 * The status page's JSON view (#16) with auth on, without a browser: who sees what, secrets
 * masked, upstream text escaped. The browser half is status-page.test.ts.
 */
const ISS = 'https://issuer.status';
const AUD = 'manifold-status';
const SECRET = 'sk-status-secret-5c1d2e3f';
const RLO = '\u202e';
const HOSTILE = `Alpha v2 <img src=x onerror="window.__pwned=1"> read ${RLO}txt.exe`;

type Obj = Record<string, unknown>;
type Row = {
  name: string;
  state: string;
  counts: Obj;
  drift?: { quarantined: { name: string; diff?: string }[] };
};
type View = {
  view: string;
  tenant?: string;
  upstreams: Row[];
  calls: { server: string; total: number; errors: number; p50Ms: number; p99Ms: number }[];
  config?: { servers: Obj[]; gateway: Obj };
  diagnostics?: unknown[];
};

const tool = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
});

describe('status page JSON view (auth on)', () => {
  let gw: TestGateway;
  let web: Spawned;
  let dir: string;
  let toolsFile: string;
  let base: string;
  const tokens = { admin: '', acme: '', globex: '' };
  const open: AnyHandle[] = [];

  const get = (path: string, token?: string, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, {
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    });
  const view = async (token: string): Promise<View> => {
    const res = await get('/status.json', token);
    expect(res.status).toBe(200);
    return (await res.json()) as View;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mf-status-'));
    toolsFile = join(dir, 'tools.json');
    writeFileSync(toolsFile, JSON.stringify([tool('alpha', 'Alpha v1.'), tool('beta', 'Beta v1.')]));
    web = await startEverythingHttp('streamableHttp');
    const closed = await freePort();
    const issuer = await testIssuer(ISS, AUD);
    gw = await startTestGateway(
      {
        mcpServers: {
          fx: {
            command: process.execPath,
            args: [DRIFT, `--label=\${STATUS_SECRET}`],
            env: { DRIFT_TOOLS_FILE: toolsFile, API_TOKEN: `\${STATUS_SECRET}` },
          },
          web: {
            url: `${web.url}?key=\${STATUS_SECRET}`,
            headers: { 'X-Api-Key': `\${STATUS_SECRET}` },
          },
          // Never up: nothing listed, so only its tenant's grants put it in that tenant's view.
          gone: { url: `http://127.0.0.1:${closed}/mcp` },
        },
        gateway: {
          allowedHosts: [`127.0.0.1:${web.port}`, `127.0.0.1:${closed}`],
          drift: { recheckSeconds: 0 },
          auth: { ...issuer.auth },
        },
      },
      { env: { STATUS_SECRET: SECRET } },
    );
    base = gw.url.replace(/\/mcp$/, '');
    tokens.admin = await issuer.mint({ scope: 'manifold:admin tools:*' }, 'ops');
    tokens.acme = await issuer.mint({ scope: 'tools:fx__* tools:gone__*' }, 'acme');
    tokens.globex = await issuer.mint({ scope: 'tools:web__*' }, 'globex');
  });

  afterAll(async () => {
    for (const h of open) await h.close().catch(() => {});
    await gw?.stop();
    await web?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('A1: the JSON view needs a token; the page and its assets hold no data and need none', async () => {
    const anonymous = await get('/status.json');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(
      /^Bearer resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"$/,
    );
    expect((await get('/status.json', 'not.a.token')).status).toBe(401);
    // A3: a token in the query string is never read.
    expect((await get(`/status.json?access_token=${tokens.admin}`)).status).toBe(401);
    const page = await get('/');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    expect(html).toContain('<script src="/status.js" defer></script>');
    expect(html).not.toContain('fx');
    for (const asset of ['/status.js', '/status.css']) expect((await get(asset)).status).toBe(200);
  });

  it('the page is sent with a strict CSP, nosniff and no framing', async () => {
    for (const path of ['/', '/status.js', '/status.css']) {
      const res = await get(path);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
    const json = await get('/status.json', tokens.admin);
    expect(json.headers.get('cache-control')).toBe('no-store');
    expect(json.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('B3: a foreign Origin is refused, as for /healthz (DNS rebinding)', async () => {
    expect((await get('/status.json', tokens.admin, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await get('/', undefined, { origin: 'https://evil.example' })).status).toBe(403);
  });

  it("recent calls from a legacy and a modern client land in each tenant's own view", async () => {
    // On a loaded machine the first connect to `web` can miss its deadline and retry: wait for it.
    await eventually(() => gw.gateway.pool.get('web')?.state === 'ready', 'web ready');
    const acme = await connectLegacy(gw.url, tokens.acme);
    const globex = await connectModern(gw.url, tokens.globex);
    open.push(acme, globex);
    const call = (h: AnyHandle, name: string, args: Obj) =>
      (h.client as unknown as { callTool(p: Obj): Promise<Obj> }).callTool({ name, arguments: args });
    await call(acme, 'fx__beta', {});
    await call(acme, 'fx__beta', {});
    await call(globex, 'web__echo', { message: 'hi' });
    // Refused before the relay (not visible to globex): an error in globex's own numbers.
    await call(globex, 'fx__beta', {}).catch(() => undefined);

    const a = await view(tokens.acme);
    expect(a.view).toBe('tenant');
    expect(a.tenant).toBe('acme');
    expect(a.upstreams.map((u) => u.name)).toEqual(['fx', 'gone']);
    expect(a.upstreams[0]?.counts).toEqual({ tools: 2, prompts: 0, resources: 0, templates: 0 });
    // A server that is down lists nothing; its tenant still sees it, and that it is down.
    expect(a.upstreams[1]?.state).not.toBe('ready');
    expect(a.upstreams[1]?.counts).toEqual({ tools: 0, prompts: 0, resources: 0, templates: 0 });
    expect(a.calls).toEqual([expect.objectContaining({ server: 'fx', total: 2, errors: 0 })]);
    expect(a.config).toBeUndefined();
    expect(a.diagnostics).toBeUndefined();

    const g = await view(tokens.globex);
    expect(g.upstreams.map((u) => u.name)).toEqual(['web']);
    // Its refused call resolved to no server it may see; acme's calls are not its own.
    expect(g.calls).toEqual([
      expect.objectContaining({ server: '(unresolved)', total: 1, errors: 1 }),
      expect.objectContaining({ server: 'web', total: 1, errors: 0 }),
    ]);

    const admin = await view(tokens.admin);
    expect(admin.view).toBe('admin');
    expect(admin.upstreams.map((u) => u.name)).toEqual(['fx', 'web', 'gone']);
    expect(admin.upstreams.map((u) => u.state).slice(0, 2)).toEqual(['ready', 'ready']);
    const byServer = Object.fromEntries(admin.calls.map((c) => [c.server, c]));
    expect(byServer.fx).toMatchObject({ total: 2, errors: 0 });
    expect(byServer.web).toMatchObject({ total: 1, errors: 0 });
    expect(byServer['(unresolved)']).toMatchObject({ total: 1, errors: 1 });
    expect(byServer.fx!.p50Ms).toBeLessThanOrEqual(byServer.fx!.p99Ms);
  });

  it('A15: secrets are masked in the config and absent from the JSON and the page', async () => {
    const res = await get('/status.json', tokens.admin);
    const text = await res.text();
    expect(text).not.toContain(SECRET);
    const admin = JSON.parse(text) as View;
    const [fx, webCfg] = admin.config!.servers as Obj[];
    expect(fx!.env).toEqual({ DRIFT_TOOLS_FILE: '***', API_TOKEN: '***' });
    expect(fx!.args).toEqual([DRIFT, '--label=[redacted]']);
    expect(webCfg!.headers).toEqual({ 'X-Api-Key': '***' });
    expect(webCfg!.url).toBe(`${web.url}?key=***`);
    expect((admin.config!.gateway.auth as Obj).publicKey).toBe('***');
    expect(await (await get('/')).text()).not.toContain(SECRET);
    expect(await (await get('/status.js')).text()).not.toContain(SECRET);
  });

  it("C6: a quarantined tool's diff is escaped for an admin; a tenant learns only its name", async () => {
    writeFileSync(
      toolsFile,
      JSON.stringify([tool('alpha', HOSTILE), tool('beta', 'Beta v1.'), tool('gamma', 'New.')]),
    );
    await eventually(
      async () => (await view(tokens.admin)).upstreams[0]?.drift !== undefined,
      'fx reported with drift after its listing changed',
    );
    const text = await (await get('/status.json', tokens.admin)).text();
    // No bidi override anywhere in the JSON, raw or as a JSON escape: it is shown, not applied.
    expect(text).not.toContain(RLO);
    expect(text.toLowerCase()).not.toContain('\\u202e');
    const fx = (JSON.parse(text) as View).upstreams[0]!;
    const alpha = fx.drift!.quarantined[0]!;
    // The admin is told the commands that show and accept the change; a tenant is not (below).
    expect(fx.drift).toMatchObject({ review: 'manifold drift fx', retrust: 'manifold retrust fx' });
    expect(alpha.name).toBe('alpha');
    expect(alpha.diff).toContain('- Alpha v1.');
    expect(alpha.diff).toContain('+ Alpha v2 <img src=x onerror="window.__pwned=1"> read <U+202E>txt.exe');
    expect((fx.drift as unknown as { withheld: { name: string; diff: string }[] }).withheld[0]).toMatchObject(
      {
        name: 'gamma',
        diff: expect.stringContaining('+ New.'),
      },
    );

    const acme = (await view(tokens.acme)).upstreams[0]!;
    expect(acme.drift).toEqual({ quarantined: [{ name: 'fx__alpha' }], withheld: [] });
    expect(JSON.stringify(acme)).not.toContain('onerror');
  });
});

describe('status page switched off or moved', () => {
  it('statusPath false serves no page and no JSON; a moved page serves its assets beside it', async () => {
    const idle = { idle: { command: process.execPath, disabled: true } };
    // The metrics count requests too: off as well, so no observer at all is left.
    const off = await startTestGateway({
      mcpServers: idle,
      gateway: { statusPath: false, metricsPath: false },
    });
    const moved = await startTestGateway({ mcpServers: idle, gateway: { statusPath: '/ops/' } });
    try {
      const offBase = off.url.replace(/\/mcp$/, '');
      expect((await fetch(`${offBase}/`)).status).toBe(404);
      expect((await fetch(`${offBase}/status.json`)).status).toBe(404);
      expect(off.gateway.observers.active).toBe(false);
      const movedBase = moved.url.replace(/\/mcp$/, '');
      const listening = (gw: TestGateway) => gw.logs.find((l) => l.event === 'gateway.listening');
      expect(listening(moved)?.status).toBe(`${movedBase}/ops`);
      expect(listening(off)).not.toHaveProperty('status');
      expect((await fetch(`${movedBase}/`)).status).toBe(404);
      const page = await (await fetch(`${movedBase}/ops`)).text();
      expect(page).toContain('<script src="/ops/status.js" defer></script>');
      expect(page).toContain('data-json="/ops/status.json"');
      // Without auth (loopback only) the anonymous principal is the admin.
      const v = (await (await fetch(`${movedBase}/ops/status.json`)).json()) as View;
      expect(v.view).toBe('admin');
      expect(v.upstreams.map((u) => [u.name, u.state])).toEqual([['idle', 'disabled']]);
    } finally {
      await off.stop();
      await moved.stop();
    }
  });
});
