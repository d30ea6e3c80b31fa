import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRUNCATED_META_KEY } from '../../src/guards/result-cap.js';
import { type AnyHandle, connectLegacy, connectModern } from '../helpers/clients.js';
import { ROOT, startTestGateway, type TestGateway } from '../helpers/harness.js';

// Issue #14: answers of tools with an outputSchema, through the gateway to SDK clients of both
// eras that know the schema (they listed the tools) and check every answer against it. What a
// conforming client would throw on comes back as an isError result instead.
const STRUCTURED = resolve(ROOT, 'test/fixtures/structured-server.mjs');
const CAP = 4096;

type Result = { content: { type: string; text: string }[]; structuredContent?: unknown; isError?: boolean };

async function call(h: AnyHandle, name: string): Promise<Result> {
  const params = { name: `s__${name}`, arguments: {} };
  return (await h.client.callTool(params)) as unknown as Result;
}

const text = (r: Result) => r.content.map((b) => b.text).join('\n');

describe('#14 structured results against the output schema', () => {
  let gw: TestGateway;
  const handles: AnyHandle[] = [];

  beforeAll(async () => {
    gw = await startTestGateway({
      mcpServers: { s: { command: process.execPath, args: [STRUCTURED], maxResultBytes: CAP } },
    });
    handles.push(await connectLegacy(gw.url), await connectModern(gw.url));
    // Listing the tools is what makes an SDK client check a call's answer against its outputSchema.
    for (const h of handles) {
      const { tools } = await h.client.listTools();
      const valid = (tools as { name: string; outputSchema?: unknown }[]).find((t) => t.name === 's__valid');
      expect(valid?.outputSchema).toMatchObject({ required: ['city', 'celsius'] });
    }
  }, 20_000);

  afterAll(async () => {
    for (const h of handles) await h.close().catch(() => {});
    await gw?.stop();
  });

  const eras = () => handles.map((h) => [h.era, h] as const);

  it('(a) a conforming answer passes with its structuredContent', async () => {
    for (const [era, h] of eras()) {
      const r = await call(h, 'valid');
      expect(r.structuredContent, era).toEqual({ city: 'Oslo', celsius: -3 });
      expect(r.isError ?? false, era).toBe(false);
      expect(text(r), era).toBe('{"city":"Oslo","celsius":-3}');
    }
  });

  it('(b) a non-conforming answer is an isError result listing the problems, not the answer', async () => {
    for (const [era, h] of eras()) {
      const r = await call(h, 'invalid');
      expect(r.isError, era).toBe(true);
      expect(r.structuredContent, era).toBeUndefined();
      expect(text(r), era).toBe(
        'The answer of tool s__invalid did not match its declared output schema, so it was not relayed:\n' +
          '- /city: required property is missing\n' +
          '- /celsius: expected type number, got string',
      );
    }
    expect(gw.logs).toContainEqual(
      expect.objectContaining({
        event: 'guard.output_invalid',
        server: 's',
        tool: 's__invalid',
        problems: 2,
      }),
    );
  });

  it('(c) an answer without structuredContent is an isError result saying so', async () => {
    for (const [era, h] of eras()) {
      const r = await call(h, 'missing');
      expect(r.isError, era).toBe(true);
      expect(r.structuredContent, era).toBeUndefined();
      expect(text(r), era).toContain('did not match its declared output schema');
      expect(text(r), era).toContain('- (root): structuredContent is missing');
      expect(text(r), era).not.toContain('Oslo');
    }
  });

  it('(d) an answer too large for the cap is an isError result naming its size and the cap', async () => {
    for (const [era, h] of eras()) {
      const r = (await call(h, 'huge')) as Result & { _meta?: Record<string, unknown> };
      expect(r.isError, era).toBe(true);
      expect(r.structuredContent, era).toBeUndefined();
      expect(text(r), era).toMatch(
        new RegExp(
          `^The answer of tool s__huge was too large to relay: \\d{5} bytes, over the result size cap of ${CAP} bytes\\.`,
        ),
      );
      expect(text(r), era).toContain('Ask for less');
      expect(r._meta?.[TRUNCATED_META_KEY], era).toBe(true);
    }
    expect(gw.logs).toContainEqual(
      expect.objectContaining({ event: 'guard.result_truncated', tool: 's__huge', max: CAP }),
    );
  });

  it('(e) an upstream isError answer passes as it is', async () => {
    for (const [era, h] of eras()) {
      const r = await call(h, 'failing');
      expect(r.isError, era).toBe(true);
      expect(r.content, era).toEqual([{ type: 'text', text: 'weather service unavailable' }]);
      expect(r.structuredContent, era).toBeUndefined();
    }
  });
});
