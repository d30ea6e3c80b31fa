import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../deploy/node/store/sqlite.js';
import { buildCatalog } from '../../src/aggregate/catalog.js';
import { grantsMatcher, principalFromClaims } from '../../src/auth/grants.js';
import { formatIssues, parseConfigObject } from '../../src/config/load.js';
import type { AuthConfig, ServerConfig } from '../../src/config/types.js';
import { fingerprintTool } from '../../src/guards/canonical-json.js';
import { baselineFrom, decideDrift } from '../../src/guards/drift/verdict.js';
import { annotatedClass, approvalDecider, PRESETS, riskClassifier } from '../../src/guards/risk.js';
import { approvalQuestion, canElicitForm, outcomeOf } from '../../src/server/mcp/rounds/approval.js';
import { MemoryStateStore } from '../../src/store/state.js';

const tool = (name: string, annotations?: Record<string, unknown>): Tool => ({
  name,
  inputSchema: { type: 'object' },
  ...(annotations ? { annotations } : {}),
});

describe('risk classes and trust tiers', () => {
  it('a declared class wins over any hint; the first glob in written order decides', () => {
    const classify = riskClassifier({
      risk: [
        { pattern: 'get_secret', class: 'execute' },
        { pattern: 'get_*', class: 'read' },
        { pattern: '*', class: 'write' },
      ],
      trustAnnotations: true,
    });
    expect(classify(tool('get_issue', { destructiveHint: true }))).toBe('read');
    expect(classify(tool('get_secret'))).toBe('execute');
    expect(classify(tool('anything', { readOnlyHint: true }))).toBe('write');
  });

  it('untrusted annotations never change the class', () => {
    const classify = riskClassifier({ risk: [], trustAnnotations: false });
    expect(classify(tool('t', { readOnlyHint: true }))).toBe('undeclared');
    expect(classify(tool('t', { destructiveHint: true }))).toBe('undeclared');
  });

  it('trusted annotations count only as the literal true / false', () => {
    expect(annotatedClass({ readOnlyHint: true })).toBe('read');
    expect(annotatedClass({ destructiveHint: true })).toBe('destructive');
    // Contradicting hints: the riskier reading.
    expect(annotatedClass({ readOnlyHint: true, destructiveHint: true })).toBe('destructive');
    expect(annotatedClass({ readOnlyHint: false, destructiveHint: false })).toBe('write');
    expect(annotatedClass({ readOnlyHint: 'true' })).toBe('undeclared');
    expect(annotatedClass({ readOnlyHint: 1 })).toBe('undeclared');
    expect(annotatedClass({ readOnlyHint: false })).toBe('undeclared');
    expect(annotatedClass(undefined)).toBe('undeclared');
    expect(annotatedClass(Object.create({ readOnlyHint: true }))).toBe('undeclared');
  });

  it('the preset table is the documented one', () => {
    expect(PRESETS.strict).toEqual({
      read: 'allow',
      write: 'ask',
      network: 'ask',
      execute: 'ask',
      destructive: 'deny',
      undeclared: 'ask',
    });
    expect(PRESETS.standard).toEqual({
      read: 'allow',
      write: 'allow',
      network: 'ask',
      execute: 'ask',
      destructive: 'ask',
      undeclared: 'ask',
    });
    expect(Object.values(PRESETS.off).every((d) => d === 'allow')).toBe(true);
  });

  it('approval lists: deny before ask before allow, then the preset; risk:<class> names a class', () => {
    const decide = approvalDecider({
      preset: 'standard',
      ask: ['send_*', 'risk:write'],
      deny: ['drop_*', 'risk:destructive'],
      allow: ['run_tests', 'send_ping'],
      timeoutSeconds: 120,
    });
    expect(decide('drop_table', 'read')).toBe('deny');
    expect(decide('rm', 'destructive')).toBe('deny');
    expect(decide('send_ping', 'read')).toBe('ask');
    expect(decide('insert', 'write')).toBe('ask');
    expect(decide('run_tests', 'execute')).toBe('allow');
    expect(decide('other', 'execute')).toBe('ask');
    expect(decide('lookup', 'read')).toBe('allow');
  });
});

describe('approval settings in the config', () => {
  const parse = (approval: unknown, extra: Record<string, unknown> = {}) =>
    parseConfigObject({ mcpServers: { s: { command: 'x', approval, ...extra } } }, {});

  it('accepts a preset, a list, or the object form, with the default deadline', () => {
    for (const [raw, want] of [
      ['strict', { preset: 'strict', ask: [] }],
      [['delete_*', 'risk:destructive'], { preset: 'off', ask: ['delete_*', 'risk:destructive'] }],
      [
        { preset: 'standard', deny: ['drop_*'], timeoutSeconds: 30 },
        { preset: 'standard', deny: ['drop_*'] },
      ],
    ] as const) {
      const r = parse(raw);
      if (!r.ok) throw new Error(formatIssues(r.errors));
      expect(r.config.servers[0]?.approval).toMatchObject(want);
    }
    const r = parse('standard');
    expect(r.ok && r.config.servers[0]?.approval.timeoutSeconds).toBe(120);
  });

  it('every problem at once, with its path and a fix: bare classes, unknown classes, bad deadline and risk', () => {
    const r = parseConfigObject(
      {
        mcpServers: {
          s: {
            command: 'x',
            approval: { ask: ['destructive'], deny: ['risk:dangerous'], preset: 'lax', timeoutSeconds: 0 },
            risk: { 'get_*': 'readonly' },
            retry: 9,
          },
        },
      },
      {},
    );
    expect(r.ok).toBe(false);
    const text = r.ok ? '' : formatIssues(r.errors);
    expect(text).toContain('mcpServers.s.approval');
    expect(text).toContain('mcpServers.s.risk');
    expect(text).toContain('mcpServers.s.retry');
    const r2 = parse({ ask: ['destructive'], deny: ['risk:dangerous'] });
    expect(r2.ok).toBe(false);
    const text2 = r2.ok ? '' : formatIssues(r2.errors);
    expect(text2).toContain('mcpServers.s.approval.ask[0]');
    expect(text2).toContain('"risk:destructive"');
    expect(text2).toContain('mcpServers.s.approval.deny[0]');
    expect(text2).toContain('unknown risk class');
  });
});

describe('risk grants', () => {
  const auth = {
    issuer: 'https://i',
    audience: 'a',
    clockToleranceSeconds: 30,
    maxTokenLifetimeSeconds: 86_400,
    tokenTypes: ['JWT'],
    tenantClaim: 'sub',
    tenants: { capped: { grants: ['risk:read', 'gh__*'] } },
    authorizationServers: [],
    jwksCooldownSeconds: 30,
    jwksTimeoutMs: 5000,
    secret: 'x'.repeat(32),
  } as AuthConfig;

  it('risk:read matches every read tool and never an undeclared one; tool patterns still work beside it', () => {
    const granted = grantsMatcher(
      principalFromClaims({ sub: 'u', scope: 'risk:read tools:gh__issue' }, auth),
    );
    expect(granted('fs__read_file', 'read')).toBe(true);
    expect(granted('fs__write_file', 'write')).toBe(false);
    expect(granted('fs__mystery', 'undeclared')).toBe(false);
    expect(granted('gh__issue', 'undeclared')).toBe(true);
    // risk:undeclared grants nothing.
    const none = grantsMatcher(principalFromClaims({ sub: 'u', scope: 'risk:undeclared' }, auth));
    expect(none('x__y', 'undeclared')).toBe(false);
  });

  it('a tenant cap with a risk class narrows a token: grants never widen it', () => {
    const granted = grantsMatcher(principalFromClaims({ sub: 'capped', scope: 'tools:*' }, auth));
    expect(granted('fs__read_file', 'read')).toBe(true);
    expect(granted('gh__delete_repo', 'destructive')).toBe(true);
    expect(granted('fs__write_file', 'write')).toBe(false);
  });
});

describe('drift and the classes annotations give', () => {
  const listed = async (t: Tool) => [{ tool: t, fingerprint: await fingerprintTool(t) }];

  it('a hint change that raises the class is drift, trusted or not', async () => {
    const baseline = await baselineFrom([tool('t', { readOnlyHint: true, destructiveHint: false })]);
    for (const trustAnnotations of [false, true]) {
      const [v] = decideDrift(baseline, await listed(tool('t', { destructiveHint: true })), {
        trustAnnotations,
      });
      expect(v?.kind).toBe('quarantined');
    }
  });

  it('with trusted annotations, a new claim of safety that loosens the class is drift too', async () => {
    const baseline = await baselineFrom([tool('t')]);
    const now = await listed(tool('t', { readOnlyHint: true }));
    expect(decideDrift(baseline, now)[0]?.kind).toBe('trusted');
    const [v] = decideDrift(baseline, now, { trustAnnotations: true });
    expect(v).toMatchObject({
      kind: 'quarantined',
      reasons: ['trusted annotations now classify it read (was undeclared)'],
    });
  });
});

describe('the catalog carries each tool its class and decision', () => {
  it('quarantined tools are refused whatever the policy, and describe_tool always runs', () => {
    const server = {
      name: 's',
      type: 'stdio',
      command: 'x',
      args: [],
      env: {},
      headers: {},
      prefix: 's',
      tools: { deny: [] },
      prompts: { deny: [] },
      resources: { deny: [] },
      timeoutMs: 1000,
      disabled: false,
      maxResultBytes: 65536,
      budgetTokens: 1,
      protocol: 'auto',
      isolation: 'shared',
      maxInstances: 16,
      instanceIdleSeconds: 300,
      clientFeatures: { elicitation: true, sampling: false, roots: false },
      risk: [{ pattern: 'r*', class: 'read' }],
      trustAnnotations: false,
      approval: { preset: 'strict', ask: [], deny: [], allow: [], timeoutSeconds: 120 },
      retry: 1,
    } satisfies ServerConfig;
    const big = { type: 'object', properties: { q: { type: 'string', description: 'x'.repeat(400) } } };
    const catalog = buildCatalog(
      [
        {
          server,
          tools: [
            { ...tool('read_it'), inputSchema: big as Tool['inputSchema'] },
            { ...tool('upstream_meta'), _meta: { 'manifold/risk': 'read', other: 1 } },
          ],
          quarantined: [tool('changed')],
        },
      ],
      1,
    );
    const by = (n: string) => catalog.byName.get(n)!;
    expect(by('s__read_it')).toMatchObject({ risk: 'read', approval: 'allow', deferred: true });
    // An upstream cannot claim a class for itself through _meta; its other keys stay.
    expect(by('s__upstream_meta').tool._meta).toEqual({
      'manifold/risk': 'undeclared',
      'manifold/approval': 'ask',
      other: 1,
    });
    expect(by('s__changed')).toMatchObject({ quarantined: true, approval: 'deny' });
    expect(by('manifold__describe_tool')).toMatchObject({ approval: 'allow' });
  });
});

describe('the approval question and answers', () => {
  const entry = {
    name: 'gh__delete_repo',
    server: 'gh',
    original: 'delete_repo',
    risk: 'destructive',
  } as Parameters<typeof approvalQuestion>[0];

  it('names server, tool and class; shows arguments bounded, stripped and with secrets redacted', async () => {
    const secret = 'ghp_SECRETVALUE123';
    const q = await approvalQuestion(
      entry,
      { repo: 'acme/x\u202e', token: secret, blob: 'y'.repeat(5000) },
      (t) => t.split(secret).join('[redacted]'),
    );
    const message = String(q.params.message);
    expect(message).toContain('delete_repo of server gh');
    expect(message).toContain('classified destructive');
    expect(message).not.toContain(secret);
    expect(message).toContain('[redacted]');
    expect(message).not.toContain('\u202e');
    expect(message.length).toBeLessThan(2500);
    expect(message).toContain('more characters');
    // The digest is of the canonical arguments: key order does not matter, values do.
    const a = await approvalQuestion(entry, { a: 1, b: 2 }, (t) => t);
    const b = await approvalQuestion(entry, { b: 2, a: 1 }, (t) => t);
    const c = await approvalQuestion(entry, { a: 1, b: 3 }, (t) => t);
    expect(a.digest).toBe(b.digest);
    expect(a.digest).not.toBe(c.digest);
  });

  it('only accept with approve: true is a yes', () => {
    expect(outcomeOf({ action: 'accept', content: { approve: true } })).toBe('accepted');
    expect(outcomeOf({ action: 'accept', content: {} })).toBe('declined');
    expect(outcomeOf({ action: 'accept', content: { approve: 'true' } })).toBe('declined');
    expect(outcomeOf({ action: 'decline' })).toBe('declined');
    expect(outcomeOf({ action: 'cancel' })).toBe('cancelled');
    expect(outcomeOf(undefined)).toBe('cancelled');
  });

  it('a client that declared only URL-mode elicitation cannot be asked a form', () => {
    expect(canElicitForm({ elicitation: {} })).toBe(true);
    expect(canElicitForm({ elicitation: { form: {} } })).toBe(true);
    expect(canElicitForm({ elicitation: { url: {} } })).toBe(false);
    expect(canElicitForm({})).toBe(false);
  });
});

describe('claims: single use, in any store', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mf-claims-'));
  for (const [label, open] of [
    ['memory', () => new MemoryStateStore()],
    ['sqlite', () => openSqliteStore(join(dir, 'claims.db'))],
  ] as const) {
    it(`${label}: the first claim wins, every later one loses, even after a sweep`, async () => {
      const store = open();
      expect(await store.claim('k1', 2_000, 1_000)).toBe(true);
      expect(await store.claim('k1', 2_000, 1_000)).toBe(false);
      for (let i = 0; i < 100; i++) await store.claim(`other${i}`, 1_500, 1_000);
      expect(await store.claim('k1', 2_000, 1_900)).toBe(false);
      store.close?.();
    });
  }

  it('sqlite: two handles on one file see one claim', async () => {
    const a = openSqliteStore(join(dir, 'shared.db'));
    const b = openSqliteStore(join(dir, 'shared.db'));
    expect(await a.claim('once', 10_000, 1)).toBe(true);
    expect(await b.claim('once', 10_000, 1)).toBe(false);
    a.close?.();
    b.close?.();
  });
});
