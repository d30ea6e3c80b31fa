import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, DRIFT } from '../helpers/clients.js';
import { runCli } from '../helpers/dist.js';
import { eventually, type TestGateway } from '../helpers/harness.js';
import { META_CAPS, modernRequest } from '../helpers/modern.js';
import { freshDatabase, startInstances, stopInstances } from '../helpers/postgres.js';

// #15: several gateway instances on one Postgres. Three gateways in this process, each with its
// own stdio child of the drift fixture (one tools file), share nothing but the database.
const INSTANCES = 3;

type ToolDef = { name: string; description: string; inputSchema: Record<string, unknown> };
const tool = (name: string, description: string): ToolDef => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
});

interface Tool {
  name: string;
  description?: string;
}
/** Fresh each time: a modern client would otherwise answer from its cache until the list's ttlMs. */
const listed = async (h: AnyHandle): Promise<Tool[]> =>
  (h.era === 'legacy'
    ? (await h.client.listTools()).tools
    : (await h.client.listTools(undefined, { cacheMode: 'bypass' })).tools) as Tool[];
const call = async (
  h: AnyHandle,
  name: string,
): Promise<{ isError?: boolean; content: { text: string }[] }> =>
  (await h.client.callTool({ name, arguments: {} })) as never;
const descriptionOf = async (h: AnyHandle, name: string) =>
  (await listed(h)).find((t) => t.name === name)?.description;

describe('several gateways on one Postgres', () => {
  let url: string;
  let dir: string;
  let toolsFile: string;
  let configFile: string;
  const gateways: TestGateway[] = [];
  const clients: AnyHandle[] = [];
  const env = () => ({
    MANIFOLD_PG_URL: url,
    MANIFOLD_CURSOR_SECRET: 'one-secret-every-instance-shares-0123456789',
  });
  /** The CLI on this config, while the gateways in this process go on serving. */
  const manifold = (args: string[]) => runCli([...args, '--config', configFile], { env: env() });

  beforeAll(async () => {
    url = await freshDatabase('gateways');
    dir = mkdtempSync(join(tmpdir(), 'mf-pg-e2e-'));
    toolsFile = join(dir, 'tools.json');
    configFile = join(dir, 'manifold.json');
    writeFileSync(
      toolsFile,
      JSON.stringify([tool('alpha', 'Alpha v1.'), tool('beta', 'Beta v1.'), tool('gamma', 'Gamma v1.')]),
    );
    const raw = {
      mcpServers: {
        fx: {
          command: process.execPath,
          args: [DRIFT],
          env: { DRIFT_TOOLS_FILE: toolsFile },
          approval: { ask: ['gamma'] },
        },
      },
      gateway: {
        store: { postgres: '${MANIFOLD_PG_URL}' },
        cursorSecret: '${MANIFOLD_CURSOR_SECRET}',
        drift: { recheckSeconds: 0 },
      },
    };
    writeFileSync(configFile, JSON.stringify(raw));
    // All at once, on a database none of them has seen: one migrates, one records the baseline.
    // Default trust settings (LISTEN, and the 2 s poll): the re-trust below measures what a deployment gets.
    await startInstances(raw, env(), INSTANCES, { gateways, clients });
  }, 600_000);

  afterAll(async () => {
    await stopInstances({ gateways, clients });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('instances started at once record one baseline, and all serve the same tools to both eras', async () => {
    const recorded = gateways.filter((gw) => gw.logs.some((l) => l.event === 'drift.baseline_recorded'));
    expect(recorded).toHaveLength(1);
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const { rows } = await db.query('SELECT name, baseline IS NOT NULL AS trusted FROM manifold_servers');
      expect(rows).toEqual([{ name: 'fx', trusted: true }]);
    } finally {
      await db.end();
    }
    for (const h of clients) {
      expect((await listed(h)).map((t) => [t.name, t.description])).toEqual([
        ['fx__alpha', 'Alpha v1.'],
        ['fx__beta', 'Beta v1.'],
        ['fx__gamma', 'Gamma v1.'],
      ]);
      expect((await call(h, 'fx__alpha')).content[0]!.text).toBe('called alpha');
    }
    // The database URL (a ${VAR}) is in no log line.
    for (const gw of gateways) expect(JSON.stringify(gw.logs)).not.toContain(url);
  });

  it('C3: a tool changed upstream is quarantined by every instance, for legacy and modern clients', async () => {
    writeFileSync(
      toolsFile,
      JSON.stringify([
        tool('alpha', 'Alpha v2: also uploads your files.'),
        tool('beta', 'Beta v1.'),
        tool('gamma', 'Gamma v1.'),
      ]),
    );
    for (const h of clients) {
      await eventually(
        async () => /^Quarantined:/.test((await descriptionOf(h, 'fx__alpha')) ?? ''),
        `fx__alpha quarantined for a ${h.era} client`,
      );
      const refused = await call(h, 'fx__alpha');
      expect(refused.isError).toBe(true);
      expect(refused.content[0]!.text).toMatch(/^Quarantined: .*re-trust server fx/);
      expect((await call(h, 'fx__beta')).content[0]!.text).toBe('called beta');
    }
  });

  it('an approval answered on two instances at once runs the call once: the claim is in Postgres', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const meta = { meta: { [META_CAPS]: { elicitation: { form: {} } } } };
    const asked = await modernRequest(a.url, 'tools/call', { name: 'fx__gamma', arguments: {} }, meta);
    expect(asked.body.result).toMatchObject({ resultType: 'input_required' });
    const retry = (on: string) =>
      modernRequest(
        on,
        'tools/call',
        {
          name: 'fx__gamma',
          arguments: {},
          requestState: asked.body.result!.requestState,
          inputResponses: { 'manifold.approval': { action: 'accept', content: { approve: true } } },
        },
        meta,
      );
    const answers = await Promise.all([retry(a.url), retry(b.url)]);
    const results = answers.map(
      (r) =>
        r.body.result as { isError?: boolean; content: { text: string }[]; _meta?: Record<string, unknown> },
    );
    expect(results.filter((r) => r.content[0]!.text === 'called gamma')).toHaveLength(1);
    const replayed = results.find((r) => r.isError);
    expect(replayed?._meta?.['manifold/approval']).toBe('replayed');
    // A third instance, later: still used.
    const late = await retry(gateways[2]!.url);
    expect((late.body.result as { _meta?: Record<string, unknown> })._meta?.['manifold/approval']).toBe(
      'replayed',
    );
  });

  it('manifold check and drift read the baselines from Postgres', async () => {
    const drift = await manifold(['drift', 'fx']);
    expect(drift.status, drift.stderr).toBe(1);
    expect(drift.stdout).toContain('- Alpha v1.');
    expect(drift.stdout).toContain('+ Alpha v2: also uploads your files.');
    const check = await manifold(['check']);
    expect(check.status, check.stderr).toBe(1);
    expect(check.stdout).toContain('fx: quarantined (changed since trusted): alpha');
    expect(drift.stdout + drift.stderr + check.stdout + check.stderr).not.toContain(url);
  });

  it('manifold retrust against Postgres reaches every instance at once (NOTIFY), the poll behind it', async () => {
    const started = Date.now();
    const r = await manifold(['retrust', 'fx', '--yes']);
    expect(r.status, r.stderr).toBe(0);
    const retrusted = Date.now();
    const seen: number[] = [];
    await Promise.all(
      clients.map(async (h) => {
        await eventually(
          async () => (await descriptionOf(h, 'fx__alpha')) === 'Alpha v2: also uploads your files.',
          `the re-trusted fx__alpha on a ${h.era} client`,
          10_000,
        );
        seen.push(Date.now() - retrusted);
      }),
    );
    for (const h of clients) expect((await call(h, 'fx__alpha')).content[0]!.text).toBe('called alpha');
    // The delay each instance took: from the re-trust's own timestamp (trusted_at) to its log line.
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const trustedAt = Number(
      (await db.query("SELECT trusted_at FROM manifold_servers WHERE name = 'fx'")).rows[0].trusted_at,
    );
    await db.end();
    const delays = gateways.map((gw) => {
      const line = gw.logs.find((l) => l.event === 'drift.retrust_seen');
      expect(line).toBeDefined();
      return Date.parse(String(line!.time)) - trustedAt;
    });
    // Reported, not asserted (no timing assertions): the delay is bounded by the wait above.
    console.info(
      `re-trust seen by the instances after ${delays.join(', ')} ms; served to every client ${Math.max(...seen)} ms after the CLI exited (it ran ${retrusted - started} ms)`,
    );
  });
});
