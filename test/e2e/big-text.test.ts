import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bigText } from '../fixtures/reference/tools.mjs';
import { connectLegacy, connectModern, REFERENCE, startReferenceHttp } from '../helpers/clients.js';
import { startTestGateway, type TestGateway } from '../helpers/harness.js';

// A big text answer (over the 1 Mi characters a reply is written in pieces past, http-in.ts)
// reaches clients of both eras exactly as the upstream wrote it, from upstreams of both eras over
// stdio and HTTP.
const CHARS = 1.5 * 1024 * 1024;

describe('a 1.5 Mi-character text relayed whole', () => {
  let gw: TestGateway;
  let refHttp: Awaited<ReturnType<typeof startReferenceHttp>>;
  const env = { REF_BIG_TEXT: String(CHARS) };
  const expected = bigText(CHARS);

  beforeAll(async () => {
    refHttp = await startReferenceHttp(env);
    gw = await startTestGateway(
      {
        mcpServers: {
          rs: { command: process.execPath, args: [REFERENCE, 'stdio'], env },
          rh: { url: refHttp.url },
          lh: { url: refHttp.url, protocol: '2025-11-25' },
        },
        gateway: { allowedHosts: [`127.0.0.1:${refHttp.port}`], maxResultBytes: 8 * 1024 * 1024 },
      },
      { env },
    );
  });
  afterAll(async () => {
    await gw?.stop();
    await refHttp?.stop();
  });

  for (const era of ['legacy', 'modern'] as const) {
    for (const server of ['rs', 'rh', 'lh']) {
      it(`${era} client, ${server}: every character arrives, the blocks in order`, async () => {
        const url = gw.url;
        const handle = era === 'legacy' ? await connectLegacy(url) : await connectModern(url);
        try {
          const r = (await handle.client.callTool({ name: `${server}__test_big_text`, arguments: {} })) as {
            content: { type: string; text: string }[];
            isError?: boolean;
          };
          expect(r.isError ?? false).toBe(false);
          expect(r.content).toHaveLength(2);
          expect(r.content[0]!.text.length).toBe(expected.length);
          expect(r.content[0]!.text === expected).toBe(true);
          expect(r.content[1]!.text).toBe('after');
        } finally {
          await handle.close();
        }
      });
    }
  }

  it('caps a big text to maxResultBytes exactly as before when it does not fit', async () => {
    const small = await startTestGateway(
      {
        mcpServers: { rh: { url: refHttp.url } },
        gateway: { allowedHosts: [`127.0.0.1:${refHttp.port}`], maxResultBytes: 256 * 1024 },
      },
      { env },
    );
    try {
      const handle = await connectLegacy(small.url);
      const r = (await handle.client.callTool({ name: 'rh__test_big_text', arguments: {} })) as {
        content: { type: string; text: string }[];
        _meta?: Record<string, unknown>;
      };
      await handle.close();
      expect(r._meta?.['manifold/truncated']).toBe(true);
      const kept = r.content[0]!.text;
      expect(kept).toMatch(/\[… truncated: \d+ of \d+ bytes\]$/);
      const body = kept.slice(0, kept.lastIndexOf('\n[… truncated'));
      expect(expected.startsWith(body)).toBe(true);
      expect(Buffer.byteLength(JSON.stringify(r))).toBeLessThanOrEqual(256 * 1024 + 512);
    } finally {
      await small.stop();
    }
  });
});
