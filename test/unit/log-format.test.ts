import { describe, expect, it } from 'vitest';
import { prettyLine } from '../../deploy/node/runtime/log.js';
import { createJsonLogger } from '../../src/lib/log.js';

describe('the terminal log format', () => {
  it('one readable line per event: clock, level, event, [server], fields', () => {
    const lines: string[] = [];
    const log = createJsonLogger({
      level: 'info',
      now: () => Date.parse('2026-12-02T10:11:12.345Z'),
      redact: ['sk-secret-value'],
      write: (l) => lines.push(prettyLine(l)),
    });
    log.child({ server: 'gh' }).warn('upstream.exited', { code: 1, signal: null });
    log.info('gateway.listening', { url: 'http://127.0.0.1:8787/mcp', servers: 2 });
    log.info('upstream.stderr', { line: 'token sk-secret-value refused', nested: { a: [1] } });
    log.debug('not.shown');
    expect(lines).toEqual([
      '10:11:12.345 WARN  upstream.exited [gh] code=1 signal=null',
      '10:11:12.345 INFO  gateway.listening url=http://127.0.0.1:8787/mcp servers=2',
      '10:11:12.345 INFO  upstream.stderr line="token [redacted] refused" nested={"a":[1]}',
    ]);
  });

  it('a line that is not JSON is passed through as it is', () => {
    expect(prettyLine('plain text')).toBe('plain text');
  });
});
