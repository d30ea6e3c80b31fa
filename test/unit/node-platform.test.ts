import { describe, expect, it } from 'vitest';
import { batchedLines, nodeLogger, nodePlatform } from '../../deploy/node/runtime/platform.js';
import { silentLogger } from '../../src/lib/log.js';
import { egressPolicyOf } from '../../src/upstream/wire/egress-fetch.js';

// The Node platform loads undici on its first request out (start time). Until then, and after, its
// fetch must still be seen as a guarded fetch: transports read its policy to refuse a denied URL
// before they exist and to leave redirects to it (SECURITY D3, D5). Its postJson is guarded alike.
describe('nodePlatform egress', () => {
  const platform = nodePlatform(silentLogger, {
    allowedHosts: ['127.0.0.1:4999'],
    maxUpstreamBodyBytes: 1 << 20,
  } as never);

  it('carries the egress policy before undici is loaded', () => {
    const policy = egressPolicyOf(platform.fetch);
    expect(policy).toBeDefined();
    expect(policy?.checkUrl(new URL('http://127.0.0.1:4999/mcp')).ok).toBe(true);
    expect(policy?.checkUrl(new URL('http://169.254.169.254/latest')).ok).toBe(false);
  });

  it('refuses a denied host on the first request, by fetch and by postJson', async () => {
    const err = await platform.fetch('http://10.0.0.1/mcp').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_EGRESS_DENIED' });
    const signal = new AbortController().signal;
    const posted = await platform
      .postJson?.({ url: 'http://10.0.0.1/mcp', headers: {}, body: '{}', signal })
      .catch((e: unknown) => e);
    expect(posted).toMatchObject({ code: 'ERR_EGRESS_DENIED' });
  });
});

// Log lines are batched (at most one stderr write per 20 ms under load), but a line after a quiet
// spell goes out at the end of its turn: `gateway.listening` is not held back by the batch timer.
describe('nodeLogger batching', () => {
  it('writes a line after a quiet spell at once, and batches the lines that follow', async () => {
    const writes: { text: string }[] = [];
    const original = process.stderr.write;
    process.stderr.write = ((chunk: string) => {
      writes.push({ text: String(chunk) });
      return true;
    }) as typeof process.stderr.write;
    try {
      const log = nodeLogger('info');
      log.info('first.line');
      await new Promise((r) => setImmediate(r));
      expect(writes).toHaveLength(1);
      expect(writes[0]!.text).toContain('first.line');
      // A burst right after: held for the rest of the 20 ms, then written in one piece.
      for (let i = 0; i < 50; i++) log.info('burst.line', { i });
      await new Promise((r) => setImmediate(r));
      expect(writes).toHaveLength(1);
      await new Promise((r) => setTimeout(r, 40));
      expect(writes).toHaveLength(2);
      expect(writes[1]!.text.split('\n').filter((l) => l.includes('burst.line'))).toHaveLength(50);
    } finally {
      process.stderr.write = original;
    }
  });
});

// The batch is UTF-8 in a buffer outside the heap (#18): what reaches the sink must be exactly the
// lines, in order, whatever their characters and lengths.
describe('batchedLines', () => {
  const collect = (bytesPerWrite: number) => {
    const chunks: string[] = [];
    const b = batchedLines((chunk) => {
      chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    }, bytesPerWrite);
    return { chunks, ...b };
  };

  it('keeps every character: multi-byte text, astral pairs and a lone surrogate', () => {
    const { chunks, write, flush } = collect(4096);
    const lines = ['plain', 'grüße ☃ 日本語', 'emoji 😀 pair', 'lone \ud800 half'];
    for (const l of lines) write(l);
    flush();
    expect(chunks).toHaveLength(1);
    // A lone surrogate has no UTF-8: it is written as U+FFFD, as a string write to stderr writes it.
    expect(chunks[0]).toBe(`${lines.map((l) => l.replace('\ud800', '\ufffd')).join('\n')}\n`);
  });

  it('writes what is pending before a line that would not fit, and a line longer than the buffer on its own', () => {
    const { chunks, write, flush } = collect(64);
    // Room is kept for three bytes per character and the newline: 61 bytes for 20 characters.
    write('a'.repeat(20));
    expect(chunks).toEqual([]);
    write('b'.repeat(20)); // 21 used + 61 would pass 64: the first line goes first
    expect(chunks).toEqual([`${'a'.repeat(20)}\n`]);
    write('d'.repeat(100)); // longer than the buffer: what is pending, then the line alone
    expect(chunks.slice(1)).toEqual([`${'b'.repeat(20)}\n`, `${'d'.repeat(100)}\n`]);
    write('e');
    flush();
    flush();
    expect(chunks.slice(3)).toEqual(['e\n']);
  });

  it('does not reuse a buffer it handed to the sink', () => {
    const held: Uint8Array[] = [];
    const b = batchedLines((chunk) => {
      if (typeof chunk !== 'string') held.push(chunk);
    }, 64);
    b.write('first');
    b.flush();
    b.write('second');
    b.flush();
    expect(held.map((c) => Buffer.from(c).toString('utf8'))).toEqual(['first\n', 'second\n']);
  });
});
