import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectLegacy, connectModern, startHttpTap, startReferenceHttp } from '../helpers/clients.js';
import { startWorker } from '../helpers/workerd.js';

type Obj = Record<string, unknown>;

/**
 * #50: code mode from the same src/ in real workerd: the QuickJS engine loads from the bundle's
 * compiled module, a program's calls reach a modern upstream through the usual chain, and the
 * limits end a run cleanly with the Worker still serving.
 */
describe('workers: code mode (#50)', () => {
  let ref: Awaited<ReturnType<typeof startReferenceHttp>>;
  let tap: Awaited<ReturnType<typeof startHttpTap>>;
  let worker: Awaited<ReturnType<typeof startWorker>>;
  let client: Awaited<ReturnType<typeof connectModern>>;
  const persist = mkdtempSync(join(tmpdir(), 'manifold-do-'));
  const sent = (tool: string) =>
    tap.exchanges.filter((x) => x.body?.method === 'tools/call' && (x.body.params as Obj)?.name === tool)
      .length;
  const run = async (code: string) => {
    const r = (await client.client.callTool({ name: 'manifold__run_code', arguments: { code } })) as {
      content: { text: string }[];
      isError?: boolean;
      structuredContent?: Obj;
    };
    return {
      text: r.content.map((c) => c.text).join('\n'),
      isError: r.isError === true,
      structured: r.structuredContent,
    };
  };

  beforeAll(async () => {
    ref = await startReferenceHttp();
    tap = await startHttpTap(ref.port);
    worker = await startWorker({
      config: {
        mcpServers: { ref: { url: `http://127.0.0.1:${tap.port}/mcp` } },
        gateway: {
          allowedHosts: [`127.0.0.1:${tap.port}`],
          auth: false,
          logLevel: 'error',
          catalog: { mode: 'code' },
          code: { cpuMs: 300, memoryBytes: 16_777_216, maxCalls: 5 },
        },
      },
      persist,
    });
    client = await connectModern(worker.url, undefined, { name: 'code-workers' });
  }, 60_000);

  afterAll(async () => {
    await client?.close();
    await worker?.stop();
    await tap?.stop();
    await ref?.stop();
    rmSync(persist, { recursive: true, force: true });
  });

  it('lists run_code with the declarations and runs a program whose calls reach the upstream', async () => {
    const { tools } = await client.client.listTools();
    const runTool = tools.find((t) => t.name === 'manifold__run_code');
    expect(runTool?.description).toContain('ref__test_simple_text(');
    const before = sent('test_simple_text');
    const out = await run(`
      const a = await tools.ref__test_simple_text({});
      const b = await tools.ref__test_simple_text({});
      return [a.content[0].text === b.content[0].text, Date.now() === new Date().getTime()];
    `);
    expect(out.isError, out.text).toBe(false);
    expect(out.structured).toEqual({ result: [true, true], logs: [] });
    expect(sent('test_simple_text') - before).toBe(2);
  });

  it('a legacy (2025-11-25 session) client runs a program on the Worker too', async () => {
    const legacy = await connectLegacy(worker.url, undefined, 'code-workers-legacy');
    try {
      const before = sent('test_simple_text');
      const r = (await legacy.client.callTool({
        name: 'manifold__run_code',
        arguments: { code: 'const a = await tools.ref__test_simple_text({}); return a.content.length;' },
      })) as { isError?: boolean; structuredContent?: Obj };
      expect(r.isError).toBeUndefined();
      expect(r.structuredContent).toEqual({ result: 1, logs: [] });
      expect(sent('test_simple_text') - before).toBe(1);
    } finally {
      await legacy.close();
    }
  });

  const abuse: [string, string, RegExp][] = [
    ['H1: reaching fetch', 'return await fetch("http://169.254.169.254/")', /'fetch' is not defined/],
    ['H3: an endless loop', 'for (;;) {}', /gateway\.code\.cpuMs/],
    [
      'H3: a memory bomb',
      'const a = []; for (;;) a.push(new Uint8Array(1 << 20));',
      /gateway\.code\.memoryBytes/,
    ],
    ['H3: deep recursion', 'const f = (n) => f(n + 1) + 1; return f(0);', /recursed too deeply/],
    ['H3: a flood of calls', 'for (;;) await tools.ref__test_simple_text({});', /gateway\.code\.maxCalls/],
  ];
  for (const [name, code, error] of abuse) {
    it(`${name} ends in a clean refusal, and the Worker keeps serving`, async () => {
      const out = await run(code);
      expect(out.isError).toBe(true);
      expect(out.text).toMatch(error);
      const ok = await run('return 6 * 7;');
      expect(ok.structured?.result).toBe(42);
    }, 30_000);
  }
});
