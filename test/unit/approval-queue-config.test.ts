import { describe, expect, it } from 'vitest';
import { parseConfigObject } from '../../src/config/load.js';
import { publicBase } from '../../src/gateway/approvals-queue.js';

/** #52: the approvals queue's settings, read with their defaults, and every problem named at once. */
const server = (approval: unknown) => ({
  mcpServers: { gh: { command: 'npx', args: ['-y', 'gh-mcp'], approval } },
});

describe('approval.via, approval.queueTtlSeconds and approval.notify (#52)', () => {
  it('default to the client and one day, and read what is written', () => {
    const plain = parseConfigObject(server('standard'), {});
    if (!plain.ok) throw new Error('expected ok');
    expect(plain.config.servers[0]!.approval).toMatchObject({ via: 'client', queueTtlSeconds: 86_400 });
    expect(plain.config.servers[0]!.approval.notify).toBeUndefined();
    const queued = parseConfigObject(
      server({
        preset: 'strict',
        via: 'queue',
        queueTtlSeconds: 3600,
        notify: 'https://chat.example.com/hook',
      }),
      {},
    );
    if (!queued.ok) throw new Error('expected ok');
    expect(queued.config.servers[0]!.approval).toMatchObject({
      via: 'queue',
      queueTtlSeconds: 3600,
      notify: 'https://chat.example.com/hook',
    });
  });

  it('name the path and the fix of every bad value at once', () => {
    const result = parseConfigObject(
      server({ via: 'operator', queueTtlSeconds: 5, notify: 'ftp://user:pw@example.com/x' }),
      {},
    );
    if (result.ok) throw new Error('expected errors');
    const byPath = new Map(result.errors.map((e) => [e.path, e]));
    expect(byPath.get('mcpServers.gh.approval.via')?.fix).toContain('client-then-queue');
    expect(byPath.get('mcpServers.gh.approval.queueTtlSeconds')?.fix).toContain('86400');
    const notify = result.errors.filter((e) => e.path === 'mcpServers.gh.approval.notify');
    expect(notify.map((e) => e.message).join(' ')).toMatch(/scheme/);
    expect(notify.map((e) => e.message).join(' ')).toMatch(/username or password/);
    // A URL's credentials are never repeated in the message.
    expect(JSON.stringify(result.errors)).not.toContain('pw@');
  });

  it("the signed link's origin: advertiseUrl, else the origin the host saw clients use (a Worker's), else the bound address", () => {
    const config = (gateway: Record<string, unknown>) => {
      const r = parseConfigObject({ ...server({ via: 'queue' }), gateway }, {});
      if (!r.ok) throw new Error('expected ok');
      return r.config;
    };
    const seen = 'https://manifold.example.workers.dev';
    const advertised = config({ advertiseUrl: 'https://mcp.example.com' });
    expect(publicBase(advertised, seen)).toBe('https://mcp.example.com');
    expect(publicBase(config({ port: 9001 }), seen)).toBe(seen);
    expect(publicBase(config({ port: 9001 }))).toBe('http://127.0.0.1:9001');
    expect(publicBase(config({ host: '0.0.0.0', port: 9001, auth: false }))).toBe('http://127.0.0.1:9001');
  });
});
