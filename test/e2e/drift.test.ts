import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, run, runCli } from '../helpers/dist.js';
import {
  connectClient,
  eventually,
  ROOT,
  startTestGateway,
  stopChild,
  type TestGateway,
} from '../helpers/harness.js';

const DRIFT = `${ROOT}/test/fixtures/drift-server.mjs`;
const SECRET = 'sk-live-drift-secret-9f8e7d';

type ToolDef = {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
};
const tool = (name: string, description: string, extra: Partial<ToolDef> = {}): ToolDef => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
  ...extra,
});

function text(res: unknown): string {
  return ((res as { content: { text: string }[] }).content[0] as { text: string }).text;
}

describe('drift quarantine on a durable store', () => {
  let dir: string;
  let toolsFile: string;
  let storePath: string;
  let configFile: string;
  let gw: TestGateway | undefined;
  let client: Client | undefined;
  let notified = 0;

  const config = () => ({
    mcpServers: {
      fx: {
        command: process.execPath,
        args: [DRIFT, `--label=\${DRIFT_LABEL}`],
        env: { DRIFT_TOOLS_FILE: toolsFile, API_TOKEN: `\${DRIFT_SECRET}` },
      },
    },
    gateway: { store: { path: storePath }, drift: { recheckSeconds: 0 } },
  });
  const env = { DRIFT_SECRET: SECRET, DRIFT_LABEL: SECRET };
  const writeTools = (tools: ToolDef[]) => writeFileSync(toolsFile, JSON.stringify(tools));
  const names = async () => (await client!.listTools()).tools;
  const start = async (
    raw: Parameters<typeof startTestGateway>[0] = config(),
    options: { waitReady?: boolean } = {},
  ) => {
    writeFileSync(configFile, JSON.stringify(raw));
    gw = await startTestGateway(raw, { env, trustPollMs: 100, ...options });
    client = await connectClient(gw.url);
    notified = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      notified++;
    });
  };
  const stop = async () => {
    await client?.close();
    await gw?.stop();
    client = undefined;
    gw = undefined;
  };
  /**
   * A manifold command on this test's config, without a terminal (as a script runs it), while the
   * gateway in this process goes on serving.
   */
  const manifold = (command: string, args: string[]) =>
    runCli([command, ...args, '--config', configFile], { env });
  const retrust = (args: string[]) => manifold('retrust', [...args, '--yes']);

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-drift-'));
    toolsFile = join(dir, 'tools.json');
    storePath = join(dir, 'state.db');
    configFile = join(dir, 'manifold.json');
    writeTools([
      tool('alpha', 'Alpha v1.'),
      tool('beta', 'Beta v1.'),
      tool('delta', 'Delta v1.', { annotations: { readOnlyHint: true } }),
    ]);
  });
  afterAll(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('C3: a description changed across a gateway restart is quarantined, and its call refused', async () => {
    await start();
    expect((await names()).find((t) => t.name === 'fx__alpha')?.description).toBe('Alpha v1.');
    await stop();
    writeTools([
      tool('alpha', 'Alpha v2: also uploads your files.'),
      tool('beta', 'Beta v1.'),
      tool('delta', 'Delta v1.', { annotations: { readOnlyHint: true } }),
    ]);
    await start();
    const alpha = (await names()).find((t) => t.name === 'fx__alpha')!;
    expect(alpha.description).toBe(
      'Quarantined: this tool changed after it was trusted. An operator must re-trust server fx.',
    );
    expect(alpha.inputSchema).toEqual({ type: 'object' });
    const call = await client!.callTool({ name: 'fx__alpha', arguments: {} });
    expect(call.isError).toBe(true);
    expect(text(call)).toMatch(/^Quarantined: .*re-trust server fx/);
    expect(text(await client!.callTool({ name: 'fx__beta', arguments: {} }))).toBe('called beta');
    const event = gw!.logs.find((l) => l.event === 'drift.quarantined' && l.tool === 'alpha');
    expect(event).toMatchObject({ server: 'fx' });
    expect(event?.oldFingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(event?.newFingerprint).not.toBe(event?.oldFingerprint);
    // The drifted text never reaches a client or a log line.
    expect(JSON.stringify(gw!.logs)).not.toContain('uploads your files');
    const audit = gw!.logs.find((l) => l.event === 'audit.tools_call' && l.tool === 'fx__alpha');
    expect(audit?.verdict).toBe('quarantined');
  });

  it('C4: a live change announced by list_changed is quarantined before the client is notified', async () => {
    writeTools([
      tool('alpha', 'Alpha v2: also uploads your files.'),
      tool('beta', 'Beta v2 changed live.'),
      tool('delta', 'Delta v1.', { annotations: { readOnlyHint: true } }),
    ]);
    await eventually(() => notified > 0, 'downstream list_changed');
    const beta = (await names()).find((t) => t.name === 'fx__beta')!;
    expect(beta.description).toMatch(/^Quarantined:/);
  });

  it('C1: an annotation escalation alone is drift', async () => {
    const before = notified;
    writeTools([
      tool('alpha', 'Alpha v2: also uploads your files.'),
      tool('beta', 'Beta v2 changed live.'),
      tool('delta', 'Delta v1.', { annotations: { readOnlyHint: false } }),
    ]);
    await eventually(() => notified > before, 'list_changed after the annotation change');
    expect((await names()).find((t) => t.name === 'fx__delta')?.description).toMatch(/^Quarantined:/);
  });

  it('C3: a new tool is withheld, and a removed tool is logged and gone with a readable error', async () => {
    const before = notified;
    writeTools([
      tool('alpha', 'Alpha v2: also uploads your files.'),
      tool('beta', 'Beta v2 changed live.'),
      tool('gamma', 'Gamma is new.'),
    ]);
    await eventually(() => notified > before, 'list_changed after adding gamma and removing delta');
    const listed = (await names()).map((t) => t.name);
    expect(listed).not.toContain('fx__gamma');
    expect(listed).not.toContain('fx__delta');
    await expect(client!.callTool({ name: 'fx__gamma', arguments: {} })).rejects.toThrow(
      /Unknown tool: fx__gamma/,
    );
    await expect(client!.callTool({ name: 'fx__delta', arguments: {} })).rejects.toThrow(
      /tool fx__delta is no longer published by server fx/,
    );
    expect(gw!.logs.some((l) => l.event === 'drift.withheld' && l.tool === 'gamma')).toBe(true);
    expect(gw!.logs.some((l) => l.event === 'drift.removed' && l.tool === 'delta')).toBe(true);
  });

  it('/healthz and manifold check name the quarantined and withheld tools; check exits 1 and records nothing', async () => {
    const health = await (await fetch(gw!.url.replace('/mcp', '/healthz'))).json();
    const fx = health.upstreams.find((u: { name: string }) => u.name === 'fx');
    expect(fx.drift).toEqual({ quarantined: ['alpha', 'beta'], withheld: ['gamma'] });
    const r = await manifold('check', []);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stdout).toContain('fx: quarantined (changed since trusted): alpha, beta');
    expect(r.stdout).toContain('fx: withheld (new, never trusted): gamma');
    expect(r.stdout).toContain('`manifold retrust fx`');
    expect(r.stdout + r.stderr).not.toContain('baseline_recorded');
    // Still pending for the gateway: check accepted nothing.
    expect((await manifold('drift', ['fx'])).status).toBe(1);
  });

  it('manifold drift shows every pending change with its diff, exits 1, and changes nothing', async () => {
    const r = await manifold('drift', []);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stdout).toContain('fx: 4 change(s) since it was trusted; `manifold retrust fx` to accept');
    expect(r.stdout).toContain('- Alpha v1.');
    expect(r.stdout).toContain('+ Alpha v2: also uploads your files.');
    expect(r.stdout).toContain('+ Beta v2 changed live.');
    expect(r.stdout).toContain('+ new tool gamma');
    expect(r.stdout).toContain('- removed tool delta');
    // Nothing was accepted: the gateway still quarantines and withholds.
    const tools = await names();
    expect(tools.find((t) => t.name === 'fx__beta')?.description).toMatch(/^Quarantined:/);
    expect(tools.map((t) => t.name)).not.toContain('fx__gamma');
    expect((await manifold('drift', ['nosuch'])).status).toBe(2);
  });

  it('retrust without --yes and without a terminal refuses and writes nothing', async () => {
    const r = await manifold('retrust', ['fx']);
    expect(r.status).toBe(2);
    expect(r.stdout).toContain('+ new tool gamma');
    expect(r.stderr).toContain('not re-trusted: confirm on a terminal, or pass --yes');
    expect((await manifold('drift', ['fx'])).status).toBe(1);
    expect((await names()).find((t) => t.name === 'fx__beta')?.description).toMatch(/^Quarantined:/);
  });

  it('retrust on a terminal asks, and a "n" leaves the server as it was', async () => {
    // script(1) gives the command a pseudo-terminal; "n" is typed at the prompt.
    const command = [process.execPath, CLI, 'retrust', 'fx', '--tool', 'beta', '--config', configFile]
      .map((a) => `'${a}'`)
      .join(' ');
    const r = await run('script', ['-qec', command, '/dev/null'], { env, input: 'n\n' });
    expect(r.stdout).toContain('re-trust fx (tool beta) with the 1 change(s) above? [y/N]');
    expect(r.stdout).toContain('not re-trusted: fx is unchanged');
    expect(r.status).toBe(1);
    expect((await names()).find((t) => t.name === 'fx__beta')?.description).toMatch(/^Quarantined:/);
  });

  it('retrust --tool shows the diff and restores only that tool, live', async () => {
    const before = notified;
    const r = await retrust(['fx', '--tool', 'alpha']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('- Alpha v1.');
    expect(r.stdout).toContain('+ Alpha v2: also uploads your files.');
    await eventually(() => notified > before, 'list_changed after retrust');
    const tools = await names();
    expect(tools.find((t) => t.name === 'fx__alpha')?.description).toBe('Alpha v2: also uploads your files.');
    expect(tools.find((t) => t.name === 'fx__beta')?.description).toMatch(/^Quarantined:/);
    expect(text(await client!.callTool({ name: 'fx__alpha', arguments: {} }))).toBe('called alpha');
    // #52 drift history: held back, then accepted from the shell (whose operator it cannot name).
    expect(await gw!.gateway.store.driftHistory('fx', 'alpha', 10)).toEqual([
      expect.objectContaining({ kind: 'accepted', by: 'manifold retrust (CLI)' }),
      expect.objectContaining({ kind: 'quarantined' }),
    ]);
  });

  it('C3: retrust of the whole server restores every tool with its new text', async () => {
    const before = notified;
    const r = await retrust(['fx']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('+ new tool gamma');
    await eventually(() => notified > before, 'list_changed after retrust');
    const tools = await names();
    expect(tools.find((t) => t.name === 'fx__beta')?.description).toBe('Beta v2 changed live.');
    expect(tools.map((t) => t.name)).toContain('fx__gamma');
    await stop();
  });

  it('warm start: the catalog is served from the store while the upstream is still down', async () => {
    const raw = config();
    raw.mcpServers.fx.env = { ...raw.mcpServers.fx.env, DRIFT_HANG: '1' } as typeof raw.mcpServers.fx.env;
    (raw.gateway as Record<string, unknown>).connectTimeoutMs = 3000;
    await start(raw, { waitReady: false });
    const tools = await names();
    expect(tools.map((t) => t.name)).toEqual(['fx__alpha', 'fx__beta', 'fx__gamma']);
    expect(gw!.gateway.health().upstreams[0]?.state).toBe('connecting');
    await expect(client!.callTool({ name: 'fx__alpha', arguments: {} })).rejects.toThrow(/not connected/);
    await stop();
  });

  it('C2: a changed URL is refused until re-trusted', async () => {
    const http = spawn(process.execPath, [DRIFT, '--http'], {
      env: { ...process.env, DRIFT_TOOLS_FILE: toolsFile },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const port = await new Promise<number>((res) =>
        http.stdout?.once('data', (d) => res(Number(String(d).trim()))),
      );
      const remote = (path: string) => ({
        mcpServers: {
          remote: {
            url: `http://127.0.0.1:${port}${path}`,
            headers: { Authorization: `Bearer \${DRIFT_SECRET}` },
          },
        },
        gateway: {
          store: { path: storePath },
          drift: { recheckSeconds: 0 },
          allowedHosts: [`127.0.0.1:${port}`],
        },
      });
      await start(remote('/mcp'));
      expect((await names()).map((t) => t.name)).toContain('remote__alpha');
      await stop();
      await start(remote('/other/mcp'));
      expect((await names()).map((t) => t.name)).toEqual([]);
      expect(gw!.logs.some((l) => l.event === 'drift.identity_changed' && l.server === 'remote')).toBe(true);
      // Not emptied silently: /healthz and check name the server and the command.
      const health = await (await fetch(gw!.url.replace('/mcp', '/healthz'))).json();
      expect(health.upstreams.find((u: { name: string }) => u.name === 'remote').drift).toMatchObject({
        identityChanged: true,
      });
      const checked = await manifold('check', []);
      expect(checked.status).toBe(1);
      expect(checked.stdout).toContain('remote: its command, args or URL changed since it was trusted');
      expect(checked.stdout).toContain('`manifold retrust remote`');
      const before = notified;
      const r = await retrust(['remote']);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toContain('identity of remote changed');
      await eventually(() => notified > before, 'list_changed after re-trusting the new URL');
      expect((await names()).map((t) => t.name)).toContain('remote__alpha');
      await stop();
    } finally {
      await stopChild(http);
    }
  });

  it('C4: the periodic recheck catches a change that no list_changed announced', async () => {
    const http = spawn(process.execPath, [DRIFT, '--http'], {
      env: { ...process.env, DRIFT_TOOLS_FILE: toolsFile },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const port = await new Promise<number>((res) =>
        http.stdout?.once('data', (d) => res(Number(String(d).trim()))),
      );
      await start({
        mcpServers: { quiet: { url: `http://127.0.0.1:${port}/mcp` } },
        gateway: {
          store: { path: join(dir, 'quiet.db') },
          drift: { recheckSeconds: 1 },
          allowedHosts: [`127.0.0.1:${port}`],
        },
      });
      expect((await names()).find((t) => t.name === 'quiet__beta')?.description).toBe(
        'Beta v2 changed live.',
      );
      // A stateless HTTP server cannot push list_changed: only the timer can notice this.
      writeTools([
        tool('alpha', 'Alpha v2: also uploads your files.'),
        tool('beta', 'Beta v3, silently.'),
        tool('gamma', 'Gamma is new.'),
      ]);
      await eventually(() => notified > 0, 'list_changed after the periodic recheck');
      expect((await names()).find((t) => t.name === 'quiet__beta')?.description).toMatch(/^Quarantined:/);
      await stop();
    } finally {
      await stopChild(http);
    }
  });

  it('the database file holds no secret from the config', () => {
    for (const f of [storePath, `${storePath}-wal`]) {
      if (!existsSync(f)) continue;
      expect(readFileSync(f).includes(Buffer.from(SECRET))).toBe(false);
    }
    expect(existsSync(storePath)).toBe(true);
  });
});
