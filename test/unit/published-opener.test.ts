import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { anonymousPrincipal } from '../../src/auth/principal.js';
import { parseConfigObject } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway/gateway.js';
import type { VerifiedListing } from '../../src/guards/drift/verdict.js';
import { silentLogger } from '../../src/lib/log.js';
import type { Platform } from '../../src/platform.js';
import {
  NotServing,
  type SessionCallOptions,
  type SessionOpener,
  type UpstreamSession,
} from '../../src/upstream/session.js';

/**
 * The runtime seam of #15 (src/upstream/session.ts `SessionOpener`): a Worker isolate opens an
 * upstream from its object's published snapshot. The core publishes that listing and verdict as
 * given (it lists and verifies nothing itself), starts no timers, and reopens on demand.
 */

const tool = (name: string, description: string): Tool => ({
  name,
  description,
  inputSchema: { type: 'object' },
});

/** A session whose listing and verdict were decided elsewhere; listing it is an error. */
function publishedSession(verified: VerifiedListing, calls: string[]): UpstreamSession {
  const tools = [...verified.trusted, ...verified.quarantined];
  return {
    era: 'modern',
    protocolVersion: '2026-07-28',
    hasTools: true,
    capabilities: { tools: {} },
    published: { listing: { tools, prompts: [], resources: [], templates: [] }, verified },
    listPage: () => Promise.reject(new Error('a published session is not listed')),
    request: async (method: string, params: Record<string, unknown>, _o: SessionCallOptions) => {
      calls.push(`${method} ${String(params.name)}`);
      return { content: [{ type: 'text', text: 'ran' }] };
    },
    noteTools: () => {},
    subscribe: async () => {},
    unsubscribe: async () => {},
    ping: async () => {},
    close: async () => {},
  };
}

const platform: Platform = { fetch, runtime: 'test', now: Date.now, log: silentLogger };

function gatewayWith(openSession: SessionOpener): Gateway {
  const parsed = parseConfigObject(
    { mcpServers: { s: { url: 'https://upstream.example/mcp' } }, gateway: { drift: { recheckSeconds: 1 } } },
    {},
  );
  if (!parsed.ok) throw new Error('bad config');
  return new Gateway({ config: parsed.config, platform, version: 't', openSession });
}

describe('SessionOpener: listings published elsewhere (#15)', () => {
  it('publishes the opener verdict as given: trusted served, quarantined stubbed, nothing listed or verified here', async () => {
    const calls: string[] = [];
    const verdict: VerifiedListing = {
      trusted: [tool('a', 'A.')],
      quarantined: [tool('b', 'B changed.')],
      removed: [],
      withheld: ['c'],
      identityChanged: false,
    };
    const gateway = gatewayWith(async () => publishedSession(verdict, calls));
    try {
      await gateway.start();
      expect(gateway.pool.pulled).toBe(true);
      const entries = gateway.visibleEntries(anonymousPrincipal);
      expect(entries.map((e) => e.name)).toEqual(['s__a', 's__b']);
      expect(entries.find((e) => e.name === 's__b')?.quarantined).toBe(true);
      expect(gateway.pool.get('s')?.status().drift).toEqual({ quarantined: ['b'], withheld: ['c'] });
      const upstream = await gateway.owner('s');
      await upstream.request('tools/call', { name: 'a', arguments: {} });
      expect(calls).toEqual(['tools/call a']);
    } finally {
      await gateway.close(0);
    }
  });

  it('reopen takes the next snapshot (a re-trust); a refresh or re-verify reopens instead of listing', async () => {
    let description = 'A v1.';
    let opened = 0;
    const gateway = gatewayWith(async () => {
      opened++;
      return publishedSession(
        {
          trusted: [tool('a', description)],
          quarantined: [],
          removed: [],
          withheld: [],
          identityChanged: false,
        },
        [],
      );
    });
    try {
      await gateway.start();
      const upstream = gateway.pool.get('s')!;
      description = 'A v2.';
      await upstream.reopen();
      expect(gateway.visibleEntries(anonymousPrincipal)[0]?.tool.description).toBe('A v2.');
      await upstream.refresh();
      await upstream.reverify();
      expect(opened).toBe(4);
      expect(upstream.state).toBe('ready');
    } finally {
      await gateway.close(0);
    }
  });

  it('NotServing: the upstream is not ready, and the stored listing it carries is served meanwhile (warm start)', async () => {
    const stored: VerifiedListing = {
      trusted: [tool('a', 'A.')],
      quarantined: [],
      removed: [],
      withheld: [],
      identityChanged: false,
    };
    const gateway = gatewayWith(async () => {
      throw new NotServing('server s is backoff', stored);
    });
    try {
      await gateway.start();
      const upstream = gateway.pool.get('s')!;
      expect(upstream.state).toBe('backoff');
      expect(upstream.status().lastError).toBe('server s is backoff');
      expect(gateway.visibleEntries(anonymousPrincipal).map((e) => e.name)).toEqual(['s__a']);
    } finally {
      await gateway.close(0);
    }
  });
});
