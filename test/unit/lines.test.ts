import { describe, expect, it } from 'vitest';
import { BoundedLines, overLongId } from '../../deploy/node/runtime/lines.js';

function reader(max: number) {
  const lines: string[] = [];
  const over: { head: string; tail: string; chars: number }[] = [];
  const r = new BoundedLines(max, {
    line: (l) => lines.push(l),
    overLong: (head, tail, chars) => over.push({ head, tail, chars }),
  });
  return { r, lines, over };
}

describe('BoundedLines: newline-delimited messages from a pipe', () => {
  it('passes on each line once, however the chunks cut it, trimmed and without blank ones', () => {
    const { r, lines, over } = reader(100);
    for (const chunk of ['{"a":', '1}\n\n  {"b":2}\r\n{"c"', ':3}\n', '\n']) r.push(chunk);
    expect(lines).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
    expect(over).toEqual([]);
  });

  it('takes a line of exactly the bound, and refuses one longer whole or in pieces, then goes on', () => {
    const { r, lines, over } = reader(10);
    r.push(`${'a'.repeat(10)}\n`);
    r.push(`${'b'.repeat(11)}\nnext\n`);
    r.push('c'.repeat(6));
    r.push('c'.repeat(6));
    r.push('c'.repeat(600));
    r.push('d\nafter\n');
    expect(lines).toEqual(['a'.repeat(10), 'next', 'after']);
    expect(over).toEqual([
      { head: 'b'.repeat(11), tail: '', chars: 11 },
      // The head is what was held when the bound was passed; the tail, the last 512 characters.
      { head: 'c'.repeat(12), tail: `${'c'.repeat(511)}d`, chars: 613 },
    ]);
  });

  it('at the end, a last line without its newline is a line, and an over-long one is reported', () => {
    const a = reader(100);
    a.r.push('{"last":true}');
    expect(a.lines).toEqual([]);
    a.r.end();
    expect(a.lines).toEqual(['{"last":true}']);

    const b = reader(5);
    b.r.push('x'.repeat(9));
    b.r.end();
    expect(b.lines).toEqual([]);
    expect(b.over).toEqual([{ head: 'x'.repeat(9), tail: '', chars: 9 }]);
  });
});

describe('overLongId: which message an over-long line was, from its two ends', () => {
  const pad = 'x'.repeat(2000);
  const ends = (message: string) => ({ head: message.slice(0, 512), tail: message.slice(-512) });
  const of = (message: string, kind: 'request' | 'response') => {
    const { head, tail } = ends(message);
    return overLongId(head, tail, kind);
  };

  it('finds a request id written first or last, and a response id likewise', () => {
    expect(of(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"p":"${pad}"}}`, 'request')).toBe(7);
    expect(of(`{"method":"tools/call","params":{"p":"${pad}"},"jsonrpc":"2.0","id":"r-1"}`, 'request')).toBe(
      'r-1',
    );
    expect(of(`{"jsonrpc":"2.0","id":3,"result":{"p":"${pad}"}}`, 'response')).toBe(3);
    expect(of(`{"result":{"p":"${pad}"},"jsonrpc":"2.0","id":-4}`, 'response')).toBe(-4);
  });

  it('gives undefined for the other kind, a nested id, or no id at all', () => {
    expect(of(`{"jsonrpc":"2.0","id":7,"method":"x","params":{"p":"${pad}"}}`, 'response')).toBeUndefined();
    expect(of(`{"jsonrpc":"2.0","id":3,"result":{"p":"${pad}"}}`, 'request')).toBeUndefined();
    expect(of(`{"method":"x","params":{"p":"${pad}","id":9}}`, 'request')).toBeUndefined();
    expect(
      of(`{"jsonrpc":"2.0","method":"notifications/x","params":{"p":"${pad}"}}`, 'request'),
    ).toBeUndefined();
  });
});
