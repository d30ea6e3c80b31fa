import { describe, expect, it } from 'vitest';
import { BatchAnswers } from '../../src/server/mcp/batch.js';

const bytes = (s: string) => new TextEncoder().encode(s).length;

describe('BatchAnswers', () => {
  it('49.2: answers that fit are kept; one that does not is refused in its reserved room', () => {
    const a = new BatchAnswers(40);
    const error = '"err"';
    for (let i = 0; i < 3; i++) expect(a.reserve(bytes(error))).toBe(true);
    expect(a.offer(0, '"a-twenty-byte-answer"')).toBe(true);
    // 2 brackets + 22 + 2 commas + two reserved errors of 5: 36 of 40; 10 more bytes do not fit.
    expect(a.offer(1, '"ten-byte"')).toBe(false);
    a.refuse(1, error);
    expect(a.offer(2, '"é"')).toBe(true);
    const body = a.body();
    expect(JSON.parse(body)).toEqual(['a-twenty-byte-answer', 'err', 'é']);
    expect(bytes(body)).toBeLessThanOrEqual(40);
  });

  it('49.2: a slot is reserved only while the errors still fit', () => {
    const a = new BatchAnswers(12);
    expect(a.reserve(4)).toBe(true);
    expect(a.reserve(4)).toBe(true);
    expect(a.reserve(4)).toBe(false);
    expect(a.size).toBe(2);
  });

  it('counts UTF-8 bytes, not characters', () => {
    const a = new BatchAnswers(10);
    expect(a.reserve(1)).toBe(true);
    expect(a.offer(0, '"éééé"')).toBe(false);
    expect(a.offer(0, '"ééé"')).toBe(true);
  });
});
