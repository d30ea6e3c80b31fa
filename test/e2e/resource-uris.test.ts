import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyHandle, connectLegacy, connectModern } from '../helpers/clients.js';
import { testIssuer } from '../helpers/factories.js';
import { ROOT, startTestGateway, type TestGateway } from '../helpers/harness.js';
import { modernListen } from '../helpers/modern.js';

/**
 * 49.4 / SECURITY J4: a dot segment, in any spelling, never takes a resource read, subscription
 * or completion past a resources filter or grant. Upstreams of both eras (the SDK v1 and v2
 * McpServer) resolve URIs with the URL parser, so a `..` that reached them would serve the secret;
 * each logs every URI it is asked about, and no secret may ever appear there.
 */
type Obj = Record<string, unknown>;

const FILE_TREE = resolve(ROOT, 'test/fixtures/file-tree.mjs');
const ISS = 'https://issuer.uris';
const AUD = 'manifold-uris';

/** Every way of saying "one level up" (and a separator) a client might use, after a public prefix. */
const CLIMBS = [
  '../secret/',
  '%2e%2e/secret/',
  '%2E%2E/secret/',
  '%2e%2E/secret/',
  '.%2e/secret/',
  '%2E./secret/',
  './../secret/',
  'docs/../../secret/',
  '..%2fsecret/',
  '..%2Fsecret/',
  '%2e%2e%2fsecret/',
  '..%5csecret/',
  '..\\secret/',
  '.\t./secret/',
];

/** Servers: l* an SDK v1 (legacy) upstream, m* an SDK v2 (modern) one; *f config filters, *g grants. */
const SERVERS = ['lf', 'mf', 'lg', 'mg'] as const;
type Server = (typeof SERVERS)[number];
const FILTERED: readonly Server[] = ['lf', 'mf'];
const GRANTED: readonly Server[] = ['lg', 'mg'];

/** The URI a client uses for an upstream URI of `server`: lf published first, the others are rewritten. */
const exposed = (server: Server, uri: string) =>
  server === 'lf' ? uri : uri.replace('://', `://${server}.`);

/** The traversal attempts against one server: through its file: and its memo: template. */
const attacks = (server: Server) => [
  ...CLIMBS.map((c) => exposed(server, `file:///public/${c}key.txt`)),
  ...CLIMBS.map((c) => exposed(server, `memo://notes/public/${c}pin`)),
];

const readResource = (h: AnyHandle, uri: string) =>
  (h.client as unknown as { readResource(p: Obj): Promise<Obj> }).readResource({ uri });
const complete = (h: AnyHandle, uri: string) =>
  (h.client as unknown as { complete(p: Obj): Promise<Obj> }).complete({
    ref: { type: 'ref/resource', uri },
    argument: { name: 'path', value: '' },
  });

async function refusal(p: Promise<unknown>, what: string): Promise<{ code?: number; message: string }> {
  try {
    await p;
  } catch (e) {
    return { code: (e as { code?: number }).code, message: String((e as Error).message) };
  }
  throw new Error(`${what} was not refused`);
}

describe('49.4: resource URIs are normalised before every filter, grant and template match', () => {
  let gw: TestGateway;
  let dir: string;
  let filterToken: string;
  let grantToken: string;
  const clients: { handle: AnyHandle; servers: readonly Server[]; token: string }[] = [];

  const logOf = (server: Server): { method: string; uri?: string; served?: string | null }[] => {
    const file = join(dir, `${server}.log`);
    if (!existsSync(file)) return [];
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l));
  };
  /** Whatever reached an upstream that names a secret, however spelled. */
  const secretsAsked = (server: Server) =>
    logOf(server).filter((e) => /secret/i.test(`${e.uri ?? ''} ${e.served ?? ''}`));

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mf-uris-'));
    const issuer = await testIssuer(ISS, AUD);
    const filters = {
      allow: ['file:///public/*', 'memo://notes/public/*'],
      deny: ['file:///secret/*', 'memo://notes/secret/*'],
    };
    const server = (era: 'legacy' | 'modern', name: Server, extra: Obj = {}) => ({
      command: process.execPath,
      args: era === 'modern' ? [FILE_TREE, 'modern'] : [FILE_TREE],
      env: { FILE_TREE_LOG: join(dir, `${name}.log`) },
      ...extra,
    });
    gw = await startTestGateway({
      mcpServers: {
        lf: server('legacy', 'lf', { resources: filters }),
        mf: server('modern', 'mf', { resources: filters }),
        lg: server('legacy', 'lg'),
        mg: server('modern', 'mg'),
      },
      gateway: { auth: { ...issuer.auth } },
    });
    filterToken = await issuer.mint({ scope: 'resources:lf__* resources:mf__*' }, 'filtered');
    grantToken = await issuer.mint(
      {
        scope: GRANTED.flatMap((s) => [
          `resources:${s}__file:///public/*`,
          `resources:${s}__memo://notes/public/*`,
        ]).join(' '),
      },
      'granted',
    );
    for (const [token, servers] of [
      [filterToken, FILTERED],
      [grantToken, GRANTED],
    ] as const) {
      clients.push({ handle: await connectLegacy(gw.url, token), servers, token });
      clients.push({ handle: await connectModern(gw.url, token), servers, token });
    }
  });

  afterAll(async () => {
    for (const c of clients) await c.handle.close().catch(() => {});
    await gw?.stop();
  });

  it('49.4: a dot segment never passes a resource filter or grant: every traversal read is refused, and no upstream is asked for a secret', async () => {
    for (const { handle, servers } of clients) {
      for (const server of servers) {
        for (const uri of attacks(server)) {
          const e = await refusal(readResource(handle, uri), `${handle.era} client reading ${uri}`);
          expect([-32602, -32002], `${handle.era} ${uri}: ${e.message}`).toContain(e.code);
          expect(e.message).toMatch(/Resource not found|invalid resource URI/);
          expect(e.message).not.toMatch(/SECRET/);
        }
        // What the filters and grants allow still reads, in any spelling of the same URI.
        const readme = await readResource(handle, exposed(server, 'file:///public/docs/../readme.txt'));
        expect(JSON.stringify(readme.contents), `${handle.era} ${server}`).toContain('PUBLIC README');
        const doc = await readResource(handle, exposed(server, 'file:///public/%2e/docs/%61.txt'));
        expect(JSON.stringify(doc.contents)).toContain('PUBLIC DOC A');
        const note = await readResource(handle, exposed(server, 'MEMO://NOTES/public/./hello'));
        expect(JSON.stringify(note.contents)).toContain('PUBLIC NOTE');
      }
    }
    for (const server of SERVERS) {
      expect(secretsAsked(server), server).toEqual([]);
      // Not vacuous: the public reads above reached each upstream.
      expect(
        logOf(server).filter((e) => e.method === 'resources/read').length,
        server,
      ).toBeGreaterThanOrEqual(6);
    }
  });

  it('49.4: a dot segment never names a secret in a refusal: the reason says what is wrong, not what is there', async () => {
    const legacy = clients[0]!.handle;
    const e = await refusal(readResource(legacy, 'file:///public/..%2fsecret/key.txt'), 'an encoded slash');
    expect(e.code).toBe(-32602);
    expect(e.message).toMatch(/invalid resource URI: .*encoded "\/"/);
    const opaque = await refusal(readResource(legacy, 'memo:public/../secret/pin'), 'an opaque path');
    expect(opaque.message).toMatch(/dot segment/);
  });

  it('49.4: subscriptions take the same route: a traversal is never subscribed upstream; what is subscribed is the normalised URI', async () => {
    for (const { handle, servers, token } of clients) {
      for (const server of servers.filter((s) => s.startsWith('l'))) {
        if (handle.era === 'legacy') {
          for (const uri of attacks(server)) {
            await refusal(handle.client.subscribeResource({ uri }), `subscribing ${uri}`);
          }
          await handle.client.subscribeResource({ uri: exposed(server, 'file:///public/docs/./a.txt') });
          await handle.client.unsubscribeResource({ uri: exposed(server, 'file:///public/docs/%61.txt') });
        } else {
          const listen = await modernListen(
            gw.url,
            { resourceSubscriptions: [...attacks(server), exposed(server, 'file:///public/readme.txt')] },
            { authorization: `Bearer ${token}` },
          );
          try {
            const ack = await listen.next((m) => m.method === 'notifications/subscriptions/acknowledged');
            expect((ack.params as { notifications: Obj }).notifications).toEqual({
              resourceSubscriptions: [exposed(server, 'file:///public/readme.txt')],
            });
          } finally {
            listen.close();
          }
        }
      }
    }
    for (const server of ['lf', 'lg'] as const) {
      expect(secretsAsked(server), server).toEqual([]);
      // The upstream was asked to watch, and to stop watching, the URI in normal form.
      expect(logOf(server)).toEqual(
        expect.arrayContaining([
          { method: 'resources/subscribe', uri: 'file:///public/docs/a.txt' },
          { method: 'resources/unsubscribe', uri: 'file:///public/docs/a.txt' },
          { method: 'resources/subscribe', uri: 'file:///public/readme.txt' },
        ]),
      );
    }
  });

  it('49.4: completion takes the same route: a traversal URI in a resource ref never reaches an upstream', async () => {
    for (const { handle, servers } of clients) {
      for (const server of servers) {
        const template = exposed(server, 'file:///public/{+path}');
        const ok = await complete(handle, template);
        expect((ok.completion as Obj).values).toEqual(['readme.txt']);
        for (const uri of attacks(server)) await refusal(complete(handle, uri), `completing ${uri}`);
      }
    }
    for (const server of SERVERS) {
      expect(secretsAsked(server), server).toEqual([]);
      expect(logOf(server)).toContainEqual({ method: 'completion/complete', uri: 'file:///public/{+path}' });
    }
  });
});
