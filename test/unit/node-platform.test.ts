import { afterEach, describe, expect, it, vi } from 'vitest';
import { batchedLines, nodeLogger } from '../../deploy/node/runtime/log.js';
import { nodePlatform } from '../../deploy/node/runtime/platform.js';
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
// The clock and the batch timer are fake, so a slow or busy machine cannot turn the burst into a
// quiet spell; the end of a turn is the real one (setImmediate).
describe('nodeLogger batching', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes a line after a quiet spell at once, and batches the lines that follow', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const endOfTurn = () => new Promise((r) => setImmediate(r));
    const writes: { text: string }[] = [];
    const original = process.stderr.write;
    process.stderr.write = ((chunk: string) => {
      writes.push({ text: String(chunk) });
      return true;
    }) as typeof process.stderr.write;
    try {
      const log = nodeLogger('info');
      log.info('first.line');
      expect(writes).toHaveLength(0);
      await endOfTurn();
      expect(writes).toHaveLength(1);
      expect(writes[0]!.text).toContain('first.line');
      // A burst right after: held for the rest of the 20 ms, then written in one piece.
      for (let i = 0; i < 50; i++) log.info('burst.line', { i });
      await endOfTurn();
      vi.advanceTimersByTime(19);
      expect(writes).toHaveLength(1);
      vi.advanceTimersByTime(1);
      expect(writes).toHaveLength(2);
      expect(writes[1]!.text.split('\n').filter((l) => l.includes('burst.line'))).toHaveLength(50);
      // Quiet again for the whole 20 ms: the next line goes out at the end of its turn.
      vi.advanceTimersByTime(20);
      log.info('after.quiet');
      await endOfTurn();
      expect(writes).toHaveLength(3);
      expect(writes[2]!.text).toContain('after.quiet');
    } finally {
      process.stderr.write = original;
    }
  });
});

// What reaches the sink must be exactly the lines, in order, in as few writes as the size allows.
describe('batchedLines', () => {
  const collect = (charsPerWrite: number) => {
    const chunks: string[] = [];
    const b = batchedLines((chunk) => chunks.push(chunk), charsPerWrite);
    return { chunks, ...b };
  };

  it('keeps every line and character, in order, in one write', () => {
    const { chunks, write, flush } = collect(4096);
    const lines = ['plain', 'grüße ☃ 日本語', 'emoji 😀 pair'];
    for (const l of lines) write(l);
    flush();
    flush();
    expect(chunks).toEqual([`${lines.join('\n')}\n`]);
  });

  it('writes at once when the pending lines reach the size, and the next lines after', () => {
    const { chunks, write, flush } = collect(64);
    write('a'.repeat(20));
    write('b'.repeat(20));
    expect(chunks).toEqual([]);
    write('c'.repeat(30)); // 21 + 21 + 31 pending: past 64
    expect(chunks).toEqual([`${'a'.repeat(20)}\n${'b'.repeat(20)}\n${'c'.repeat(30)}\n`]);
    write('d'.repeat(100)); // longer than the size on its own: written at once
    write('e');
    flush();
    expect(chunks.slice(1)).toEqual([`${'d'.repeat(100)}\n`, 'e\n']);
  });
});
