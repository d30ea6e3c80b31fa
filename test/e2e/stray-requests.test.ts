import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectLegacy, connectModern } from '../helpers/clients.js';
import { ROOT, startTestGateway, stopChild, type TestGateway } from '../helpers/harness.js';

/**
 * A legacy HTTP upstream's request to the client that arrives on no call's stream (the GET
 * stream: server-everything syncs roots 350 ms after initialize) is only guessed to belong to the
 * one call in flight. When that call's client did not declare the capability, the request is
 * refused upstream and the call runs on: a guess never ends a call. (It used to: a client's first
 * call after the upstream connected could fail with "did not declare the roots capability".)
 */
describe('a stray request from a legacy upstream', () => {
  let dir: string;
  let up: ChildProcess;
  let gw: TestGateway;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-stray-'));
    up = spawn(process.execPath, [join(ROOT, 'test/fixtures/wait-http.mjs')], {
      env: { ...process.env, WAIT_LOG: join(dir, 'wait.log') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const port = await new Promise<number>((res, rej) => {
      up.once('exit', (code) => rej(new Error(`wait-http exited with ${code}`)));
      up.stdout?.once('data', (d) => res(Number(String(d).trim())));
    });
    up.stdout?.resume();
    gw = await startTestGateway({
      mcpServers: {
        w: {
          url: `http://127.0.0.1:${port}/mcp`,
          clientFeatures: { roots: true, sampling: true, elicitation: true },
        },
      },
      gateway: { allowedHosts: [`127.0.0.1:${port}`] },
    });
  });

  afterAll(async () => {
    await gw?.stop();
    if (up) await stopChild(up);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const textOf = (r: unknown) =>
    ((r as { content: { type: string; text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('\n');

  it('modern client without roots: the call completes, the upstream hears the refusal', async () => {
    const c = await connectModern(gw.url);
    try {
      const r = await c.client.callTool({ name: 'w__stray_roots', arguments: {} });
      expect(textOf(r)).toMatch(/^roots refused: .*did not declare the roots capability/);
    } finally {
      await c.close();
    }
  });

  it('legacy client without roots: the call completes, the upstream hears the refusal', async () => {
    const c = await connectLegacy(gw.url);
    try {
      const r = await c.client.callTool({ name: 'w__stray_roots', arguments: {} });
      expect(textOf(r)).toMatch(/^roots refused: .*did not declare the roots capability/);
    } finally {
      await c.close();
    }
  });
});
