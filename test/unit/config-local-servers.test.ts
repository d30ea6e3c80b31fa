import { describe, expect, it } from 'vitest';
import { formatIssues, parseConfigObject } from '../../src/config/load.js';
import { REGISTRY_SERVER_DEFAULTS, SANDBOX_LIMIT_DEFAULTS } from '../../src/config/sandbox.js';
import type { ConfigResult } from '../../src/config/types.js';

// Local servers (#53): sandbox, start, idleStopSeconds, serverDataDir, maxRunningServers.

type Ok = Extract<ConfigResult, { ok: true }>;
type Failed = Extract<ConfigResult, { ok: false }>;

function ok(result: ConfigResult): Ok {
  if (!result.ok) throw new Error(`expected ok, got errors:\n${formatIssues(result.errors)}`);
  return result;
}
function failed(result: ConfigResult): Failed {
  if (result.ok) throw new Error('expected errors, got ok');
  return result;
}

const stdio = { command: 'node', args: ['server.js'] };

describe('sandbox, start and idleStopSeconds', () => {
  it('existing configs keep working as before: no sandbox, started with the gateway, never stopped', () => {
    const { config } = ok(
      parseConfigObject({ mcpServers: { a: stdio, b: { url: 'https://x.example/mcp' } } }, {}),
    );
    for (const s of config.servers) {
      expect(s.sandbox).toBe(false);
      expect(s.start).toBe('eager');
      expect(s.idleStopSeconds).toBe(0);
    }
    expect(config.gateway.sandbox).toBe(false);
    expect(config.gateway.maxRunningServers).toBe(0);
    expect(config.gateway.serverDataDir).toBe('./.manifold/servers');
  });

  it('an empty sandbox is network off, no extra paths, a private data directory and the default limits', () => {
    const { config } = ok(parseConfigObject({ mcpServers: { a: { ...stdio, sandbox: {} } } }, {}));
    expect(config.servers[0]!.sandbox).toEqual({
      network: false,
      allowHosts: [],
      filesystem: { read: [] },
      limits: { ...SANDBOX_LIMIT_DEFAULTS },
      dataDir: './.manifold/servers/a',
    });
  });

  it("gateway.sandbox is every stdio server's default; an entry overrides it key by key, or turns it off", () => {
    const { config } = ok(
      parseConfigObject(
        {
          mcpServers: {
            plain: stdio,
            tuned: { ...stdio, sandbox: { limits: { memoryMb: 4096 }, filesystem: { read: ['./docs'] } } },
            open: { ...stdio, sandbox: false },
            remote: { url: 'https://x.example/mcp' },
          },
          gateway: { sandbox: { network: false, limits: { processes: 64 } }, serverDataDir: '/var/lib/m' },
        },
        {},
      ),
    );
    const by = Object.fromEntries(config.servers.map((s) => [s.name, s.sandbox]));
    expect(by.plain).toMatchObject({ network: false, limits: { processes: 64, memoryMb: 2048 } });
    expect(by.tuned).toMatchObject({
      limits: { processes: 64, memoryMb: 4096 },
      filesystem: { read: ['./docs'] },
      dataDir: '/var/lib/m/tuned',
    });
    expect(by.open).toBe(false);
    expect(by.remote).toBe(false);
  });

  it('a lazy server stops after 600 s idle unless it says otherwise', () => {
    const { config } = ok(
      parseConfigObject(
        {
          mcpServers: { a: { ...stdio, start: 'lazy' }, b: { ...stdio, start: 'lazy', idleStopSeconds: 0 } },
        },
        {},
      ),
    );
    expect(config.servers.map((s) => [s.start, s.idleStopSeconds])).toEqual([
      ['lazy', 600],
      ['lazy', 0],
    ]);
  });

  it('REGISTRY_SERVER_DEFAULTS (what manifold add writes) is a lazy server in a sandbox with network off', () => {
    const { config } = ok(
      parseConfigObject({ mcpServers: { a: { ...stdio, ...REGISTRY_SERVER_DEFAULTS } } }, {}),
    );
    const s = config.servers[0]!;
    expect(s.start).toBe('lazy');
    expect(s.sandbox).toMatchObject({ network: false, allowHosts: [], filesystem: { read: [] } });
  });

  it('egress lists its hosts, normalised as the gateway egress allowlist is', () => {
    const { config } = ok(
      parseConfigObject(
        {
          mcpServers: {
            a: { ...stdio, sandbox: { network: 'egress', allowHosts: ['API.GitHub.com', 'x.example:8443'] } },
          },
        },
        {},
      ),
    );
    expect(config.servers[0]!.sandbox).toMatchObject({
      network: 'egress',
      allowHosts: ['api.github.com', 'x.example:8443'],
    });
  });

  it('every problem at once, each with its JSON path and a fix', () => {
    const result = failed(
      parseConfigObject(
        {
          mcpServers: {
            a: {
              ...stdio,
              sandbox: {
                network: true,
                filesystem: { read: 'docs', write: ['/'] },
                limits: { memoryMb: 10, processes: 'many' },
              },
              start: 'sometimes',
              idleStopSeconds: -1,
            },
            b: { ...stdio, sandbox: { network: 'egress' } },
            c: { url: 'https://x.example/mcp', sandbox: { network: false } },
            d: { ...stdio, sandbox: 'on' },
            e: { ...stdio, sandbox: { network: 'egress', allowHosts: ['https://api.example.com/x'] } },
          },
          gateway: { maxRunningServers: -1 },
        },
        {},
      ),
    );
    const paths = result.errors.map((e) => e.path);
    for (const p of [
      'mcpServers.a.sandbox.network',
      'mcpServers.a.sandbox.filesystem.read',
      'mcpServers.a.sandbox.filesystem.write[0]',
      'mcpServers.a.sandbox.limits.memoryMb',
      'mcpServers.a.sandbox.limits.processes',
      'mcpServers.a.start',
      'mcpServers.a.idleStopSeconds',
      'mcpServers.b.sandbox.allowHosts',
      'mcpServers.c.sandbox',
      'mcpServers.d.sandbox',
      'mcpServers.e.sandbox.allowHosts[0]',
      'gateway.maxRunningServers',
    ]) {
      expect(paths, p).toContain(p);
    }
    for (const e of result.errors) expect(e.fix, e.path).toBeTruthy();
    const write = result.errors.find((e) => e.path === 'mcpServers.a.sandbox.filesystem.write[0]')!;
    expect(write.message).toMatch(/whole file system/);
    const remote = result.errors.find((e) => e.path === 'mcpServers.c.sandbox')!;
    expect(remote.message).toMatch(/applies only to stdio/);
  });

  it('allowHosts with network off is a warning, not an error', () => {
    const result = ok(
      parseConfigObject({ mcpServers: { a: { ...stdio, sandbox: { allowHosts: ['x.example'] } } } }, {}),
    );
    expect(result.warnings.map((w) => w.path)).toContain('mcpServers.a.sandbox.allowHosts');
  });
});
