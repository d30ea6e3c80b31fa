import { describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/load.js';

const stdio = { command: 'node', args: ['server.js'] };

describe('code mode config (#50)', () => {
  it('accepts catalog.mode "code" at the gateway and in a profile, and every gateway.code key', () => {
    const r = parseConfigObject(
      {
        mcpServers: { a: stdio },
        gateway: {
          catalog: { mode: 'code' },
          code: {
            timeoutMs: 1000,
            cpuMs: 200,
            memoryBytes: 8_388_608,
            maxCalls: 5,
            maxLogBytes: 0,
            approval: 'ask',
            approvalTimeoutSeconds: 30,
          },
        },
        profiles: { coder: { catalog: { mode: 'code' } } },
      },
      {},
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.config.gateway.catalog.mode).toBe('code');
    expect(r.config.gateway.code).toEqual({
      timeoutMs: 1000,
      cpuMs: 200,
      memoryBytes: 8_388_608,
      maxCalls: 5,
      maxLogBytes: 0,
      approval: 'ask',
      approvalTimeoutSeconds: 30,
    });
    expect(r.config.profiles?.[0]?.catalog.mode).toBe('code');
  });

  it('names every bad gateway.code key with its path and fix, at once', () => {
    const r = parseConfigObject(
      {
        mcpServers: { a: stdio },
        gateway: {
          code: { timeoutMs: 0, cpuMs: 'fast', memoryBytes: 10, maxCalls: 1e9, approval: 'maybe', nope: 1 },
        },
      },
      {},
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const paths = r.errors.map((e) => e.path).sort();
    expect(paths).toEqual([
      'gateway.code.approval',
      'gateway.code.cpuMs',
      'gateway.code.maxCalls',
      'gateway.code.memoryBytes',
      'gateway.code.timeoutMs',
    ]);
    expect(r.errors.find((e) => e.path === 'gateway.code.memoryBytes')?.fix).toMatch(/67108864/);
    expect(r.warnings.map((w) => w.path)).toContain('gateway.code.nope');
  });
});
