import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testIssuer } from '../helpers/factories.js';
import {
  EVERYTHING,
  eventually,
  ROOT,
  type Spawned,
  startEverythingHttp,
  stopChild,
} from '../helpers/harness.js';
import { META_CAPS, modernListen, modernRequest } from '../helpers/modern.js';

/**
 * One suite, two runtimes: the same scenarios against the Node gateway (in process) and the
 * Worker bundle (real workerd). Each runtime supplies an adapter that starts its gateway.
 */

export interface StartedGateway {
  /** The MCP endpoint, ending in /mcp. */
  url: string;
  /** Where durable state lives; starting again with the same directory is a restart. */
  persist?: string;
  stop(): Promise<void>;
  /** GET /healthz, parsed. */
  health(): Promise<unknown>;
}

export type StartGateway = (options: {
  /** A manifold.json object. `jwks`, when given, is wired in as the runtime's `auth.jwksFile`. */
  config: Record<string, unknown>;
  persist?: string;
  jwks?: object;
}) => Promise<StartedGateway>;

/** The slice of /healthz the scenarios read. */
interface Health {
  status: string;
  upstreams: { name: string; state: string; rule?: string; lastError?: string }[];
}

const ISS = 'https://issuer.example';
const AUD = 'manifold-scenarios';
const DRIFT = join(ROOT, 'test/fixtures/drift-server.mjs');
const REFERENCE = join(ROOT, 'test/fixtures/reference-server.mjs');
const ACCEPT = 'application/json, text/event-stream';
const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
/** What a quarantined tool of server d says, in every runtime. */
export const QUARANTINED =
  'Quarantined: this tool changed after it was trusted. An operator must re-trust server d.';

type ToolDef = { name: string; description: string; inputSchema: Record<string, unknown> };
const tool = (name: string, description: string): ToolDef => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
});

function text(res: unknown): string {
  return ((res as { content: { text: string }[] }).content[0] as { text: string }).text;
}

/**
 * One POST on its own connection. A 401 is answered before the body is read, and workerd then
 * closes the connection (without `Connection: close`); on a shared keep-alive pool the SDK
 * client's next request could land on that socket ("other side closed").
 */
function rawPost(
  url: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  const data = JSON.stringify(body);
  return new Promise((res, rej) => {
    const req = httpRequest(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          accept: ACCEPT,
          'content-length': String(Buffer.byteLength(data)),
          ...headers,
        },
      },
      (r) => {
        let text = '';
        r.setEncoding('utf8');
        r.on('data', (c: string) => {
          text += c;
        });
        r.on('end', () => res({ status: r.statusCode ?? 0, headers: r.headers, text }));
        r.on('error', rej);
      },
    );
    req.on('error', rej);
    req.end(data);
  });
}

/** The drift fixture in --http mode (stateless streamable HTTP); tools re-read from a file per list. */
async function startDriftHttp(toolsFile: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [DRIFT, '--http'], {
    env: { ...process.env, DRIFT_TOOLS_FILE: toolsFile },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((res, rej) => {
    child.once('error', rej);
    child.once('exit', (code) => rej(new Error(`drift server exited with ${code}`)));
    child.stdout?.once('data', (d) => res(Number(String(d).trim())));
  });
  child.stdout?.resume();
  return { child, port };
}

export function gatewayScenarios(runtime: 'node' | 'workers', start: StartGateway): void {
  describe(`${runtime}: gateway scenarios`, () => {
    let root: string;
    let everything: Spawned;
    let drift: { child: ChildProcess; port: number } | undefined;
    let toolsFile: string;
    const running = new Set<StartedGateway>();
    const clients = new Set<Client>();

    /** Starts a gateway and remembers it, so afterAll stops whatever a failed test left running. */
    async function boot(options: Parameters<StartGateway>[0]): Promise<StartedGateway> {
      const gw = await start(options);
      let stopped: Promise<void> | undefined;
      const tracked: StartedGateway = {
        ...gw,
        stop: () => {
          stopped ??= (async () => {
            running.delete(tracked);
            await gw.stop();
          })();
          return stopped;
        },
      };
      running.add(tracked);
      return tracked;
    }

    async function connect(url: string, token?: string): Promise<Client> {
      const client = new Client({ name: `scenarios-${runtime}`, version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(
        new URL(url),
        token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : {},
      );
      await client.connect(transport);
      clients.add(client);
      return client;
    }

    async function close(client: Client): Promise<void> {
      clients.delete(client);
      await client.close().catch(() => {});
    }

    const names = async (client: Client) => (await client.listTools()).tools.map((t) => t.name);
    const health = async (gw: StartedGateway) => (await gw.health()) as Health;
    const upstream = async (gw: StartedGateway, name: string) =>
      (await health(gw)).upstreams.find((u) => u.name === name);
    /** Only the upstream of the scenario: auth is not the point there, `"auth": false` (Workers needs one). */
    const open = (servers: Record<string, unknown>, gateway: Record<string, unknown> = {}) => ({
      mcpServers: servers,
      gateway: { allowedHosts: [`127.0.0.1:${everything.port}`], auth: false, ...gateway },
    });
    const writeTools = (tools: ToolDef[]) => writeFileSync(toolsFile, JSON.stringify(tools));

    beforeAll(async () => {
      root = mkdtempSync(join(tmpdir(), `manifold-scenarios-${runtime}-`));
      toolsFile = join(root, 'tools.json');
      everything = await startEverythingHttp('streamableHttp');
    });

    afterAll(async () => {
      for (const c of [...clients]) await close(c);
      for (const gw of [...running]) await gw.stop().catch(() => {});
      if (drift) await stopChild(drift.child);
      if (everything) await everything.stop();
      if (root) rmSync(root, { recursive: true, force: true });
    });

    it('initialize, tools/list and tools/call through a loopback streamable-HTTP upstream', async () => {
      const gw = await boot({ config: open({ everything: { url: everything.url } }) });
      try {
        const client = await connect(gw.url);
        expect(client.getServerVersion()?.name).toBe('manifold');
        expect(client.getServerCapabilities()?.tools?.listChanged).toBe(true);
        const listed = await names(client);
        expect(listed).toContain('everything__echo');
        expect(listed).toContain('everything__get-sum');
        const res = await client.callTool({ name: 'everything__echo', arguments: { message: 'hi' } });
        expect(res.isError).toBeFalsy();
        expect(text(res)).toBe('Echo: hi');
        await close(client);
      } finally {
        await gw.stop();
      }
    });

    it('progress from an HTTP+SSE upstream reaches the client once per notification, in order', async () => {
      const sse = await startEverythingHttp('sse');
      const gw = await boot({
        config: {
          mcpServers: { esse: { type: 'sse', url: sse.url } },
          gateway: { allowedHosts: [`127.0.0.1:${sse.port}`], auth: false },
        },
      });
      try {
        const client = await connect(gw.url);
        const seen: number[] = [];
        const res = await client.callTool(
          { name: 'esse__trigger-long-running-operation', arguments: { duration: 0.6, steps: 3 } },
          undefined,
          { onprogress: (p) => seen.push(p.progress) },
        );
        expect(JSON.stringify(res.content)).toContain('Long running operation completed');
        // Each of the server's progress notifications once: [1, 2, 3], never [1, 1, 2, 2, ...].
        expect(seen).toEqual([1, 2, 3]);
        await close(client);
      } finally {
        await gw.stop();
        await sse.stop();
      }
    });

    it('JWT auth from a JWKS: a granted token works; none, a foreign key and a narrow grant do not', async () => {
      // Same issuer, audience and kid; only the key differs.
      const ours = await testIssuer(ISS, AUD, { kid: 'k1' });
      const theirs = await testIssuer(ISS, AUD, { kid: 'k1' });
      const jwks = ours.jwks;
      const mint = (by: typeof ours, scope: string) => by.mint({ scope }, 'alice');
      const gw = await boot({
        config: {
          mcpServers: { everything: { url: everything.url } },
          gateway: {
            allowedHosts: [`127.0.0.1:${everything.port}`],
            auth: { issuer: ISS, audience: AUD },
          },
        },
        jwks,
      });
      try {
        const post = (headers: Record<string, string> = {}) => rawPost(gw.url, INIT, headers);

        // Accepted: the grant covers everything__*.
        const alice = await connect(gw.url, await mint(ours, 'tools:everything__*'));
        expect(await names(alice)).toContain('everything__echo');
        expect(text(await alice.callTool({ name: 'everything__echo', arguments: { message: 'hi' } }))).toBe(
          'Echo: hi',
        );
        await close(alice);

        // No token: 401 pointing at the protected-resource metadata, no error attribute.
        const none = await post();
        expect(none.status).toBe(401);
        const challenge = String(none.headers['www-authenticate'] ?? '');
        expect(challenge).toContain('resource_metadata=');
        expect(challenge).not.toContain('error=');

        // Signed by another key under the same kid: refused as an invalid token.
        const forged = await post({
          authorization: `Bearer ${await mint(theirs, 'tools:everything__*')}`,
        });
        expect(forged.status).toBe(401);
        expect(forged.headers['www-authenticate']).toContain('error="invalid_token"');

        // A valid token whose grants do not cover a tool cannot see it, or call it.
        const narrow = await connect(gw.url, await mint(ours, 'tools:everything__echo'));
        const visible = await names(narrow);
        expect(visible).toContain('everything__echo');
        expect(visible).not.toContain('everything__get-sum');
        await expect(
          narrow.callTool({ name: 'everything__get-sum', arguments: { a: 1, b: 2 } }),
        ).rejects.toThrow(/Unknown tool: everything__get-sum/);
        await close(narrow);
      } finally {
        await gw.stop();
      }
    });

    it('a result over gateway.maxResultBytes is truncated with a marker and flagged', async () => {
      const gw = await boot({
        config: open({ everything: { url: everything.url } }, { maxResultBytes: 2048 }),
      });
      try {
        const client = await connect(gw.url);
        expect(await names(client)).toContain('everything__echo');
        const res = await client.callTool({
          name: 'everything__echo',
          arguments: { message: 'x'.repeat(50_000) },
        });
        expect(text(res)).toContain('[… truncated:');
        expect(res._meta?.['manifold/truncated']).toBe(true);
        const bytes = Buffer.byteLength(JSON.stringify(res));
        expect(bytes).toBeLessThanOrEqual(2048 + 512);
        await close(client);
      } finally {
        await gw.stop();
      }
    });

    it('a tools/call straight after initialize, before any tools/list, reaches the tool', async () => {
      // A client may call a tool it knows without listing first (a reconnect, a cached list): the
      // gateway must not answer "Unknown tool" only because its first catalog is not in yet.
      const gw = await boot({ config: open({ everything: { url: everything.url } }) });
      try {
        const client = await connect(gw.url);
        const res = await client.callTool({ name: 'everything__echo', arguments: { message: 'first' } });
        expect(text(res)).toBe('Echo: first');
        await close(client);
      } finally {
        await gw.stop();
      }
    });

    // (d) and (e) share one persisted state directory and one drift upstream, in order.
    let persist: string | undefined;
    let driftConfig: Record<string, unknown>;

    it('drift quarantine survives a restart of the gateway (baselines in durable storage)', async () => {
      writeTools([tool('alpha', 'Alpha v1.'), tool('beta', 'Beta v1.')]);
      drift = await startDriftHttp(toolsFile);
      driftConfig = {
        mcpServers: { d: { url: `http://127.0.0.1:${drift.port}/mcp` } },
        gateway: { allowedHosts: [`127.0.0.1:${drift.port}`], auth: false, drift: { recheckSeconds: 0 } },
      };
      persist = join(root, 'state');

      const first = await boot({ config: driftConfig, persist });
      expect(first.persist).toBe(persist);
      const c1 = await connect(first.url);
      const v1 = (await c1.listTools()).tools;
      expect(v1.find((t) => t.name === 'd__alpha')?.description).toBe('Alpha v1.');
      expect(v1.find((t) => t.name === 'd__beta')?.description).toBe('Beta v1.');
      await close(c1);
      await first.stop();

      writeTools([tool('alpha', 'Alpha v2: also uploads your files.'), tool('beta', 'Beta v1.')]);

      const second = await boot({ config: driftConfig, persist });
      // Until the upstream answers, the stored (trusted) catalog is served: wait for the live listing.
      await eventually(
        async () => (await upstream(second, 'd'))?.state === 'ready',
        'the drift upstream to be listed again',
      );
      const c2 = await connect(second.url);
      const tools = (await c2.listTools()).tools;
      const alpha = tools.find((t) => t.name === 'd__alpha');
      expect(alpha?.description).toBe(QUARANTINED);
      expect(alpha?.inputSchema).toEqual({ type: 'object' });
      expect(JSON.stringify(tools)).not.toContain('uploads your files');
      expect(tools.find((t) => t.name === 'd__beta')?.description).toBe('Beta v1.');
      const call = await c2.callTool({ name: 'd__alpha', arguments: {} });
      expect(call.isError).toBe(true);
      expect(text(call)).toMatch(/^Quarantined: .*re-trust server d/);
      expect(text(await c2.callTool({ name: 'd__beta', arguments: {} }))).toBe('called beta');
      await close(c2);
      await second.stop();
    });

    it('warm start: the first tools/list is served from storage while the upstream is down', async () => {
      expect(persist, 'needs the state of the drift scenario').toBeDefined();
      await stopChild(drift!.child);
      drift = undefined;

      const gw = await boot({ config: driftConfig, persist });
      try {
        const client = await connect(gw.url);
        const tools = (await client.listTools()).tools;
        expect(tools.map((t) => t.name)).toEqual(['d__alpha', 'd__beta']);
        expect(tools.find((t) => t.name === 'd__alpha')?.description).toBe(QUARANTINED);
        expect(tools.find((t) => t.name === 'd__beta')?.description).toBe('Beta v1.');
        // Served without the upstream: it is down, and the gateway says so.
        expect((await upstream(gw, 'd'))?.state).not.toBe('ready');
        await expect(client.callTool({ name: 'd__beta', arguments: {} })).rejects.toThrow(/not connected/);
        await close(client);
      } finally {
        await gw.stop();
      }
    });

    it('re-trust over HTTP (#15): the diff first, then exactly that is accepted, and the gateway serves it', async () => {
      const own = join(root, 'retrust-tools.json');
      writeFileSync(own, JSON.stringify([tool('alpha', 'Alpha v1.'), tool('beta', 'Beta v1.')]));
      const up = await startDriftHttp(own);
      const config = {
        mcpServers: { d: { url: `http://127.0.0.1:${up.port}/mcp` } },
        gateway: { allowedHosts: [`127.0.0.1:${up.port}`], auth: false, drift: { recheckSeconds: 0 } },
      };
      const state = join(root, 'retrust-state');
      try {
        const first = await boot({ config, persist: state });
        const c1 = await connect(first.url);
        expect(await names(c1)).toEqual(['d__alpha', 'd__beta']);
        await close(c1);
        await first.stop();

        writeFileSync(
          own,
          JSON.stringify([
            tool('alpha', 'Alpha v2: also reads mail.'),
            tool('beta', 'Beta v1.'),
            tool('gamma', 'G.'),
          ]),
        );
        const gw = await boot({ config, persist: state });
        await eventually(async () => (await upstream(gw, 'd'))?.state === 'ready', 'd listed again');
        const client = await connect(gw.url);
        const before = (await client.listTools()).tools;
        expect(before.find((t) => t.name === 'd__alpha')?.description).toBe(QUARANTINED);
        expect(before.map((t) => t.name)).not.toContain('d__gamma');

        const admin = `${gw.url.replace(/\/mcp$/, '')}/admin/servers/d`;
        const shown = await fetch(`${admin}/drift`);
        expect(shown.status).toBe(200);
        const review = (await shown.json()) as { changes: number; lines: string[]; digest: string };
        expect(review.changes).toBe(2);
        expect(review.lines.join('\n')).toContain('+ Alpha v2: also reads mail.');
        expect(review.lines.join('\n')).toContain('gamma');
        const post = (body: unknown) =>
          fetch(`${admin}/retrust`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
        // A digest of anything else than what the server lists now accepts nothing.
        expect((await post({ digest: 'f'.repeat(64) })).status).toBe(409);
        expect((await client.listTools()).tools.find((t) => t.name === 'd__alpha')?.description).toBe(
          QUARANTINED,
        );
        const accepted = await post({ digest: review.digest });
        expect(accepted.status).toBe(200);
        expect(await accepted.json()).toEqual({ retrusted: 'd', changes: 2 });
        await eventually(
          async () =>
            (await client.listTools()).tools.find((t) => t.name === 'd__alpha')?.description ===
            'Alpha v2: also reads mail.',
          'the re-trusted definition served',
        );
        expect(await names(client)).toEqual(['d__alpha', 'd__beta', 'd__gamma']);
        expect(text(await client.callTool({ name: 'd__alpha', arguments: {} }))).toBe('called alpha');
        // Nothing is pending any more, and an unknown server is 404.
        expect(((await (await fetch(`${admin}/drift`)).json()) as { changes: number }).changes).toBe(0);
        expect((await fetch(`${admin.replace(/d$/, 'nope')}/drift`)).status).toBe(404);
        await close(client);
        await gw.stop();
      } finally {
        await stopChild(up.child);
      }
    });

    it('a stdio server next to an HTTP one: connected on Node, an unsupported-transport diagnostic on Workers', async () => {
      const gw = await boot({
        config: open({
          everything: { url: everything.url },
          local: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        }),
      });
      try {
        const client = await connect(gw.url);
        const listed = await names(client);
        expect(listed).toContain('everything__echo');
        const local = await upstream(gw, 'local');
        if (runtime === 'node') {
          expect(listed).toContain('local__echo');
          expect(local).toMatchObject({ name: 'local', state: 'ready' });
          expect(text(await client.callTool({ name: 'local__echo', arguments: { message: 'hi' } }))).toBe(
            'Echo: hi',
          );
        } else {
          expect(listed.filter((n) => n.startsWith('local__'))).toEqual([]);
          expect(local).toMatchObject({ name: 'local', state: 'unsupported', rule: 'unsupported-transport' });
          expect(local?.lastError).toMatch(/workers/);
          expect((await upstream(gw, 'everything'))?.state).toBe('ready');
          expect((await health(gw)).status).toBe('degraded');
        }
        await close(client);
      } finally {
        await gw.stop();
      }
    });

    it('approval (#14): a modern client is asked, a yes runs the call once, a replay and a deny are refused', async () => {
      const gw = await boot({
        config: open({
          everything: {
            url: everything.url,
            risk: { 'get-tiny-image': 'destructive' },
            approval: { preset: 'strict', ask: ['echo'] },
          },
        }),
      });
      try {
        const caps = { meta: { [META_CAPS]: { elicitation: { form: {} } } } };
        const call = { name: 'everything__echo', arguments: { message: `approved on ${runtime}` } };
        const asked = await modernRequest(gw.url, 'tools/call', call, caps);
        expect(asked.body.result).toMatchObject({
          resultType: 'input_required',
          inputRequests: { 'manifold.approval': { method: 'elicitation/create' } },
        });
        const retry = {
          ...call,
          requestState: asked.body.result?.requestState,
          inputResponses: { 'manifold.approval': { action: 'accept', content: { approve: true } } },
        };
        const ran = await modernRequest(gw.url, 'tools/call', retry, caps);
        expect(text(ran.body.result)).toBe(`Echo: approved on ${runtime}`);
        // The claim is in the gateway's store (a Durable Object on Workers): a replay is refused.
        const replay = await modernRequest(gw.url, 'tools/call', retry, caps);
        expect(replay.body.result).toMatchObject({
          isError: true,
          _meta: { 'manifold/approval': 'replayed' },
        });
        const denied = await modernRequest(
          gw.url,
          'tools/call',
          { name: 'everything__get-tiny-image', arguments: {} },
          caps,
        );
        expect(denied.body.result).toMatchObject({ isError: true, _meta: { 'manifold/approval': 'denied' } });
        // A legacy client that declared no elicitation cannot be asked: refused, naming the setting.
        const client = await connect(gw.url);
        const refused = await client.callTool(call);
        expect(refused.isError).toBe(true);
        expect(text(refused)).toContain('mcpServers.everything.approval');
        await close(client);
      } finally {
        await gw.stop();
      }
    });

    it('approvals queue (#52): queued, decided once through the admin API, run once, then asked afresh', async () => {
      const gw = await boot({
        config: open({
          everything: { url: everything.url, approval: { ask: ['echo'], via: 'queue', timeoutSeconds: 1 } },
        }),
      });
      try {
        const origin = new URL(gw.url).origin;
        const admin = async (method: string, path: string, body?: unknown) => {
          const r = await fetch(`${origin}${path}`, {
            method,
            headers: { 'content-type': 'application/json' },
            ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          });
          return { status: r.status, body: (await r.json()) as Record<string, unknown> };
        };
        const call = { name: 'everything__echo', arguments: { message: `queued on ${runtime}` } };
        const first = await modernRequest(gw.url, 'tools/call', call);
        const meta = (first.body.result?._meta ?? {}) as Record<string, unknown>;
        expect(meta['manifold/approval']).toBe('queued');
        const id = String(meta['manifold/approvalId']);
        const listed = await admin('GET', '/admin/approvals?status=pending');
        expect((listed.body.approvals as { id: string }[]).map((a) => a.id)).toContain(id);
        expect((await admin('POST', `/admin/approvals/${id}`, { decision: 'approve' })).status).toBe(200);
        // A decision is final (G2), in the store that holds the approval (the server's object on Workers).
        expect((await admin('POST', `/admin/approvals/${id}`, { decision: 'decline' })).status).toBe(409);
        const ran = await modernRequest(gw.url, 'tools/call', call);
        expect(text(ran.body.result)).toBe(`Echo: queued on ${runtime}`);
        const again = await modernRequest(gw.url, 'tools/call', call);
        const next = (again.body.result?._meta ?? {}) as Record<string, unknown>;
        expect(next['manifold/approval']).toBe('queued');
        expect(next['manifold/approvalId']).not.toBe(id);
      } finally {
        await gw.stop();
      }
    });

    it('profiles and tool search (#17): /mcp/<profile> serves its own catalog in search mode; unknown is 404', async () => {
      const gw = await boot({
        config: {
          ...open({ everything: { url: everything.url } }),
          profiles: {
            lean: { tools: ['everything__echo', 'everything__get-sum'], catalog: { mode: 'search' } },
          },
        },
      });
      try {
        const lean = `${gw.url}/lean`;
        const listed = await modernRequest(lean, 'tools/list');
        expect(((listed.body.result?.tools ?? []) as { name: string }[]).map((t) => t.name)).toEqual([
          'manifold__search_tools',
          'manifold__call_tool',
          'manifold__describe_tool',
        ]);
        const search = await modernRequest(lean, 'tools/call', {
          name: 'manifold__search_tools',
          arguments: { query: 'add two numbers' },
        });
        const hits = (
          (search.body.result?.structuredContent ?? { tools: [] }) as { tools: { name: string }[] }
        ).tools;
        expect(hits.map((t) => t.name)).toEqual(['everything__get-sum']);
        const call = await modernRequest(lean, 'tools/call', {
          name: 'manifold__call_tool',
          arguments: { name: 'everything__echo', arguments: { message: `found on ${runtime}` } },
        });
        expect(text(call.body.result)).toBe(`Echo: found on ${runtime}`);
        // Outside the profile: unknown there, while /mcp still lists it.
        const outside = await modernRequest(lean, 'tools/call', {
          name: 'everything__get-env',
          arguments: {},
        });
        expect(outside.body.error?.code).toBe(-32602);
        const all = await modernRequest(gw.url, 'tools/list');
        expect(((all.body.result?.tools ?? []) as { name: string }[]).map((t) => t.name)).toContain(
          'everything__get-env',
        );
        const missing = await modernRequest(`${gw.url}/nope`, 'tools/list');
        expect(missing.status).toBe(404);
      } finally {
        await gw.stop();
      }
    });

    it('a 2026-07-28 client through the gateway to a modern and a legacy HTTP upstream: discover, list, call, listen', async () => {
      const ref = spawn(process.execPath, [REFERENCE, 'http', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
      try {
        const refPort = await new Promise<number>((res, rej) => {
          let out = '';
          ref.once('exit', (code) => rej(new Error(`reference fixture exited with ${code}`)));
          ref.stdout?.on('data', (d) => {
            out += String(d);
            const m = /listening (\d+)/.exec(out);
            if (m) res(Number(m[1]));
          });
        });
        const gw = await boot({
          config: open(
            { everything: { url: everything.url }, ref: { url: `http://127.0.0.1:${refPort}/mcp` } },
            { allowedHosts: [`127.0.0.1:${everything.port}`, `127.0.0.1:${refPort}`] },
          ),
        });
        try {
          const eras = async () =>
            Object.fromEntries(
              (await health(gw)).upstreams.map((u) => [u.name, (u as { era?: string }).era]),
            );
          await eventually(
            async () => Object.values(await eras()).every(Boolean),
            'both upstreams connected',
          );
          expect(await eras()).toEqual({ everything: 'legacy', ref: 'modern' });
          const discover = await modernRequest(gw.url, 'server/discover');
          expect(discover.body.result?.supportedVersions).toContain('2026-07-28');
          const listed: string[] = [];
          let cursor: string | undefined;
          do {
            const page = await modernRequest(gw.url, 'tools/list', cursor ? { cursor } : {});
            expect(page.body.result?.resultType).toBe('complete');
            listed.push(...(page.body.result!.tools as { name: string }[]).map((t) => t.name));
            cursor = page.body.result!.nextCursor as string | undefined;
          } while (cursor);
          expect(listed).toEqual(expect.arrayContaining(['everything__echo', 'ref__test_simple_text']));
          const legacyCall = await modernRequest(gw.url, 'tools/call', {
            name: 'everything__echo',
            arguments: { message: 'modern' },
          });
          expect(text(legacyCall.body.result)).toBe('Echo: modern');
          const modernCall = await modernRequest(gw.url, 'tools/call', {
            name: 'ref__test_simple_text',
            arguments: {},
          });
          expect(text(modernCall.body.result)).toContain('simple text');
          // x-mcp-header: the client mirrors the argument (checked at the gateway's edge), and the
          // gateway mirrors it again upstream (the fixture refuses the call without the header).
          const args = { name: 'ref__test_custom_header', arguments: { region: 'eu-west-1', query: 'q' } };
          const missing = await modernRequest(gw.url, 'tools/call', args);
          expect([missing.status, missing.body.error?.code]).toEqual([400, -32020]);
          const header = await modernRequest(gw.url, 'tools/call', args, {
            headers: { 'mcp-param-region': 'eu-west-1' },
          });
          expect(header.body.error).toBeUndefined();
          expect(text(header.body.result)).toBe('region=eu-west-1 query=q');
          const listen = await modernListen(gw.url, { toolsListChanged: true });
          try {
            expect((await listen.next(() => true)).method).toBe('notifications/subscriptions/acknowledged');
          } finally {
            listen.close();
          }
        } finally {
          await gw.stop();
        }
      } finally {
        await stopChild(ref);
      }
    });
  });
}
