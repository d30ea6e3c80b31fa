import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectLegacy, connectModern, REFERENCE } from '../helpers/clients.js';
import { EVERYTHING, eventually, startTestGateway, type TestGateway } from '../helpers/harness.js';

/**
 * `--log-level debug` shows the upstream traffic (#16): one `upstream.traffic` line per request a
 * server was sent (method, the tool, prompt or URI it named, how it ended, how long it took) and
 * per listing (method, items), tagged with the server, and never an argument or a result.
 */
describe('debug log: the upstream traffic summary', () => {
  let gw: TestGateway;
  const SECRET_ARG = 'argument-text-that-must-never-be-logged';

  beforeAll(async () => {
    gw = await startTestGateway({
      mcpServers: {
        // server-everything speaks 2025-11-25; the reference fixture 2026-07-28.
        ev: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        rs: { command: process.execPath, args: [REFERENCE, 'stdio'] },
      },
    });
  });
  afterAll(async () => {
    await gw?.stop();
  });

  const traffic = () => gw.logs.filter((l) => l.event === 'upstream.traffic');

  it('listings are summarised per server and kind, with their item counts', () => {
    const lists = traffic().filter((l) => l.method === 'tools/list');
    expect(new Set(lists.map((l) => l.server))).toEqual(new Set(['ev', 'rs']));
    for (const l of lists) expect(l.items).toBeGreaterThan(0);
    expect(
      gw.gateway
        .health()
        .upstreams.map((u) => u.era)
        .sort(),
    ).toEqual(['legacy', 'modern']);
  });

  it('a legacy client calling a legacy upstream: method, tool, outcome and duration, no argument', async () => {
    const legacy = await connectLegacy(gw.url);
    try {
      const r = await legacy.client.callTool({ name: 'ev__echo', arguments: { message: SECRET_ARG } });
      expect(JSON.stringify(r.content)).toContain(SECRET_ARG);
    } finally {
      await legacy.close();
    }
    await eventually(
      () => traffic().some((l) => l.server === 'ev' && l.method === 'tools/call'),
      'the ev line',
    );
    const line = traffic().find((l) => l.server === 'ev' && l.method === 'tools/call')!;
    expect(line).toMatchObject({ level: 'debug', target: 'echo', outcome: 'ok' });
    expect(typeof line.durationMs).toBe('number');
    expect(JSON.stringify(gw.logs)).not.toContain(SECRET_ARG);
  });

  it('a modern client calling a modern upstream: a tool error is told apart from a success', async () => {
    const modern = await connectModern(gw.url);
    try {
      await modern.client.callTool({ name: 'rs__test_simple_text', arguments: {} });
      const failed = await modern.client.callTool({ name: 'rs__test_error_handling', arguments: {} });
      expect(failed.isError).toBe(true);
    } finally {
      await modern.close();
    }
    const calls = () => traffic().filter((l) => l.server === 'rs' && l.method === 'tools/call');
    await eventually(() => calls().length >= 2, 'both rs lines');
    expect(calls().map((l) => [l.target, l.outcome])).toEqual([
      ['test_simple_text', 'ok'],
      ['test_error_handling', 'isError'],
    ]);
    // The result's text stays out of the log as well.
    expect(JSON.stringify(gw.logs)).not.toContain('intentionally returns an error');
  });
});
