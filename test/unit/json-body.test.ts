import { describe, expect, it } from 'vitest';
import { json, STREAMED_BODY_CHARS, toResponse } from '../../src/server/mcp/http-in.js';

// A big JSON answer leaves in pieces, encoded as the socket asks for them (#18: one copy less of
// a 20 MiB result at the peak); a small one is handed over whole, as before.
describe('json()', () => {
  it('sends a small body whole', async () => {
    const r = toResponse(json('{"a":1}', 201, { 'x-k': 'v' }));
    expect(r.status).toBe(201);
    expect(r.headers.get('content-type')).toBe('application/json');
    expect(r.headers.get('x-k')).toBe('v');
    expect(await r.text()).toBe('{"a":1}');
  });

  it('streams a big body in pieces that add up to exactly the same text, pairs unsplit', async () => {
    // The first piece would end between the halves of an emoji (a surrogate pair): cut there, both
    // halves would become U+FFFD. Non-ASCII throughout.
    const head = '{"t":"';
    const text = `${head}${'é'.repeat(256 * 1024 - 1 - head.length)}😀${'ü'.repeat(STREAMED_BODY_CHARS * 2)}"}`;
    expect(text.charCodeAt(256 * 1024 - 1)).toBe(0xd83d);
    expect(text.length).toBeGreaterThan(STREAMED_BODY_CHARS);
    const r = toResponse(json(text));
    expect(r.headers.get('content-type')).toBe('application/json');
    const reader = r.body!.getReader();
    const pieces: Uint8Array[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      pieces.push(value);
    }
    expect(pieces.length).toBeGreaterThan(4);
    const decoder = new TextDecoder('utf-8', { fatal: true });
    // Each piece decodes on its own: no pair was cut in two.
    for (const p of pieces) expect(() => decoder.decode(p)).not.toThrow();
    expect(pieces.map((p) => decoder.decode(p)).join('')).toBe(text);
  });
});
