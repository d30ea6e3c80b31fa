import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFORMANCE_CLI, ensureRunner, NODE24, RUNNER_DIR, type Status } from '../helpers/conformance.js';
import { ROOT, startTestGateway, stopChild, type TestGateway } from '../helpers/harness.js';

/**
 * The official conformance suite as referee: its server requirement sets of 2026-07-28 and
 * 2025-11-25, each run against the project's reference fixture directly and through the gateway
 * (the fixture over streamable HTTP and over stdio, mounted with `prefix: false`). The gateway
 * must pass every check the fixture passes, except what test/conformance/expected-failures.json
 * lists with its reason; an entry that passes is stale and fails the test too.
 */

const CLI = CONFORMANCE_CLI;
const FIXTURE = join(ROOT, 'test/fixtures/reference-server.mjs');
const REVISIONS = ['2026-07-28', '2025-11-25'] as const;

/** scenario -> check id -> the most severe status seen for that id. */
type Outcome = Map<string, Map<string, Status>>;

const SEVERITY: Record<string, number> = { FAILURE: 3, WARNING: 2, INFO: 1, SKIPPED: 1, SUCCESS: 0 };

function runSuite(url: string, revision: string): Promise<Outcome> {
  const out = mkdtempSync(join(tmpdir(), 'mf-conformance-'));
  return new Promise((resolve, reject) => {
    execFile(
      NODE24,
      [CLI, 'server', '--url', url, '--requirements', revision, '-o', out],
      { cwd: out, timeout: 240_000, maxBuffer: 32 * 1024 * 1024 },
      (error) => {
        // The exit code is not the verdict (it counts only scored scenarios): the checks are.
        if (error && (error as { killed?: boolean }).killed)
          return reject(new Error(`conformance run timed out: ${url}`));
        const outcome: Outcome = new Map();
        for (const dir of readdirSync(out)) {
          const file = join(out, dir, 'checks.json');
          if (!existsSync(file)) continue;
          const scenario = dir.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
          const checks = JSON.parse(readFileSync(file, 'utf8')) as { id: string; status: Status }[];
          const byId = outcome.get(scenario) ?? new Map<string, Status>();
          for (const c of checks) {
            const prev = byId.get(c.id);
            if (!prev || (SEVERITY[c.status] ?? 0) > (SEVERITY[prev] ?? 0)) byId.set(c.id, c.status);
          }
          outcome.set(scenario, byId);
        }
        if (outcome.size === 0)
          return reject(new Error(`the conformance run against ${url} produced no results: ${error}`));
        resolve(outcome);
      },
    );
  });
}

function failures(outcome: Outcome): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [scenario, checks] of outcome) {
    const failed = [...checks].filter(([, s]) => s === 'FAILURE').map(([id]) => id);
    if (failed.length > 0) out.set(scenario, failed);
  }
  return out;
}

/** Where the gateway falls short of the fixture: [scenario, check id, what happened]. */
function shortfalls(direct: Outcome, gateway: Outcome): [string, string, string][] {
  const out: [string, string, string][] = [];
  for (const [scenario, checks] of direct) {
    const through = gateway.get(scenario);
    if (!through) {
      out.push([scenario, '*', 'did not run through the gateway']);
      continue;
    }
    // A check the fixture passes must not fail, nor go missing, through the gateway.
    for (const [id, status] of checks) {
      if (status === 'FAILURE') continue;
      const got = through.get(id);
      if (got === undefined)
        out.push([scenario, id, 'passes against the fixture but never ran through the gateway']);
      else if (got === 'FAILURE')
        out.push([scenario, id, 'fails through the gateway but passes against the fixture']);
    }
    for (const [id, status] of through) {
      if (status === 'FAILURE' && !checks.has(id)) out.push([scenario, id, 'fails through the gateway only']);
    }
  }
  return out;
}

/**
 * The shortfalls no expected-failure entry excuses, and the entries that excuse nothing (stale).
 * An entry names a whole scenario, or one check as `scenario:check-id`.
 */
function judge(direct: Outcome, gateway: Outcome, expected: Record<string, string>): string[] {
  const used = new Set<string>();
  const problems: string[] = [];
  for (const [scenario, id, what] of shortfalls(direct, gateway)) {
    const key = expected[scenario] !== undefined ? scenario : `${scenario}:${id}`;
    if (expected[key] !== undefined) used.add(key);
    else problems.push(`${scenario}:${id} ${what}`);
  }
  for (const key of Object.keys(expected)) {
    if (!used.has(key) && direct.has(key.split(':')[0]!)) {
      problems.push(
        `${key} is listed as an expected failure but passes: remove it from expected-failures.json`,
      );
    }
  }
  return problems;
}

describe('the official conformance suite, directly against the fixture and through the gateway', () => {
  let fixture: ChildProcess;
  let fixtureUrl: string;
  let viaHttp: TestGateway;
  let viaStdio: TestGateway;
  const expected = JSON.parse(readFileSync(join(RUNNER_DIR, 'expected-failures.json'), 'utf8')) as Record<
    string,
    Record<string, string>
  >;

  beforeAll(async () => {
    ensureRunner();
    fixture = spawn(process.execPath, [FIXTURE, 'http', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    fixture.stderr?.resume();
    const port = await new Promise<number>((resolve, reject) => {
      let buf = '';
      fixture.stdout?.on('data', (c: Buffer) => {
        buf += c.toString();
        const m = /listening (\d+)/.exec(buf);
        if (m) resolve(Number(m[1]));
      });
      fixture.once('exit', (code) => reject(new Error(`the reference fixture exited (${code})`)));
    });
    fixtureUrl = `http://127.0.0.1:${port}/mcp`;
    viaHttp = await startTestGateway({
      mcpServers: {
        ref: { url: fixtureUrl, prefix: false, clientFeatures: { sampling: true, roots: true } },
      },
      gateway: { allowedHosts: [`127.0.0.1:${port}`], streamPollMs: 200 },
    });
    viaStdio = await startTestGateway({
      mcpServers: {
        ref: {
          command: process.execPath,
          args: [FIXTURE, 'stdio'],
          prefix: false,
          clientFeatures: { sampling: true, roots: true },
        },
      },
      // 2025-11-25 calls that run on are told to poll (SEP-1699): the suite's reconnection check.
      gateway: { streamPollMs: 200 },
    });
    for (const gw of [viaHttp, viaStdio]) {
      const health = gw.gateway.health();
      expect(health.upstreams[0]).toMatchObject({
        state: 'ready',
        era: 'modern',
        protocolVersion: '2026-07-28',
      });
    }
  }, 330_000);

  afterAll(async () => {
    await viaHttp?.stop();
    await viaStdio?.stop();
    if (fixture) await stopChild(fixture);
  });

  for (const revision of REVISIONS) {
    it(`--requirements ${revision}: the gateway passes what the fixture passes (fixture over HTTP and over stdio)`, async () => {
      const [direct, http, stdio] = await Promise.all([
        runSuite(fixtureUrl, revision),
        runSuite(viaHttp.url, revision),
        runSuite(viaStdio.url, revision),
      ]);
      // The referee's referee: the fixture itself passes everything it is run against.
      expect([...failures(direct)].map(([s, ids]) => `${s}: ${ids.join(', ')}`)).toEqual([]);
      expect(direct.size).toBeGreaterThanOrEqual(revision === '2026-07-28' ? 37 : 30);
      const allowed = (expected[revision] ?? {}) as Record<string, string>;
      expect(judge(direct, http, allowed), 'fixture over streamable HTTP').toEqual([]);
      expect(judge(direct, stdio, allowed), 'fixture over stdio').toEqual([]);
    }, 300_000);
  }
});
