import { describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { statusPathProblem } from '../../src/config/gateway.js';
import { parseConfigObject } from '../../src/config/load.js';
import { redactor } from '../../src/lib/redact.js';
import { RecentCalls, UNRESOLVED } from '../../src/observe/recent-calls.js';
import type { RequestRecord } from '../../src/observe/record.js';
import { maskedConfig, maskUrl, redactDeep } from '../../src/server/http/status/config.js';
import { globReaches, reachesServer } from '../../src/server/http/status/reach.js';
import { principal as made } from '../helpers/factories.js';

const stdio = { command: 'node', args: ['server.js'] };
const parse = (gateway: Record<string, unknown>, env: Record<string, string> = {}) =>
  parseConfigObject({ mcpServers: { a: stdio }, gateway }, env);

const record = (over: Partial<RequestRecord>): RequestRecord => ({
  method: 'tools/call',
  tenant: 't',
  subject: 's',
  server: 'a',
  target: 'a__x',
  verdict: 'allowed',
  durationMs: 1,
  bytesIn: 0,
  bytesOut: 0,
  ...over,
});

describe('gateway.statusPath', () => {
  it('takes a path, drops a trailing slash, and takes false', () => {
    const moved = parse({ statusPath: '/ops/status/' });
    expect(moved.ok && moved.config.gateway.statusPath).toBe('/ops/status');
    const off = parse({ statusPath: false });
    expect(off.ok && off.config.gateway.statusPath).toBe(false);
    expect(statusPathProblem('/')).toEqual({ path: '/' });
  });

  it.each([
    ['status', 'must start with "/"'],
    ['/mcp', 'is /mcp, which the gateway serves itself'],
    ['/MCP/', 'is /mcp, which the gateway serves itself'],
    ['/healthz/x', 'is under /healthz, which the gateway serves itself'],
    ['/metrics', 'is /metrics, which the gateway serves itself'],
    ['/.well-known/status', 'is under /.well-known, which the gateway serves itself'],
    ['/a//b', 'must be "/" or path segments of letters, digits, "-", ".", "_" and "~"'],
    ['/a/../mcp', 'must be "/" or path segments of letters, digits, "-", ".", "_" and "~"'],
    ['/a b', 'must be "/" or path segments of letters, digits, "-", ".", "_" and "~"'],
  ])('%s is refused with its JSON path and a fix', (path, message) => {
    const result = parse({ statusPath: path });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toEqual([
      {
        path: 'gateway.statusPath',
        message,
        fix: 'write a path such as "/" or "/status" (not /mcp, /healthz, /metrics or /.well-known), or false to turn the status page off',
      },
    ]);
  });

  it('a value that is neither a string nor false is refused by its shape', () => {
    const result = parse({ statusPath: true });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors[0]).toMatchObject({
      path: 'gateway.statusPath',
      fix: 'write a path such as "/" or "/status", or false to turn the status page off',
    });
  });
});

describe('recent calls', () => {
  it('counts, errors and nearest-rank percentiles over the window', () => {
    const recent = new RecentCalls({ maxServers: 4 });
    for (let ms = 1; ms <= 100; ms++)
      recent.observe(record({ durationMs: ms, verdict: ms % 10 === 0 ? 'error' : 'allowed' }));
    expect(recent.stats()).toEqual([
      { server: 'a', total: 100, window: 100, errors: 10, p50Ms: 50, p99Ms: 99 },
    ]);
  });

  it('memory is bounded: the window, the tenants tracked and the server names', () => {
    const recent = new RecentCalls({ maxServers: 2, window: 8, tenantWindow: 4, maxTenants: 3 });
    for (let i = 0; i < 20; i++) recent.observe(record({ durationMs: i < 12 ? 1000 : 5 }));
    expect(recent.stats()[0]).toMatchObject({ total: 20, window: 8, p99Ms: 5 });
    expect(recent.tenantStats('t', () => true)[0]).toMatchObject({ total: 20, window: 4 });
    // A flood of tenants keeps the last three; the least recently seen ones go.
    for (let i = 0; i < 50; i++) recent.observe(record({ tenant: `flood-${i}` }));
    expect(recent.trackedTenants).toBe(3);
    expect(recent.tenantStats('t', () => true)).toEqual([]);
    expect(recent.tenantStats('flood-49', () => true)[0]).toMatchObject({ total: 1 });
    // Server names beyond the configured count are not added (the record's name is the gateway's).
    recent.observe(record({ server: null }));
    recent.observe(record({ server: 'b' }));
    expect(recent.stats().map((s) => s.server)).toEqual([UNRESOLVED, 'a']);
  });

  it('a tenant seen again is kept over one seen longer ago', () => {
    const recent = new RecentCalls({ maxServers: 2, maxTenants: 2 });
    recent.observe(record({ tenant: 'x' }));
    recent.observe(record({ tenant: 'y' }));
    recent.observe(record({ tenant: 'x' }));
    recent.observe(record({ tenant: 'z' }));
    expect(recent.tenantStats('x', () => true)).toHaveLength(1);
    expect(recent.tenantStats('y', () => true)).toEqual([]);
  });

  it('after a reload, a removed server gives its place to a new one, and the bound follows the config', () => {
    let servers = ['a', 'b'];
    const recent = new RecentCalls({
      maxServers: () => servers.length + 1,
      configured: (name) => servers.includes(name),
    });
    const servedNames = () =>
      recent
        .stats()
        .map((s) => s.server)
        .sort();
    recent.observe(record({ server: 'a' }));
    recent.observe(record({ server: 'b' }));
    recent.observe(record({ server: null }));
    // Full: a name that is not configured is never added.
    recent.observe(record({ server: 'c' }));
    expect(servedNames()).toEqual(['(unresolved)', 'a', 'b']);
    servers = ['a', 'c'];
    recent.observe(record({ server: 'c' }));
    expect(servedNames()).toEqual(['(unresolved)', 'a', 'c']);
    servers = ['a', 'c', 'd', 'e'];
    recent.observe(record({ server: 'd' }));
    recent.observe(record({ server: 'e' }));
    expect(servedNames()).toEqual(['(unresolved)', 'a', 'c', 'd', 'e']);
  });

  it("a tenant's numbers show only the servers it may see", () => {
    const recent = new RecentCalls({ maxServers: 3 });
    recent.observe(record({ server: 'a' }));
    recent.observe(record({ server: 'b' }));
    expect(recent.tenantStats('t', (s) => s === 'b').map((s) => s.server)).toEqual(['b']);
  });
});

describe('config masking', () => {
  it('A15: URLs lose userinfo, query values and fragment', () => {
    expect(maskUrl('https://user:pw@api.example.com/mcp?key=abc&key=def&x=1#frag')).toBe(
      'https://api.example.com/mcp?key=***&x=***',
    );
    expect(maskUrl('not a url')).toBe('***');
  });

  it('A15: headers, env, auth keys and the cursor secret are masked; ${VAR} values redacted anywhere', () => {
    const result = parseConfigObject(
      {
        mcpServers: {
          s: { command: 'node', args: ['--token=${TOKEN}'], env: { KEY: '${TOKEN}', PLAIN: 'x' } },
          h: { url: 'https://api.example.com/mcp', headers: { Authorization: 'Bearer ${TOKEN}' } },
        },
        gateway: {
          cursorSecret: '${CURSOR}',
          auth: { issuer: 'https://i', audience: 'a', secret: '${HMAC}' },
        },
      },
      { TOKEN: 'tok-abcdef-123456', CURSOR: 'c'.repeat(40), HMAC: 'h'.repeat(40) },
    );
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    const masked = maskedConfig(result.config, redactor(result.secrets)) as {
      gateway: Record<string, unknown> & { auth: Record<string, unknown> };
      servers: Record<string, unknown>[];
    };
    const text = JSON.stringify(masked);
    for (const secret of result.secrets) expect(text).not.toContain(secret);
    expect(masked.servers[0]).toMatchObject({
      args: ['--token=[redacted]'],
      env: { KEY: '***', PLAIN: '***' },
    });
    expect(masked.servers[1]).toMatchObject({ headers: { Authorization: '***' } });
    expect(masked.gateway.cursorSecret).toBe('***');
    expect(masked.gateway.auth.secret).toBe('***');
    expect(masked.gateway.auth.issuer).toBe('https://i');
  });

  it('a Postgres store URL is masked whole, even written literally in the file', () => {
    const result = parse({ store: { postgres: 'postgres://manifold:pw-literal-77@db.internal:5432/state' } });
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    const masked = maskedConfig(result.config, redactor(result.secrets)) as {
      gateway: Record<string, unknown>;
    };
    expect(masked.gateway.store).toEqual({ postgres: '***' });
    const text = JSON.stringify(masked);
    for (const part of ['pw-literal-77', 'db.internal', 'manifold:']) expect(text).not.toContain(part);
  });

  it('redaction goes string by string, so a secret that reads as a JSON literal leaves the JSON whole', () => {
    const out = redactDeep(
      { flag: true, note: 'true story', list: [null, 'null'] },
      redactor(['true', 'null']),
    );
    expect(out).toEqual({ flag: true, note: '[redacted] story', list: [null, '[redacted]'] });
  });
});

describe("which servers a tenant's view holds", () => {
  const server = (name: string, prefix: string | false = name) =>
    ({ name, prefix }) as unknown as Parameters<typeof reachesServer>[1];
  const principal = (grants: string[] | '*', extra: Partial<Principal> = {}) => made({ grants, ...extra });

  it.each([
    ['github__get_*', 'github__', true],
    ['github__*', 'gitlab__', false],
    ['git*', 'gitlab__', true],
    ['g?x__*', 'fx__', false],
    ['?x__*', 'fx__', true],
    ['fx__alpha', 'fx__', true],
    ['fx', 'fx__', false],
    ['*', 'fx__', true],
  ])('%s reaches %s: %s', (pattern, ns, expected) => {
    expect(globReaches(pattern, ns)).toBe(expected);
  });

  it('grants, kinds, risk classes, the tenant cap and the profile all count', () => {
    expect(reachesServer(principal(['fx__*']), server('fx'))).toBe(true);
    expect(reachesServer(principal(['fx__*']), server('web'))).toBe(false);
    expect(reachesServer(principal(['prompts:web__*']), server('web'))).toBe(true);
    expect(reachesServer(principal(['risk:read']), server('web'))).toBe(true);
    expect(reachesServer(principal(['*'], { cap: ['fx__*'] }), server('web'))).toBe(false);
    expect(reachesServer(principal('*', { servers: new Set(['fx']) }), server('web'))).toBe(false);
    expect(reachesServer(principal([]), server('web'))).toBe(false);
    expect(reachesServer(principal(['x']), server('bare', false))).toBe(true);
  });
});
