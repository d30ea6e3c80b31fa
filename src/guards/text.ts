/**
 * Upstream text is untrusted and ends up in front of a model, a terminal or a log viewer. These
 * helpers make it inert (no escape sequences, no invisible or reordering characters) and bounded
 * (clipped at a UTF-8 boundary with a marker a reader can see). SECURITY C6, E4.
 */

// Patterns are built from `\u` escapes in strings: literal control characters in source are
// invisible in review and flagged by the linter, which is exactly the problem this file fights.
const ESC = '\\u001b';
/** CSI: ESC [ (or 8-bit CSI), parameter bytes, intermediate bytes, one final byte (ECMA-48 5.4). */
const CSI = `(?:${ESC}\\[|\\u009b)[\\u0030-\\u003f]*[\\u0020-\\u002f]*[\\u0040-\\u007e]`;
/**
 * Control strings: OSC (ESC ]), DCS (ESC P), SOS (ESC X), PM (ESC ^), APC (ESC _), ended by BEL
 * or ST (ESC \ or 8-bit ST). OSC 8 hyperlinks and window-title writes hide in here. The body
 * excludes ESC and BEL, so the scan stops at the first candidate terminator and stays linear. An
 * unterminated string loses only its introducer (next rule), so its body stays visible and inert.
 */
const STRING = `${ESC}[\\]PX^_][^\\u0007\\u001b\\u009c]*(?:\\u0007|${ESC}\\\\|\\u009c)`;
/** Other escapes: ESC, intermediates, one final byte (charset switches, resets, keypad modes). */
const OTHER_ESC = `${ESC}[\\u0020-\\u002f]*[\\u0030-\\u007e]`;
// A lone ESC (at the end, or before a non-ASCII character) falls to CONTROL below.
/** C0 except \t (09) and \n (0a); DEL; C1. CR goes too: `safe\rEVIL` overprints on a terminal. */
const CONTROL = '[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f]';
/**
 * Bidirectional embeddings, overrides, isolates and marks (Trojan Source, CVE-2021-42574), then
 * zero-width characters that hide text from a human reviewer but not from a model. Also
 * U+2061-U+2064 (invisible math operators) and Unicode tag characters (U+E0000-U+E007F, written
 * as surrogate pairs): both are invisible, and tags are a known way to smuggle ASCII instructions
 * to a model. This drops tag-based flag emoji modifiers, a price worth paying. Variation selectors
 * (U+FE00-U+FE0F, and U+E0100-U+E01EF as surrogate pairs) go too: a run of them after one visible
 * character encodes a whole hidden instruction, byte by byte (#13.9); emoji keep their glyphs,
 * only the text-or-emoji presentation choice is lost.
 */
const INVISIBLE =
  '[\\u202a-\\u202e\\u2066-\\u2069\\u200e\\u200f\\u061c\\u200b-\\u200d\\u2060-\\u2064\\ufeff\\ufe00-\\ufe0f]|\\udb40[\\udc00-\\udc7f\\udd00-\\uddef]';

const UNSAFE = new RegExp(`${CSI}|${STRING}|${OTHER_ESC}|${CONTROL}|${INVISIBLE}`, 'g');

/**
 * Removes terminal escape sequences, control characters other than `\n` and `\t`, bidirectional
 * controls and zero-width characters. Everything else, including all visible text, is kept.
 * Whole sequences go, not just their ESC, so `ESC[31m` leaves no `[31m` behind.
 *
 * @example
 * stripUnsafe('\u001b[31mred\u001b[0m'); // 'red'
 * stripUnsafe('admin\u202e\u2066txt.exe'); // 'admintxt.exe'
 * stripUnsafe('a\tb\nc\r\n'); // 'a\tb\nc\n'
 */
export function stripUnsafe(text: string): string {
  // `replace` with a global regex resets lastIndex itself, so the shared instance is safe.
  return text.replace(UNSAFE, '');
}

/** True when `stripUnsafe` would change the text. */
export function hasUnsafe(text: string): boolean {
  UNSAFE.lastIndex = 0;
  const found = UNSAFE.test(text);
  UNSAFE.lastIndex = 0;
  return found;
}

/** What `stripStrings` returns for a value nested deeper than its `maxDepth`. */
export const TOO_DEEP: unique symbol = Symbol('too deep');

/**
 * Copy-on-write walk that strips every string in a JSON value, keys included (a client shows
 * them all and a model reads them all); TOO_DEEP past `maxDepth` JSON levels. An untouched value
 * comes back as the same object.
 */
export function stripStrings(node: unknown, maxDepth = Number.POSITIVE_INFINITY, depth = 1): unknown {
  if (typeof node === 'string') return stripUnsafe(node);
  if (node === null || typeof node !== 'object') return node;
  if (depth > maxDepth) return TOO_DEEP;
  if (Array.isArray(node)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < node.length; i++) {
      const next = stripStrings(node[i], maxDepth, depth + 1);
      if (next === TOO_DEEP) return TOO_DEEP;
      if (next !== node[i]) {
        copy ??= node.slice();
        copy[i] = next;
      }
    }
    return copy ?? node;
  }
  let copy: Record<string, unknown> | undefined;
  for (const [key, value] of Object.entries(node)) {
    const next = stripStrings(value, maxDepth, depth + 1);
    if (next === TOO_DEEP) return TOO_DEEP;
    const safeKey = stripUnsafe(key);
    if (next !== value || safeKey !== key) {
      copy ??= { ...node };
      if (safeKey !== key) delete copy[key];
      // defineProperty, not assignment: JSON.parse makes `__proto__` an own key, and assigning
      // to it would swap the copy's prototype instead of setting a property.
      Object.defineProperty(copy, safeKey, {
        value: next,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return copy ?? node;
}

const encoder = new TextEncoder();
/** Any UTF-16 unit above 0x7f, surrogates included. */
const NON_ASCII = /[\u0080-\uffff]/;

/** UTF-8 length, as a client's JSON parser will count it. Lone surrogates count as U+FFFD. */
export function utf8Bytes(text: string): number {
  // Pure ASCII (the common case) needs no allocation.
  return NON_ASCII.test(text) ? encoder.encode(text).length : text.length;
}

/**
 * The longest prefix of `text` whose UTF-8 encoding fits in `maxBytes`. `encodeInto` only ever
 * writes whole scalar values, so the cut never splits a code point or a surrogate pair.
 */
export function utf8Prefix(text: string, maxBytes: number): { text: string; bytes: number } {
  if (maxBytes <= 0) return { text: '', bytes: 0 };
  // A prefix of n code units never needs more than 3n bytes, so this is all encodeInto can use.
  const room = new Uint8Array(Math.min(maxBytes, text.length * 3));
  const { read, written } = encoder.encodeInto(text, room);
  return { text: text.slice(0, read), bytes: written };
}

function clipMarker(kept: number, total: number): string {
  return `[… clipped: ${kept} of ${total} bytes]`;
}

/**
 * Clips `text` to at most `maxBytes` UTF-8 bytes, marker included, cutting at a code point
 * boundary and appending `[… clipped: <kept> of <total> bytes]` so a reader can tell the text is
 * incomplete. `bytes` is the size of the input. When `maxBytes` is too small for the marker,
 * the bound wins: the text is hard-clipped with no marker and `clipped` still says so.
 *
 * @example
 * clipText('short', 100); // { text: 'short', clipped: false, bytes: 5 }
 * clipText('x'.repeat(10_000), 4096).text.endsWith('[… clipped: 4061 of 10000 bytes]'); // true
 */
export function clipText(text: string, maxBytes: number): { text: string; clipped: boolean; bytes: number } {
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) {
    throw new RangeError(`clipText: maxBytes must be a non-negative integer, got ${String(maxBytes)}`);
  }
  const bytes = utf8Bytes(text);
  if (bytes <= maxBytes) return { text, clipped: false, bytes };
  // The kept count is at most maxBytes, so a marker spelled with maxBytes is the widest it gets.
  const room = maxBytes - utf8Bytes(` ${clipMarker(maxBytes, bytes)}`);
  if (room < 0) return { text: utf8Prefix(text, maxBytes).text, clipped: true, bytes };
  const kept = utf8Prefix(text, room);
  return { text: `${kept.text} ${clipMarker(kept.bytes, bytes)}`, clipped: true, bytes };
}
