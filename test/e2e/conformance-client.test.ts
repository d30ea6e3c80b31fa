import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  CONFORMANCE_CLI,
  ensureRunner,
  listClientScenarios,
  NODE24,
  RUNNER_DIR,
  readChecks,
} from '../helpers/conformance.js';
import { ROOT } from '../helpers/harness.js';

/**
 * The official conformance suite with Manifold as the client (#19): every client scenario of the
 * 2026-07-28 and 2025-11-25 requirement sets, and the auth extensions, each run against
 * test/conformance/manifold-client.mjs, the driver that puts a gateway between a downstream SDK
 * client and the suite's (protected) server. A scenario passes when the suite says so (its exit
 * code: no FAILURE or WARNING, no timeout, no unexpected client error). What fails must be listed
 * in test/conformance/client-expected-failures.json with its reason; a listed entry that passes is
 * stale and fails the test too. No `auth/*` scenario of either requirement set may be listed.
 *
 * One scenario per suite run, a few at a time: `--requirements` would start every scenario's
 * gateway at once, which on two cores turns into timeouts rather than verdicts.
 */

const DRIVER = join(ROOT, 'test/conformance/manifold-client.mjs');
const CONCURRENCY = 3;

interface Verdict {
  scenario: string;
  passed: boolean;
  /** Check ids that were FAILURE or WARNING. */
  failed: string[];
  ms: number;
}

function runScenario(scenario: string, revision: string, force: boolean): Promise<Verdict> {
  const out = mkdtempSync(join(tmpdir(), 'mf-conf-client-'));
  const started = Date.now();
  const args = [
    CONFORMANCE_CLI,
    'client',
    '--command',
    // The suite splits this on spaces and runs it with a shell: absolute paths, Node 20 (ours).
    `${process.execPath} ${DRIVER}`,
    '--scenario',
    scenario,
    '--spec-version',
    revision,
    ...(force ? ['--force'] : []),
    '-o',
    out,
    '--timeout',
    '60000',
  ];
  return new Promise((resolve) => {
    execFile(NODE24, args, { cwd: out, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (error) => {
      const checks = readChecks(out);
      const failed = [...checks].filter(([, s]) => s === 'FAILURE' || s === 'WARNING').map(([id]) => id);
      resolve({ scenario, passed: !error && checks.size > 0, failed, ms: Date.now() - started });
    });
  });
}

async function runAll(scenarios: string[], revision: string, force = false): Promise<Verdict[]> {
  const queue = [...scenarios];
  const verdicts: Verdict[] = [];
  const worker = async () => {
    for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
      verdicts.push(await runScenario(s, revision, force));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return verdicts.sort((a, b) => a.scenario.localeCompare(b.scenario));
}

/**
 * The failures no entry excuses, and the entries that excuse nothing. An entry names a whole
 * scenario, or one check as `scenario:check-id` (the scenario then fails only on listed checks).
 */
function judge(verdicts: Verdict[], expected: Record<string, string>): string[] {
  const problems: string[] = [];
  const used = new Set<string>();
  for (const v of verdicts) {
    if (expected[v.scenario] !== undefined) {
      if (v.passed) problems.push(`${v.scenario} is listed as an expected failure but passes: remove it`);
      used.add(v.scenario);
      continue;
    }
    if (v.passed) continue;
    const unlisted = v.failed.filter((id) => expected[`${v.scenario}:${id}`] === undefined);
    for (const id of v.failed) if (!unlisted.includes(id)) used.add(`${v.scenario}:${id}`);
    if (unlisted.length > 0 || v.failed.length === 0) {
      problems.push(
        `${v.scenario} fails: ${unlisted.join(', ') || 'the client exited non-zero or timed out'}`,
      );
    }
  }
  const ran = new Set(verdicts.map((v) => v.scenario));
  for (const key of Object.keys(expected)) {
    const scenario = key.split(':')[0]!;
    if (!used.has(key) && ran.has(scenario) && key.includes(':'))
      problems.push(`${key} is listed as an expected failure but that check passes: remove it`);
    if (!ran.has(scenario)) problems.push(`${key} is listed but the scenario no longer exists in this set`);
  }
  return problems;
}

const report = (label: string, verdicts: Verdict[], wallMs: number) => {
  const lines = verdicts.map(
    (v) =>
      `  ${v.passed ? 'pass' : 'FAIL'} ${v.scenario} (${v.ms} ms)${v.failed.length ? `: ${v.failed.join(', ')}` : ''}`,
  );
  console.log(
    `conformance client ${label}: ${verdicts.length} scenarios in ${wallMs} ms\n${lines.join('\n')}`,
  );
};

describe('the official conformance suite with Manifold as the client', () => {
  const expected = JSON.parse(
    readFileSync(join(RUNNER_DIR, 'client-expected-failures.json'), 'utf8'),
  ) as Record<string, Record<string, string>>;

  beforeAll(() => {
    ensureRunner();
    if (!existsSync(join(ROOT, 'dist/deploy/node/http/serve.js')))
      throw new Error(
        'dist is missing: run npm run build (npm test does); the driver imports the built gateway',
      );
  }, 330_000);

  for (const revision of ['2026-07-28', '2025-11-25'] as const) {
    it(`--requirements ${revision}: every client scenario passes, auth/* without exception`, async () => {
      const { required } = listClientScenarios(revision);
      expect(required.filter((s) => s.startsWith('auth/')).length).toBeGreaterThanOrEqual(
        revision === '2026-07-28' ? 25 : 14,
      );
      const allowed = expected[revision] ?? {};
      expect(Object.keys(allowed).filter((k) => k.startsWith('auth/'))).toEqual([]);
      const started = Date.now();
      const verdicts = await runAll(required, revision);
      report(revision, verdicts, Date.now() - started);
      expect(judge(verdicts, allowed)).toEqual([]);
    }, 600_000);
  }

  it('the auth extensions: client_credentials passes; the deferred ones are listed with their reason', async () => {
    const { extension } = listClientScenarios('2026-07-28');
    expect(extension).toContain('auth/client-credentials-basic');
    const allowed = expected.extension ?? {};
    expect(allowed['auth/client-credentials-basic']).toBeUndefined();
    const started = Date.now();
    const verdicts = await runAll(extension, '2026-07-28', true);
    report('extensions', verdicts, Date.now() - started);
    expect(judge(verdicts, allowed)).toEqual([]);
  }, 600_000);
});
