import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern } from '../helpers/clients.js';
import { memoryStdio, testIssuer } from '../helpers/factories.js';
import { startTestGateway, type TestGateway } from '../helpers/harness.js';

/**
 * #13 "Isolation of stateful upstreams between tenants": server-memory (a real stateful server
 * from npm) behind the gateway, shared and isolated per tenant and per subject, with clients of
 * both eras. What one tenant writes, another must not read.
 */
const ISS = 'https://issuer.isolation';
const AUD = 'manifold-isolation';
type Obj = Record<string, unknown>;

const call = async (h: AnyHandle, name: string, args: Obj): Promise<string> => {
  const c = h.client as unknown as { callTool(p: Obj): Promise<Obj> };
  return JSON.stringify((await c.callTool({ name, arguments: args })).content);
};
const write = (h: AnyHandle, server: string, entity: string) =>
  call(h, `${server}__create_entities`, {
    entities: [{ name: entity, entityType: 'secret', observations: [`${entity} was here`] }],
  });
const graph = (h: AnyHandle, server: string) => call(h, `${server}__read_graph`, {});

describe('isolation of stateful upstreams between tenants (server-memory)', () => {
  let gw: TestGateway;
  let dir: string;
  let mint: (tenant: string, subject: string) => Promise<string>;
  const open: AnyHandle[] = [];
  const as = async (era: 'legacy' | 'modern', tenant: string, subject: string) => {
    const token = await mint(tenant, subject);
    const h = era === 'legacy' ? await connectLegacy(gw.url, token) : await connectModern(gw.url, token);
    open.push(h);
    return h;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mf-tenants-'));
    const issuer = await testIssuer(ISS, AUD);
    mint = (tenant, subject) => issuer.mint({ tid: tenant, scope: 'tools:*' }, subject);
    const memory = (file: string, extra: Obj = {}) =>
      memoryStdio({ env: { MEMORY_FILE_PATH: join(dir, file) }, ...extra });
    gw = await startTestGateway({
      mcpServers: {
        shared: memory('shared.jsonl'),
        tenant: memory('tenant-{{tenant}}.jsonl', { isolation: 'per-tenant' }),
        subject: memory('subject-{{tenant}}-{{subject}}.jsonl', {
          isolation: 'per-subject',
          maxInstances: 2,
        }),
      },
      gateway: {
        auth: { ...issuer.auth, tenantClaim: 'tid' },
      },
    });
  });

  afterAll(async () => {
    for (const h of open) await h.close().catch(() => {});
    await gw?.stop();
  });

  it('shared (the default): tenant B reads what tenant A wrote, which is why isolation exists', async () => {
    const a = await as('legacy', 'acme', 'alice');
    const b = await as('modern', 'globex', 'bob');
    await write(a, 'shared', 'acme-shared-note');
    expect(await graph(b, 'shared')).toContain('acme-shared-note');
  });

  it("per-tenant: B cannot read A's graph, in either era; A still reads its own", async () => {
    for (const [ea, eb] of [
      ['legacy', 'modern'],
      ['modern', 'legacy'],
    ] as const) {
      const a = await as(ea, 'acme', `alice-${ea}`);
      const b = await as(eb, 'globex', `bob-${eb}`);
      const secret = `acme-secret-${ea}`;
      await write(a, 'tenant', secret);
      expect(await graph(a, 'tenant')).toContain(secret);
      expect(await graph(b, 'tenant')).not.toContain(secret);
      // Another subject of the same tenant shares the tenant's instance.
      const a2 = await as(eb, 'acme', `carol-${eb}`);
      expect(await graph(a2, 'tenant')).toContain(secret);
    }
    // Each tenant got its own child and its own file, named by its identity.
    expect(existsSync(join(dir, 'tenant-acme.jsonl'))).toBe(true);
    expect(existsSync(join(dir, 'tenant-globex.jsonl'))).toBe(false);
  });

  it('per-subject: two subjects of one tenant do not share; instances stay within maxInstances', async () => {
    const a = await as('modern', 'acme', 'dora');
    const b = await as('legacy', 'acme', 'erin');
    await write(a, 'subject', 'dora-private');
    expect(await graph(b, 'subject')).not.toContain('dora-private');
    expect(await graph(a, 'subject')).toContain('dora-private');
    // A third subject: maxInstances 2, so the least recently used idle instance (dora's) closes.
    const c = await as('modern', 'acme', 'fred');
    expect(await graph(c, 'subject')).not.toContain('dora-private');
    expect(gw.gateway.isolated.count('subject')).toBe(2);
    const h = gw.gateway.health().upstreams.find((u) => u.name === 'subject') as Obj | undefined;
    expect(h).toMatchObject({ isolation: 'per-subject', instances: 2 });
    // dora comes back to a fresh instance that reads her own file again: never another's.
    expect(await graph(a, 'subject')).toContain('dora-private');
    expect(await graph(a, 'subject')).not.toContain('erin');
  });

  it("idle instances are reaped; the next request starts the caller's own again", async () => {
    const a = await as('legacy', 'acme', 'gina');
    await write(a, 'tenant', 'gina-note');
    expect(gw.gateway.isolated.count('tenant')).toBeGreaterThan(0);
    gw.gateway.isolated.reap(Date.now() + 301_000);
    expect(gw.gateway.isolated.count('tenant')).toBe(0);
    expect(await graph(a, 'tenant')).toContain('gina-note');
    expect(gw.gateway.isolated.count('tenant')).toBe(1);
  });
});
