import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Balancer, startBalancer } from '../helpers/balancer.js';
import {
  type AnyHandle,
  connectLegacy,
  connectModern,
  DRIFT,
  type ModernHandle,
} from '../helpers/clients.js';
import { runCli } from '../helpers/dist.js';
import { testIssuer } from '../helpers/factories.js';
import { eventually } from '../helpers/harness.js';
import { modernRequest } from '../helpers/modern.js';
import { freshDatabase, type SpawnedInstance, spawnInstances } from '../helpers/postgres.js';

// #15: three `manifold serve` processes on one Postgres behind a round-robin balancer on loopback
// (no sticky routing): what clients of both eras see through it, what every instance sees after a
// drift and a re-trust, one rate limit for all, and one instance killed (SIGKILL) under load.
const INSTANCES = 3;
const ISS = 'https://issuer.balance.test';
const AUD = 'manifold-balance';
const LIMIT = 6;
const WINDOW_MS = 60_000;
/** The load: modern clients, each calling in a loop, and calls per client; capped by LOAD_CAP_MS. */
const LOADERS = 4;
const CALLS_EACH = 150;
const LOAD_CAP_MS = 120_000;

const tool = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
});
const V1 = ['alpha', 'beta', 'gamma', 'delta', 'epsilon'].map((n) => tool(n, `${n} v1.`));

interface Tool {
  name: string;
  description?: string;
}
const textOf = (r: unknown) => (r as { content?: { text?: string }[] }).content?.[0]?.text;

/** The processes whose parent is `pid` (from /proc: the test needs no ps). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The fields after the command (which may hold spaces) start after its closing parenthesis.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

/**
 * Every page of tools/list, following cursors (the v2 client may follow them itself): each page
 * may be served by another instance. `pages`: the tools/list requests on the wire.
 */
async function allPages(h: AnyHandle): Promise<{ tools: Tool[]; pages: number }> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  const sent = () => h.wire.filter((w) => w.body?.method === 'tools/list').length;
  const before = sent();
  do {
    const page =
      h.era === 'legacy'
        ? await h.client.listTools(cursor ? { cursor } : undefined)
        : await h.client.listTools(cursor ? { cursor } : undefined, { cacheMode: 'bypass' });
    tools.push(...(page.tools as Tool[]));
    cursor = page.nextCursor;
  } while (cursor);
  return { tools, pages: sent() - before };
}

describe('three gateways on one Postgres behind a round-robin balancer', () => {
  let url: string;
  let dir: string;
  let toolsFile: string;
  let configFile: string;
  let balancer: Balancer;
  const instances: SpawnedInstance[] = [];
  const clients: AnyHandle[] = [];
  const tokens: Record<string, string> = {};
  const env = () => ({
    MANIFOLD_PG_URL: url,
    MANIFOLD_CURSOR_SECRET: 'one-secret-every-instance-shares-0123456789',
  });

  beforeAll(async () => {
    url = await freshDatabase('balance');
    dir = mkdtempSync(join(tmpdir(), 'mf-pg-balance-'));
    toolsFile = join(dir, 'tools.json');
    configFile = join(dir, 'manifold.json');
    writeFileSync(toolsFile, JSON.stringify(V1));
    const issuer = await testIssuer(ISS, AUD);
    tokens.busy = await issuer.mint({ tid: 'busy', scope: 'tools:*' });
    tokens.limited = await issuer.mint({ tid: 'limited', scope: 'tools:*' });
    writeFileSync(
      configFile,
      JSON.stringify({
        mcpServers: {
          fx: { command: process.execPath, args: [DRIFT], env: { DRIFT_TOOLS_FILE: toolsFile } },
        },
        gateway: {
          store: { postgres: '${MANIFOLD_PG_URL}' },
          cursorSecret: '${MANIFOLD_CURSOR_SECRET}',
          pageSize: 2,
          drift: { recheckSeconds: 0 },
          auth: {
            ...issuer.auth,
            tenantClaim: 'tid',
            tenants: { limited: { callsPerMinute: LIMIT } },
          },
        },
      }),
    );
    await spawnInstances(configFile, env(), INSTANCES, instances);
    balancer = await startBalancer(instances.map((i) => i.port));
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await balancer?.close();
    for (const i of instances) await i.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** tools/list straight from one instance (not through the balancer). */
  const listedAt = async (i: SpawnedInstance): Promise<Tool[]> => {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await modernRequest(i.url, 'tools/list', cursor ? { cursor } : {}, {
        headers: { authorization: `Bearer ${tokens.busy}` },
      });
      tools.push(...((page.body.result?.tools as Tool[]) ?? []));
      cursor = page.body.result?.nextCursor as string | undefined;
    } while (cursor);
    return tools;
  };

  it('list, page and call through the balancer, for a modern and a legacy client', async () => {
    const modern = await connectModern(balancer.url, tokens.busy);
    const legacy = await connectLegacy(balancer.url, tokens.busy);
    clients.push(modern, legacy);
    for (const h of [modern, legacy]) {
      const { tools, pages } = await allPages(h);
      expect(tools.map((t) => t.name).sort()).toEqual(V1.map((t) => `fx__${t.name}`).sort());
      expect(pages).toBe(3);
      for (const name of ['alpha', 'beta', 'gamma']) {
        const r = await h.client.callTool({ name: `fx__${name}`, arguments: {} });
        expect(textOf(r)).toBe(`called ${name}`);
      }
    }
    // Round robin, no stickiness: every instance took part.
    for (const n of balancer.taken) expect(n).toBeGreaterThan(2);
  });

  it('C3: a drifted tool is quarantined by every instance, and refused through the balancer', async () => {
    writeFileSync(
      toolsFile,
      JSON.stringify([tool('alpha', 'alpha v2: also uploads your files.'), ...V1.slice(1)]),
    );
    for (const i of instances) {
      await eventually(
        async () =>
          /^Quarantined:/.test((await listedAt(i)).find((t) => t.name === 'fx__alpha')?.description ?? ''),
        `fx__alpha quarantined on the instance at ${i.port}`,
      );
    }
    for (const h of clients) {
      for (let n = 0; n < INSTANCES; n++) {
        const r = (await h.client.callTool({ name: 'fx__alpha', arguments: {} })) as { isError?: boolean };
        expect(r.isError).toBe(true);
        expect(textOf(r)).toMatch(/^Quarantined: .*re-trust server fx/);
      }
    }
  });

  it('manifold retrust (CLI) reaches every instance', async () => {
    const r = await runCli(['retrust', 'fx', '--yes', '--config', configFile], { env: env() });
    expect(r.status, r.stderr).toBe(0);
    for (const i of instances) {
      await eventually(
        async () =>
          (await listedAt(i)).find((t) => t.name === 'fx__alpha')?.description ===
          'alpha v2: also uploads your files.',
        `the re-trusted fx__alpha on the instance at ${i.port}`,
      );
    }
    for (const h of clients) {
      for (let n = 0; n < INSTANCES; n++) {
        expect(textOf(await h.client.callTool({ name: 'fx__alpha', arguments: {} }))).toBe('called alpha');
      }
    }
  });

  it('one rate limit for the tenant, whichever instance the balancer picks, in both eras', async () => {
    const into = Date.now() % WINDOW_MS;
    if (into > WINDOW_MS - 20_000) await new Promise((r) => setTimeout(r, WINDOW_MS - into + 100));
    const modern = await connectModern(balancer.url, tokens.limited);
    const legacy = await connectLegacy(balancer.url, tokens.limited);
    clients.push(modern, legacy);
    const outcomes: boolean[] = [];
    for (let round = 0; round < LIMIT; round++) {
      for (const h of [modern, legacy]) {
        try {
          const r = await h.client.callTool({ name: 'fx__beta', arguments: {} });
          expect(textOf(r)).toBe('called beta');
          outcomes.push(true);
        } catch (e) {
          expect((e as { code?: unknown }).code).toBe(-32029);
          outcomes.push(false);
        }
      }
    }
    expect(outcomes.filter(Boolean)).toHaveLength(LIMIT);
    expect(outcomes.slice(LIMIT).some(Boolean)).toBe(false);
  }, 60_000);

  it(
    'one instance killed under load: later calls succeed through the others; only calls in flight on it fail, as errors',
    async () => {
      const loaders: ModernHandle[] = [];
      for (let n = 0; n < LOADERS; n++) loaders.push(await connectModern(balancer.url, tokens.busy));
      clients.push(...loaders);
      const victim = instances[1]!;
      interface Outcome {
        started: number;
        ok: boolean;
        wrong?: string;
        error?: string;
      }
      const outcomes: Outcome[] = [];
      let killedAt = Number.POSITIVE_INFINITY;
      let done = 0;
      const killAfter = Math.floor((LOADERS * CALLS_EACH) / 3);
      const killed = new Promise<void>((resolve) => {
        victim.child.once('exit', () => {
          // From here on nothing can reach it: a new connection to it is refused.
          killedAt = performance.now();
          resolve();
        });
      });
      // Its stdio child outlives a SIGKILL (nothing is left to stop it): stopped by the test.
      const orphans = childrenOf(victim.child.pid!);
      const load = async (h: ModernHandle) => {
        for (let n = 0; n < CALLS_EACH; n++) {
          const started = performance.now();
          try {
            const r = (await h.client.callTool({ name: 'fx__beta', arguments: {} })) as { isError?: boolean };
            const text = textOf(r);
            if (r.isError) outcomes.push({ started, ok: false, error: text ?? 'isError' });
            else
              outcomes.push({
                started,
                ok: text === 'called beta',
                ...(text === 'called beta' ? {} : { wrong: text }),
              });
          } catch (e) {
            outcomes.push({ started, ok: false, error: String((e as Error).message).slice(0, 120) });
          }
          if (++done === killAfter) victim.child.kill('SIGKILL');
        }
      };
      const began = performance.now();
      await Promise.all(loaders.map(load));
      await killed;
      const ms = performance.now() - began;
      expect(orphans.length).toBeGreaterThan(0);
      for (const pid of orphans) {
        try {
          process.kill(pid, 'SIGTERM');
        } catch {
          // Already gone.
        }
      }
      const failed = outcomes.filter((o) => !o.ok);
      // What the victim was answering when it died: the balancer's connections to it that were cut.
      const inFlightAtKill = balancer.cut[1]!;
      expect(balancer.cut[0]).toBe(0);
      expect(balancer.cut[2]).toBe(0);
      // Never a wrong result: a failure is an error or an exception.
      expect(outcomes.filter((o) => o.wrong !== undefined)).toEqual([]);
      expect(failed.length).toBeLessThanOrEqual(inFlightAtKill);
      // Every failure started before the victim was gone; no call started after it fails.
      expect(failed.every((o) => o.started < killedAt)).toBe(true);
      const after = outcomes.filter((o) => o.started > killedAt);
      expect(after.length).toBeGreaterThan(0);
      expect(after.every((o) => o.ok)).toBe(true);
      expect(outcomes).toHaveLength(LOADERS * CALLS_EACH);
      // Nothing else is lost: the survivors list the whole catalog, paged across them.
      const { tools } = await allPages(loaders[0]!);
      expect(tools.map((t) => t.name).sort()).toEqual(V1.map((t) => `fx__${t.name}`).sort());
      console.info(
        `kill under load: ${outcomes.length} calls in ${Math.round(ms)} ms, ${failed.length} failed (in flight on the killed instance: ${inFlightAtKill}), ${after.length} started after the kill, all succeeded; failures: ${JSON.stringify(failed.map((f) => f.error))}`,
      );
    },
    LOAD_CAP_MS,
  );
});
