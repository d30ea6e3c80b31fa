import { describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import {
  planReload,
  RESTART_KEYS,
  runningConfig,
  sameValue,
  type VIEW_FIELDS,
} from '../../src/gateway/reload-plan.js';

function config(raw: Record<string, unknown>, env: Record<string, string> = {}): Config {
  const result = parseConfigObject(raw, env);
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.config;
}

const a = { command: 'node', args: ['a.js'] };
const b = { url: 'https://b.example.com/mcp' };
const c = { command: 'node', args: ['c.js'] };

describe('planReload: what a reload changes', () => {
  it('an identical config changes nothing', () => {
    const plan = planReload(config({ mcpServers: { a, b } }), config({ mcpServers: { b, a } }));
    expect(plan).toEqual({
      added: [],
      removed: [],
      replaced: [],
      retuned: [],
      unchanged: ['b', 'a'],
      live: [],
      restart: [],
    });
  });

  it('#19: a new or changed upstream auth waits for a restart; a plain static server does not', () => {
    const oauth = { secret: 'an-oauth-secret-of-at-least-32-characters!!' };
    const old = config({ mcpServers: { a, b }, gateway: { oauth } });
    const next = config({
      mcpServers: {
        a,
        b: { ...b, auth: 'gateway' },
        c,
        d: { url: 'https://d.example.com/mcp', auth: 'static' },
      },
      gateway: { oauth: { ...oauth, flowTtlSeconds: 120 } },
    });
    const plan = planReload(old, next);
    expect(plan.restart).toEqual(expect.arrayContaining(['oauth', 'mcpServers.b.auth']));
    expect(plan.restart).not.toContain('mcpServers.c.auth');
    expect(plan.restart).not.toContain('mcpServers.d.auth');
  });

  it('sorts servers into added, removed, replaced (connection) and retuned (view only)', () => {
    const old = config({ mcpServers: { a, b, c } });
    const next = config({
      mcpServers: {
        a: { ...a, args: ['a2.js'] },
        b: { ...b, tools: { deny: ['x'] }, prefix: 'bee', timeoutMs: 5000 },
        d: c,
      },
    });
    expect(planReload(old, next)).toMatchObject({
      added: ['d'],
      removed: ['c'],
      replaced: ['a'],
      retuned: ['b'],
      unchanged: [],
    });
  });

  it('a server is compared after interpolation: a changed variable replaces it, the same value does not', () => {
    const raw = { mcpServers: { a: { ...a, env: { TOKEN: '${TOKEN}' } } } };
    const old = config(raw, { TOKEN: 'one-secret' });
    expect(planReload(old, config(raw, { TOKEN: 'one-secret' })).unchanged).toEqual(['a']);
    expect(planReload(old, config(raw, { TOKEN: 'two-secret' })).replaced).toEqual(['a']);
  });

  it('connection fields replace: env, headers, disabled, isolation, protocol, client features', () => {
    const old = config({ mcpServers: { a, b } });
    for (const [name, change] of [
      ['a', { env: { X: '1' } }],
      ['a', { disabled: true }],
      ['a', { isolation: 'per-tenant' }],
      ['a', { clientFeatures: { sampling: true } }],
      ['b', { headers: { 'x-k': 'v' } }],
      ['b', { protocol: '2026-07-28' }],
    ] as const) {
      const next = config({ mcpServers: { a, b, [name]: { ...(name === 'a' ? a : b), ...change } } });
      expect(planReload(old, next).replaced, JSON.stringify(change)).toEqual([name]);
    }
  });

  it('every view field only retunes', () => {
    const old = config({ mcpServers: { a } });
    const changes: Record<(typeof VIEW_FIELDS)[number], unknown> = {
      prefix: 'x',
      tools: { allow: ['t'] },
      prompts: { deny: ['p'] },
      resources: { deny: ['r'] },
      timeoutMs: 1234,
      maxResultBytes: 1000,
      budgetTokens: 'off',
      risk: { 'get_*': 'read' },
      trustAnnotations: true,
      approval: 'strict',
      retry: 0,
      maxInstances: 2,
      instanceIdleSeconds: 10,
      policy: { rules: [{ when: 'true', effect: 'deny' }] },
      guardrails: [{ type: 'secrets' }],
    };
    for (const [field, value] of Object.entries(changes)) {
      const next = config({ mcpServers: { a: { ...a, [field]: value } } });
      expect(planReload(old, next), field).toMatchObject({ retuned: ['a'], replaced: [] });
    }
  });

  it('a gateway default a server inherits retunes it (callTimeoutMs becomes its timeoutMs)', () => {
    const plan = planReload(
      config({ mcpServers: { a } }),
      config({ mcpServers: { a }, gateway: { callTimeoutMs: 5000 } }),
    );
    expect(plan).toMatchObject({ retuned: ['a'], live: ['callTimeoutMs'], restart: [] });
  });

  it('splits changed gateway keys into live ones and ones that need a restart', () => {
    const plan = planReload(
      config({ mcpServers: { a } }),
      config({
        mcpServers: { a },
        gateway: {
          port: 9999,
          pageSize: 10,
          watchConfig: false,
          allowedHosts: ['x.example.com'],
          store: false,
        },
        profiles: { p: { servers: ['a'] } },
      }),
    );
    expect(plan.restart.sort()).toEqual(['allowedHosts', 'port', 'store']);
    expect(plan.live.sort()).toEqual(['pageSize', 'profiles', 'watchConfig']);
    for (const k of plan.restart) expect(RESTART_KEYS).toContain(k);
  });

  it("auth needs a restart, except the tenants' call limits", () => {
    const auth = (tenants: Record<string, unknown>, audience = 'aud') => ({
      mcpServers: { a },
      gateway: { auth: { issuer: 'https://iss', audience, secret: 'x'.repeat(32), tenants } },
    });
    const old = config(auth({ t1: { callsPerMinute: 10, grants: ['a__*'] } }));
    expect(planReload(old, config(auth({ t1: { callsPerMinute: 20, grants: ['a__*'] } })))).toMatchObject({
      live: ['auth.tenants.callsPerMinute'],
      restart: [],
    });
    expect(planReload(old, config(auth({ t1: { callsPerMinute: 10, grants: ['a__x'] } }))).restart).toEqual([
      'auth',
    ]);
    expect(
      planReload(old, config(auth({ t1: { callsPerMinute: 10, grants: ['a__*'] } }, 'other'))).restart,
    ).toEqual(['auth']);
  });

  it('runningConfig keeps the running value of each restart key and takes the rest', () => {
    const old = config({ mcpServers: { a }, gateway: { port: 1111 } });
    const next = config({
      mcpServers: { a, b },
      gateway: { port: 2222, pageSize: 3, cursorSecret: 'k'.repeat(32) },
    });
    const plan = planReload(old, next);
    const running = runningConfig(old, next, plan);
    expect(running.gateway.port).toBe(1111);
    expect(running.gateway.cursorSecret).toBeUndefined();
    expect(running.gateway.pageSize).toBe(3);
    expect(running.servers.map((s) => s.name)).toEqual(['a', 'b']);
    // Pure: neither input changed.
    expect(next.gateway.port).toBe(2222);
    expect(old.gateway.pageSize).toBe(500);
  });

  it('sameValue ignores key order and undefined members, and sees nested differences', () => {
    expect(sameValue({ x: 1, y: [1, { z: 2 }] }, { y: [1, { z: 2 }], x: 1 })).toBe(true);
    expect(sameValue({ x: 1, u: undefined }, { x: 1 })).toBe(true);
    expect(sameValue({ y: [1, { z: 2 }] }, { y: [1, { z: 3 }] })).toBe(false);
    expect(sameValue([1, 2], { 0: 1, 1: 2 })).toBe(false);
    expect(sameValue({ x: false }, { x: 0 })).toBe(false);
  });
});
