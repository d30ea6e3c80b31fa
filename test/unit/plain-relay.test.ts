import { describe, expect, it } from 'vitest';
import type { Exchange } from '../../src/server/mcp/exchange.js';
import { plainEligible } from '../../src/server/mcp/relay/plain.js';
import type { Through } from '../../src/server/mcp/relay/relay.js';

/** The parts of an exchange and a relayed request that decide between the plain relay and `start`. */
function call(
  ex: Partial<Exchange> = {},
  t: Partial<Through> = {},
  features = { sampling: true, elicitation: true, roots: true },
) {
  const exchange = { clientCapabilities: {}, ...ex } as Exchange;
  const through = {
    upstream: { config: { name: 's', clientFeatures: features } },
    ...t,
  } as unknown as Through;
  return plainEligible(exchange, through);
}

describe('plainEligible (#18)', () => {
  it('takes a call whose only message is its answer', () => {
    expect(call()).toBe(true);
    // A capability the server may not use (its feature is off) cannot bring a question either.
    expect(
      call({ clientCapabilities: { sampling: {} } }, {}, { sampling: false, elicitation: true, roots: true }),
    ).toBe(true);
    // Capabilities that carry no questions (tasks, experimental) do not matter.
    expect(call({ clientCapabilities: { experimental: {}, extensions: {} } })).toBe(true);
  });

  it('leaves to the streamed path every call where something may reach the client first', () => {
    expect(call({}, { progressToken: 'p1' })).toBe(false);
    expect(call({}, { progressToken: 0 })).toBe(false);
    expect(call({ logLevel: 'debug' })).toBe(false);
    expect(call({ pollMs: 500 })).toBe(false);
    expect(call({ trace: {} as Exchange['trace'] })).toBe(false);
    expect(call({}, { approval: {} as Through['approval'] })).toBe(false);
    expect(call({}, { tasks: true })).toBe(false);
    expect(call({}, { onTask: async () => '' })).toBe(false);
    expect(call({}, { relatedTask: 't1' })).toBe(false);
    for (const feature of ['sampling', 'elicitation', 'roots']) {
      expect(call({ clientCapabilities: { [feature]: {} } })).toBe(false);
    }
  });
});
