import { describe, expect, it } from 'vitest';
import { nodePlatform } from '../../deploy/node/platform.js';
import { silentLogger } from '../../src/log.js';
import { egressPolicyOf } from '../../src/upstream/egress-fetch.js';

// The Node platform's fetch loads undici on its first request (#18, start time). Until then, and
// after, it must still be seen as a guarded fetch: transports read its policy to refuse a denied
// URL before they exist and to leave redirects to it (SECURITY D3, D5).
describe('nodePlatform fetch', () => {
  const platform = nodePlatform(silentLogger, {
    allowedHosts: ['127.0.0.1:4999'],
    maxUpstreamBodyBytes: 1 << 20,
  } as never);

  it('carries the egress policy before undici is loaded', () => {
    const policy = egressPolicyOf(platform.fetch);
    expect(policy).toBeDefined();
    expect(policy?.checkUrl(new URL('http://127.0.0.1:4999/mcp')).ok).toBe(true);
    expect(policy?.checkUrl(new URL('http://169.254.169.254/latest')).ok).toBe(false);
  });

  it('refuses a denied host on the first request, through the lazily loaded guarded fetch', async () => {
    const err = await platform.fetch('http://10.0.0.1/mcp').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_EGRESS_DENIED' });
  });
});
