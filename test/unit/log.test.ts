import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createJsonLogger, type LogFields } from '../../src/lib/log.js';

// The logger builds lines from pre-serialized parts; each must carry exactly what one
// JSON.stringify of the whole object gives (key order aside: JS puts integer-like keys first).
function reference(time: number, level: string, event: string, base: LogFields, fields?: LogFields): string {
  return JSON.stringify({ time: new Date(time).toISOString(), level, event, ...base, ...fields });
}

const value = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.array(fc.string(), { maxLength: 3 }),
);
// Keys include the fixed ones and ones shared between base and fields, so overrides are covered.
const key = fc.oneof(fc.constantFrom('time', 'level', 'event', 'server', 'tool', '__proto__x'), fc.string());
const record = fc.dictionary(key, value, { maxKeys: 6 });

describe('JSON log lines', () => {
  it('carry exactly the JSON of { time, level, event, ...base, ...fields } (property)', () => {
    fc.assert(
      fc.property(
        record,
        fc.option(record, { nil: undefined }),
        fc.string(),
        fc.integer({ min: 0, max: 4_102_444_800_000 }),
        (base, fields, event, time) => {
          const lines: string[] = [];
          const log = createJsonLogger(
            { level: 'debug', now: () => time, write: (l) => lines.push(l) },
            base,
          );
          log.warn(event, fields);
          expect(lines).toHaveLength(1);
          expect(JSON.parse(lines[0]!)).toEqual(JSON.parse(reference(time, 'warn', event, base, fields)));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('a child adds its fields to every line and keeps the level filter', () => {
    const lines: string[] = [];
    const log = createJsonLogger({ level: 'info', now: () => 0, write: (l) => lines.push(l) });
    const child = log.child({ server: 'a' }).child({ tool: 't' });
    child.debug('hidden');
    child.info('shown', { verdict: 'allowed' });
    expect(lines).toEqual([
      reference(0, 'info', 'shown', { server: 'a', tool: 't' }, { verdict: 'allowed' }),
    ]);
  });

  it('says whether debug lines are written, so a debug-only summary costs nothing at info', () => {
    const at = (level: 'debug' | 'info' | 'warn') => createJsonLogger({ level, write: () => {} });
    expect(at('debug').debugEnabled).toBe(true);
    expect(at('debug').child({ server: 'a' }).debugEnabled).toBe(true);
    expect(at('info').debugEnabled).toBe(false);
    expect(at('warn').child({ server: 'a' }).debugEnabled).toBe(false);
  });

  it('redacts secret values wherever they appear, and the timestamp follows the clock', () => {
    const lines: string[] = [];
    let t = 1_000;
    const log = createJsonLogger({
      level: 'info',
      now: () => t,
      redact: ['s3cret-value'],
      write: (l) => lines.push(l),
    });
    log.info('upstream.error', { error: 'token s3cret-value refused' });
    t = 2_000;
    log.info('again');
    expect(lines[0]).not.toContain('s3cret-value');
    expect(JSON.parse(lines[0]!).error).toBe('token [redacted] refused');
    expect(JSON.parse(lines[1]!).time).toBe(new Date(2_000).toISOString());
  });
});
