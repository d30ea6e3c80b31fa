import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clipText, hasUnsafe, stripUnsafe, utf8Bytes, utf8Prefix } from '../../src/guards/text.js';

const ESC = '\u001b';
const bytes = (s: string) => new TextEncoder().encode(s).length;

describe('stripUnsafe', () => {
  it('C6: removes ANSI CSI sequences whole, parameters and final byte included', () => {
    expect(stripUnsafe(`${ESC}[31mred${ESC}[0m`)).toBe('red');
    expect(stripUnsafe(`${ESC}[1;38;5;196mbold${ESC}[m`)).toBe('bold');
    expect(stripUnsafe(`a${ESC}[2Jb${ESC}[?25lc`)).toBe('abc');
    expect(stripUnsafe(`8-bit \u009b31mcsi`)).toBe('8-bit csi');
  });

  it('C6: removes OSC strings ended by BEL or ST, such as hyperlinks and title writes', () => {
    expect(stripUnsafe(`${ESC}]0;pwned\u0007title`)).toBe('title');
    expect(stripUnsafe(`${ESC}]8;;https://evil.example${ESC}\\click${ESC}]8;;${ESC}\\`)).toBe('click');
    expect(stripUnsafe(`${ESC}P1$r${ESC}\\dcs`)).toBe('dcs');
  });

  it('C6: two-character escapes and a lone ESC go; an unterminated string leaves its body inert', () => {
    expect(stripUnsafe(`${ESC}cfull reset`)).toBe('full reset');
    expect(stripUnsafe(`${ESC}(Bcharset`)).toBe('charset');
    expect(stripUnsafe(`x${ESC}`)).toBe('x');
    expect(stripUnsafe(`${ESC}é`)).toBe('é');
    expect(stripUnsafe(`${ESC}]0;never ends`)).toBe('0;never ends');
  });

  it('#13.9: removes variation selectors, so a run of them cannot carry a hidden instruction', () => {
    // Each byte of "rm -rf" as a variation selector after one visible character (the known trick).
    const hidden = [...'rm -rf'].map((c) => {
      const b = c.charCodeAt(0);
      return b < 16 ? String.fromCodePoint(0xfe00 + b) : String.fromCodePoint(0xe0100 + b - 16);
    });
    expect(stripUnsafe(`ok${hidden.join('')}.`)).toBe('ok.');
    expect(stripUnsafe('a\ufe00b\ufe0fc')).toBe('abc');
    expect(stripUnsafe(`x${String.fromCodePoint(0xe0100)}${String.fromCodePoint(0xe01ef)}y`)).toBe('xy');
    // Neighbours stay: U+E01F0 is outside the block.
    expect(stripUnsafe(`x${String.fromCodePoint(0xe01f0)}`)).toBe(`x${String.fromCodePoint(0xe01f0)}`);
  });

  it('C6: removes C0 and C1 controls except newline and tab', () => {
    expect(stripUnsafe('a\tb\nc\r\n')).toBe('a\tb\nc\n');
    expect(stripUnsafe('safe\rEVIL')).toBe('safeEVIL');
    expect(stripUnsafe('n\u0000u\u0008l\u000bl\u000c\u007f\u0085\u009f')).toBe('null');
  });

  it('C6: removes bidirectional overrides, isolates and marks', () => {
    for (const c of [
      '\u202a',
      '\u202b',
      '\u202c',
      '\u202d',
      '\u202e',
      '\u2066',
      '\u2067',
      '\u2068',
      '\u2069',
    ]) {
      expect(stripUnsafe(`a${c}b`)).toBe('ab');
    }
    expect(stripUnsafe('\u200eleft\u200fright\u061c')).toBe('leftright');
    expect(stripUnsafe('admin\u202e\u2066txt.exe')).toBe('admintxt.exe');
  });

  it('C6: removes zero-width characters and Unicode tag characters', () => {
    expect(stripUnsafe('zero\u200bwidth\u200c\u200d\u2060\ufeff')).toBe('zerowidth');
    // "hi" spelled in tag characters: invisible to a reviewer, readable by a model.
    expect(stripUnsafe('ok\u{e0068}\u{e0069}')).toBe('ok');
  });

  it('keeps ordinary text of every script, emoji included', () => {
    const text = 'Grüße, 世界! Привет 👋🏽 مرحبا — "quotes" \\ back\\slash\n\ttabbed';
    expect(stripUnsafe(text)).toBe(text);
    expect(hasUnsafe(text)).toBe(false);
    expect(hasUnsafe(`x${ESC}[0m`)).toBe(true);
  });

  it('C6: the output never contains anything it removes, whatever the input', () => {
    const controls = '\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f';
    const unsafe = new RegExp(
      `[${controls}\\u202a-\\u202e\\u2066-\\u2069\\u200b-\\u200f\\u061c\\u2060\\ufeff]`,
    );
    const pieces = fc.constantFrom(
      ESC,
      '[',
      ']',
      '31m',
      '\u0007',
      '\\',
      '\u202e',
      '\u200b',
      'a',
      '\n',
      '\u009b',
      'é',
    );
    fc.assert(
      fc.property(fc.array(fc.oneof(pieces, fc.string({ unit: 'binary' })), { maxLength: 30 }), (parts) => {
        const out = stripUnsafe(parts.join(''));
        expect(unsafe.test(out)).toBe(false);
        expect(stripUnsafe(out)).toBe(out);
        expect(hasUnsafe(out)).toBe(false);
      }),
    );
  });
});

describe('utf8Bytes / utf8Prefix', () => {
  it('counts as a UTF-8 encoder does', () => {
    for (const s of ['', 'ascii', 'é', '世界', '😀', 'a😀b', '\ud800']) expect(utf8Bytes(s)).toBe(bytes(s));
  });

  it('never splits a code point or a surrogate pair', () => {
    expect(utf8Prefix('a😀', 4)).toEqual({ text: 'a', bytes: 1 });
    expect(utf8Prefix('a😀', 5)).toEqual({ text: 'a😀', bytes: 5 });
    expect(utf8Prefix('世界', 5)).toEqual({ text: '世', bytes: 3 });
    expect(utf8Prefix('abc', 0)).toEqual({ text: '', bytes: 0 });
  });
});

describe('clipText', () => {
  it('leaves text within the limit alone', () => {
    expect(clipText('short', 100)).toEqual({ text: 'short', clipped: false, bytes: 5 });
    expect(clipText('12345', 5)).toEqual({ text: '12345', clipped: false, bytes: 5 });
  });

  it('E4: clips with a visible marker, the marker included in the limit', () => {
    const r = clipText('x'.repeat(10_000), 4096);
    expect(r.clipped).toBe(true);
    expect(r.bytes).toBe(10_000);
    expect(bytes(r.text)).toBeLessThanOrEqual(4096);
    expect(r.text).toMatch(/ \[… clipped: \d+ of 10000 bytes\]$/);
    const kept = Number(/clipped: (\d+)/.exec(r.text)![1]);
    expect(r.text.startsWith('x'.repeat(kept))).toBe(true);
    expect(r.text.length - kept).toBeLessThan(40);
    expect(r.text.endsWith('[… clipped: 4061 of 10000 bytes]')).toBe(true); // the JSDoc example
  });

  it('E4: never splits an emoji or a CJK character', () => {
    for (let max = 40; max < 80; max++) {
      for (const unit of ['😀', '世', 'é', '👨‍👩‍👧']) {
        const r = clipText(unit.repeat(100), max);
        expect(bytes(r.text)).toBeLessThanOrEqual(max);
        expect(r.text).not.toContain('\ufffd');
        expect(r.text).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
      }
    }
  });

  it('E4: stays within the limit even when the marker does not fit', () => {
    const r = clipText('abcdefghij'.repeat(10), 8);
    expect(r).toEqual({ text: 'abcdefgh', clipped: true, bytes: 100 });
    expect(clipText('😀😀', 3)).toEqual({ text: '', clipped: true, bytes: 8 });
  });

  it('rejects a limit that is not a non-negative integer', () => {
    expect(() => clipText('x', -1)).toThrow(RangeError);
    expect(() => clipText('x', 1.5)).toThrow(/non-negative integer/);
    expect(() => clipText('x', Number.NaN)).toThrow(RangeError);
  });

  it('E4: always within the limit, and unclipped text is returned unchanged (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), fc.nat(400), (s, max) => {
        const r = clipText(s, max);
        expect(r.bytes).toBe(bytes(s));
        expect(r.clipped).toBe(r.bytes > max);
        expect(bytes(r.text)).toBeLessThanOrEqual(max);
        if (!r.clipped) expect(r.text).toBe(s);
      }),
    );
  });
});
