import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectClient,
  EVERYTHING,
  eventually,
  FIXTURE,
  MEMORY,
  startTestGateway,
  type TestGateway,
} from '../helpers/harness.js';

// Real upstreams over real stdio: server-everything, server-memory and an SDK fixture.
describe('core gateway over stdio upstreams', () => {
  let gw: TestGateway;
  let client: Client;

  beforeAll(async () => {
    gw = await startTestGateway({
      mcpServers: {
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
        memory: {
          command: process.execPath,
          args: [MEMORY],
          env: { MEMORY_FILE_PATH: '/tmp/manifold-test-memory.jsonl' },
        },
        fx: { command: process.execPath, args: [FIXTURE], timeoutMs: 1500 },
      },
    });
    client = await connectClient(gw.url);
  });
  afterAll(async () => {
    await client?.close();
    await gw?.stop();
  });

  it('merges every upstream into one list with qualified names', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toContain('everything__echo');
    expect(names).toContain('everything__trigger-long-running-operation');
    expect(names).toContain('memory__create_entities');
    expect(names).toContain('memory__read_graph');
    expect(names).toContain('fx__sleep');
    for (const n of names) expect(n).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    // Deterministic: config order, then upstream name order within a server.
    const servers = names.map((n) => n.split('__')[0]);
    expect(servers.indexOf('memory')).toBeGreaterThan(servers.lastIndexOf('everything'));
    expect(servers.indexOf('fx')).toBeGreaterThan(servers.lastIndexOf('memory'));
    const ev = names.filter((n) => n.startsWith('everything__'));
    expect(ev).toEqual([...ev].sort());
  });

  it('C5: never forwards upstream instructions', () => {
    expect(client.getInstructions()).toBeUndefined();
    expect(client.getServerVersion()?.name).toBe('manifold');
  });

  it('calls everything__echo through the gateway', async () => {
    const res = await client.callTool({ name: 'everything__echo', arguments: { message: 'hello manifold' } });
    expect(res.isError).toBeFalsy();
    expect(JSON.stringify(res.content)).toContain('hello manifold');
  });

  it('calls a server-memory tool and reads the result back', async () => {
    await client.callTool({
      name: 'memory__create_entities',
      arguments: { entities: [{ name: 'manifold-e2e', entityType: 'test', observations: ['routed'] }] },
    });
    const res = await client.callTool({ name: 'memory__open_nodes', arguments: { names: ['manifold-e2e'] } });
    expect(JSON.stringify(res)).toContain('routed');
  });

  it('relays progress from trigger-long-running-operation, in order', async () => {
    const seen: number[] = [];
    const res = await client.callTool(
      { name: 'everything__trigger-long-running-operation', arguments: { duration: 0.6, steps: 3 } },
      CallToolResultSchema,
      { onprogress: (p) => seen.push(p.progress) },
    );
    expect(JSON.stringify(res.content)).toContain('Long running operation completed');
    // The SDK client runs notification handlers a microtask late, so the last progress may land
    // after its response is settled; exact order on the wire is asserted in http.test.ts.
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen.slice(0, 2)).toEqual([1, 2]);
  });

  it('an unknown tool is a JSON-RPC error that names it', async () => {
    await expect(client.callTool({ name: 'nope__missing', arguments: {} })).rejects.toThrow(
      /Unknown tool: nope__missing/,
    );
  });

  it('a cancelled call reaches the upstream that owns it', async () => {
    const before = JSON.parse(
      ((await client.callTool({ name: 'fx__stats', arguments: {} })).content as { text: string }[])[0]!.text,
    );
    const ac = new AbortController();
    const pending = client.callTool({ name: 'fx__sleep', arguments: { ms: 20_000 } }, CallToolResultSchema, {
      signal: ac.signal,
    });
    await eventually(async () => {
      const s = JSON.parse(
        ((await client.callTool({ name: 'fx__stats', arguments: {} })).content as { text: string }[])[0]!
          .text,
      );
      return s.calls > before.calls;
    }, 'the sleep call reached the fixture');
    ac.abort('user gave up');
    await expect(pending).rejects.toThrow();
    await eventually(async () => {
      const s = JSON.parse(
        ((await client.callTool({ name: 'fx__stats', arguments: {} })).content as { text: string }[])[0]!
          .text,
      );
      return s.cancelled === before.cancelled + 1;
    }, 'the fixture saw notifications/cancelled');
  });

  it('a call past its deadline times out, says the outcome is unknown, and is cancelled upstream', async () => {
    const before = JSON.parse(
      ((await client.callTool({ name: 'fx__stats', arguments: {} })).content as { text: string }[])[0]!.text,
    );
    const err = await client
      .callTool({ name: 'fx__sleep', arguments: { ms: 10_000 } })
      .catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect(String((err as Error).message)).toMatch(/timed out after 1500 ms.*outcome is unknown/);
    await eventually(async () => {
      const s = JSON.parse(
        ((await client.callTool({ name: 'fx__stats', arguments: {} })).content as { text: string }[])[0]!
          .text,
      );
      return s.cancelled === before.cancelled + 1 && s.calls === before.calls + 1;
    }, 'the timed-out call was cancelled upstream and never re-sent');
  });

  it('an upstream list_changed triggers a fresh, verified listing: a tool added after trust is withheld', async () => {
    const res = await client.callTool({ name: 'fx__grow', arguments: {} });
    const grown = (res.content as { text: string }[])[0]!.text;
    // The re-listing happened (the drift gate saw the new tool) ...
    await eventually(
      () => gw.logs.some((l) => l.event === 'drift.withheld' && l.server === 'fx' && l.tool === grown),
      'the upstream list_changed led to a re-listing',
    );
    // ... and a new tool stays withheld until an operator re-trusts the server (drift.test.ts
    // shows the downstream list_changed for changes that do reach the catalog).
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).not.toContain(`fx__${grown}`);
  });

  it('an upstream request to the client (sampling) is refused with a clear error', async () => {
    const res = await client.callTool({ name: 'fx__ask_client', arguments: {} });
    expect((res.content as { text: string }[])[0]!.text).toMatch(
      /refused: .*Manifold does not relay sampling\/createMessage/,
    );
  });
});
