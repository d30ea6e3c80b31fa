import { afterEach, describe, expect, it } from 'vitest';
import { startWorker } from '../helpers/workerd.js';

/**
 * A deployment whose config is wrong says what is wrong on every request, not on the first alone:
 * the Worker and its objects keep the failure and answer each request with a response of its own
 * (a kept `Response` or its clone can be read once; workerd refused the second read with a
 * TypeError that named nothing).
 */
/** A valid server entry: the config is wrong only where each case says. */
const SERVERS = { remote: { url: 'https://mcp.example.com/mcp' } };

describe('workers: a misconfigured deployment', () => {
  let worker: Awaited<ReturnType<typeof startWorker>> | undefined;
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });

  /** Three requests of different kinds: each a 500 whose error is `expected`. */
  async function everyRequestSays(url: string, expected: string): Promise<void> {
    const requests: RequestInit[] = [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
      },
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
      },
      { method: 'GET' },
    ];
    for (const init of requests) {
      const res = await fetch(url, init);
      expect(res.status).toBe(500);
      const body = (await res.json()) as { error: string };
      expect(body.error).toContain(expected);
    }
  }

  it('no gateway.auth: every request is refused with the fix', async () => {
    worker = await startWorker({ config: { mcpServers: SERVERS } });
    await everyRequestSays(worker.url, 'gateway.auth is required on Workers');
  }, 60_000);

  it('the same through the single-object route (MANIFOLD_ROUTE=object)', async () => {
    worker = await startWorker({ config: { mcpServers: SERVERS }, vars: { MANIFOLD_ROUTE: 'object' } });
    await everyRequestSays(worker.url, 'gateway.auth is required on Workers');
  }, 60_000);

  it('a config that does not parse: every request names its problem', async () => {
    worker = await startWorker({ config: { mcpServers: { a: { url: 'ftp://x' } } } });
    await everyRequestSays(worker.url, 'invalid MANIFOLD_CONFIG');
  }, 60_000);

  it('a MANIFOLD_JWKS that is not a JWK Set: said, without its text', async () => {
    const auth = { issuer: 'https://issuer.test', audience: 'manifold', jwksFile: 'MANIFOLD_JWKS' };
    for (const jwks of ['{"keys": [', '{"keys": "k1-secretish"}']) {
      worker = await startWorker({
        config: { mcpServers: SERVERS, gateway: { auth } },
        vars: { MANIFOLD_JWKS: jwks },
      });
      await everyRequestSays(worker.url, 'MANIFOLD_JWKS is not a JWK Set');
      const res = await fetch(worker.url, { method: 'POST', body: '{}' });
      expect(await res.text()).not.toContain('k1-secretish');
      await worker.stop();
      worker = undefined;
    }
  }, 120_000);
});
