import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  EVERYTHING,
  FIXTURE,
  ROOT,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

const BIG = `${ROOT}/test/fixtures/big-catalog.mjs`;
const BUDGET = 40_000;

function text(res: unknown): string {
  return ((res as { content: { text: string }[] }).content[0] as { text: string }).text;
}

describe('guards through the gateway', () => {
  let gw: TestGateway;
  let client: Client;

  beforeAll(async () => {
    gw = await startTestGateway({
      mcpServers: {
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        big: { command: process.execPath, args: [BIG], budgetTokens: BUDGET },
        fx: { command: process.execPath, args: [FIXTURE] },
      },
      // The full listing is what these tests read: 205 tools stay listed (no switch to search, #17).
      gateway: { maxBodyBytes: 4 * 1024 * 1024, pageSize: 1000, catalog: { maxTools: 1000 } },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
  });

  it('a large catalog is listed at or under its disclosure budget', async () => {
    const { tools } = await client.listTools();
    const big = tools.filter((t) => t.name.startsWith('big__'));
    expect(big).toHaveLength(205);
    const chars = big.reduce(
      (n, t) => n + JSON.stringify({ d: t.description, i: t.inputSchema, o: t.outputSchema }).length,
      0,
    );
    expect(Math.ceil(chars / 4)).toBeLessThanOrEqual(BUDGET * 1.05);
    expect(tools.map((t) => t.name)).toContain('manifold__describe_tool');
  });

  it('stubs keep required parameter names and point at describe_tool; small schemas stay whole', async () => {
    const { tools } = await client.listTools();
    const ops = tools.filter((t) => t.name.startsWith('big__op_'));
    const deferred = ops.filter((t) => t.description?.includes('manifold__describe_tool'));
    // Size-aware: some schemas are shed, not all of them.
    expect(deferred.length).toBeGreaterThan(0);
    expect(deferred.length).toBeLessThan(ops.length);
    for (const op of deferred) {
      expect(op.inputSchema.required).toEqual(['field_0', 'field_1']);
      expect(Object.keys(op.inputSchema.properties ?? {})).toContain('field_0');
      expect(JSON.stringify(op.inputSchema)).not.toContain('of tool');
      expect(op.description).toContain(`{"name": "${op.name}"}`);
    }
    const whole = ops.find((t) => !deferred.includes(t))!;
    expect(JSON.stringify(whole.inputSchema)).toContain('of tool');
    const small = tools.find((t) => t.name === 'big__small_0')!;
    expect(small.inputSchema).toEqual({
      type: 'object',
      properties: { q: { type: 'string' } },
      required: ['q'],
    });
  });

  it('describe_tool returns the full schema, and refuses unknown names like unknown tools', async () => {
    const res = await client.callTool({
      name: 'manifold__describe_tool',
      arguments: { name: 'big__op_000' },
    });
    const full = JSON.parse(text(res));
    expect(full.name).toBe('big__op_000');
    expect(full.inputSchema.properties.field_0.enum).toEqual(['alpha', 'beta', 'gamma', 'delta', 'epsilon']);
    expect(full.inputSchema.properties.field_0.description).toContain('Field 0 of tool 0');
    const many = await client.callTool({
      name: 'manifold__describe_tool',
      arguments: { names: ['big__op_001', 'big__small_1'] },
    });
    expect(JSON.parse(text(many))).toHaveLength(2);
    const unknown = await client.callTool({
      name: 'manifold__describe_tool',
      arguments: { name: 'nope__x' },
    });
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toBe('Unknown tool: nope__x');
  });

  it('argument validation uses the full schema even for a stub', async () => {
    const { tools } = await client.listTools();
    const stub = tools.find(
      (t) => t.description?.includes('manifold__describe_tool') && t.name.startsWith('big__op_'),
    )!;
    // The stub has no enum; the full schema does, so 'zeta' is refused.
    expect(JSON.stringify(stub.inputSchema)).not.toContain('alpha');
    const res = await client.callTool({ name: stub.name, arguments: { field_0: 'zeta', field_1: 1 } });
    expect(res.isError).toBe(true);
    expect(text(res)).toMatch(/field_0/);
    const ok = await client.callTool({ name: stub.name, arguments: { field_0: 'alpha', field_1: 1 } });
    expect(ok.isError).toBeFalsy();
  });

  it('wrong arguments to a real tool give isError, listing the problems and the schema, and the upstream is never called', async () => {
    const stats = async () => JSON.parse(text(await client.callTool({ name: 'fx__stats', arguments: {} })));
    const before = await stats();
    const bad = await client.callTool({ name: 'fx__sleep', arguments: { ms: 'soon' } });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toMatch(/Invalid arguments for tool fx__sleep/);
    expect(text(bad)).toMatch(/Full input schema/);
    expect((await stats()).calls).toBe(before.calls);
    const echo = await client.callTool({ name: 'everything__echo', arguments: { message: 42 } });
    expect(echo.isError).toBe(true);
    expect(text(echo)).toMatch(/message/);
  });

  it('E1: echo with a 1 MB message is capped with a visible marker and flagged', async () => {
    const res = await client.callTool({
      name: 'everything__echo',
      arguments: { message: 'x'.repeat(1024 * 1024) },
    });
    const serialized = JSON.stringify(res);
    expect(serialized.length).toBeLessThanOrEqual(65_536 + 512);
    expect(text(res)).toMatch(/\[… truncated: \d+ of \d+ bytes\]/);
    expect(res._meta?.['manifold/truncated']).toBe(true);
  });

  it('a result under the cap passes through untouched', async () => {
    const res = await client.callTool({ name: 'everything__echo', arguments: { message: 'short' } });
    expect(res._meta?.['manifold/truncated']).toBeUndefined();
    expect(text(res)).toBe('Echo: short');
  });
});
