import { describe, expect, it } from 'vitest';
import {
  formatTraceparent,
  parseBaggage,
  parseTraceparent,
  parseTracestate,
} from '../../src/protocol/trace-context.js';

// The examples of W3C Trace Context Level 1 (§3.2, §4.3) and W3C Baggage (§3.2).
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';

describe('traceparent (W3C Trace Context §3.2)', () => {
  it("reads the spec's example, sampled and not", () => {
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-01`)).toEqual({
      traceId: TRACE,
      spanId: PARENT,
      traceFlags: 1,
      isRemote: true,
    });
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-00`)?.traceFlags).toBe(0);
    // Only the sampled bit is known; the others are not passed on.
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-09`)?.traceFlags).toBe(1);
  });

  it('refuses what the spec calls invalid: the trace then starts anew', () => {
    const bad = [
      `00-${TRACE.toUpperCase()}-${PARENT}-01`,
      `00-${'0'.repeat(32)}-${PARENT}-01`,
      `00-${TRACE}-${'0'.repeat(16)}-01`,
      `ff-${TRACE}-${PARENT}-01`,
      `00-${TRACE}-${PARENT}-01-extra`,
      `00-${TRACE}-${PARENT}-1`,
      `00_${TRACE}_${PARENT}_01`,
      `0-${TRACE}-${PARENT}-01`,
      `00-${TRACE}-${PARENT}-0g`,
      `00-${TRACE}-${PARENT}-01, 00-${TRACE}-${PARENT}-01`,
      '',
      undefined,
      42,
    ];
    for (const value of bad) expect(parseTraceparent(value), String(value)).toBeUndefined();
  });

  it('reads a later version by its first four fields (§4.3, versioning)', () => {
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01-what-the-future-will-be-like`)?.spanId).toBe(PARENT);
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01`)?.traceId).toBe(TRACE);
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01.what`)).toBeUndefined();
  });

  it('writes version 00 with the sampled flag, and reads back what it wrote', () => {
    const written = formatTraceparent({ traceId: TRACE, spanId: PARENT, traceFlags: 1 });
    expect(written).toBe(`00-${TRACE}-${PARENT}-01`);
    expect(formatTraceparent({ traceId: TRACE, spanId: PARENT, traceFlags: 0 })).toBe(
      `00-${TRACE}-${PARENT}-00`,
    );
    expect(parseTraceparent(written)?.spanId).toBe(PARENT);
  });

  it('carries the tracestate that came with it', () => {
    const parent = parseTraceparent(`00-${TRACE}-${PARENT}-01`, 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
    expect(parent?.traceState?.serialize()).toBe('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
    expect(parent?.traceState?.get('congo')).toBe('t61rcWkgMzE');
  });
});

describe('tracestate (§3.3)', () => {
  it('keeps valid members in order, drops invalid ones, drops a value over 512 characters', () => {
    expect(parseTracestate('rojo=00f067aa0ba902b7, congo=t61rcWkgMzE')?.serialize()).toBe(
      'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE',
    );
    expect(parseTracestate('rojo=ok,BAD KEY=x')?.serialize()).toBe('rojo=ok');
    expect(parseTracestate(`a=${'x'.repeat(600)}`)).toBeUndefined();
    expect(parseTracestate('')).toBeUndefined();
    expect(parseTracestate({})).toBeUndefined();
  });

  it('keeps at most 32 members', () => {
    const many = Array.from({ length: 40 }, (_, i) => `k${i}=v`).join(',');
    expect(parseTracestate(many)?.serialize().split(',')).toHaveLength(32);
  });
});

describe('baggage (W3C Baggage §3)', () => {
  it("keeps the spec's examples, properties included, with the optional whitespace removed", () => {
    expect(parseBaggage('userId=alice,serverNode=DF%2028,isProduction=false')).toBe(
      'userId=alice,serverNode=DF%2028,isProduction=false',
    );
    expect(
      parseBaggage('key1=value1;property1;property2, key2 = value2, key3=value3; propertyKey=propertyValue'),
    ).toBe('key1=value1;property1;property2,key2=value2,key3=value3;propertyKey=propertyValue');
  });

  it('drops malformed members and keeps the rest', () => {
    expect(parseBaggage('ok=1,bad value=2,quote="x",noequals,=empty,also=fine')).toBe('ok=1,also=fine');
    expect(parseBaggage('a=1;bad prop')).toBeUndefined();
    expect(parseBaggage('')).toBeUndefined();
    expect(parseBaggage(7)).toBeUndefined();
  });

  it('keeps at most 64 members and 8192 characters', () => {
    const many = Array.from({ length: 100 }, (_, i) => `k${i}=v`).join(',');
    expect(parseBaggage(many)?.split(',')).toHaveLength(64);
    const big = Array.from({ length: 40 }, (_, i) => `k${i}=${'v'.repeat(400)}`).join(',');
    const kept = parseBaggage(big)!;
    expect(kept.length).toBeLessThanOrEqual(8192);
    expect(kept.split(',').length).toBe(20);
  });
});
