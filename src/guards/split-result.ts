import { RawJsonString, SPLIT_TEXT_CHARS } from './raw-text.js';
import type { ResultFraming } from './result-cap.js';
import { byteLength } from './result-cap.js';

export { SPLIT_TEXT_CHARS };

/** Characters escaped per step when a split text is measured or sent. */
const STEP = 256 * 1024;
/**
 * What JSON.stringify may change in a string: quote, backslash, C0 controls, surrogates (a lone
 * one is escaped; a pair is not, but telling them apart costs a second scan). Built from `\u`
 * escapes in a string, as in text.ts: no literal control characters in source.
 */
// biome-ignore lint/complexity/useRegexLiterals: the literal would hold control characters.
const ESCAPED = new RegExp('["\\\\\\u0000-\\u001f\\ud800-\\udfff]');
const MARK = '\u0000manifold-split\u0000';

/**
 * A JSON message held as a head, one big string's JSON text and a tail, in that order: the text
 * goes out between them a step at a time (`steps`), so the whole message is never built as one
 * string and never flattened when cut for the socket (#18: those were two of the six 20 MB
 * generations of a big answer). Its text is exactly `JSON.stringify` of the whole message.
 */
export class SplitMessage {
  constructor(
    readonly head: string,
    /**
     * The string's JSON text without its quotes: the raw string itself when JSON leaves it as it
     * is, or else its escaped steps (escaped once, when measured, and sent as they are).
     */
    readonly middle: readonly string[],
    readonly tail: string,
    /** Characters of the whole message. */
    readonly length: number,
  ) {}

  /** The message in steps of about 256 Ki characters (an escaped one may be longer). */
  *steps(): Generator<string> {
    yield this.head;
    for (const part of this.middle) {
      for (let at = 0; at < part.length; ) {
        const end = stepEnd(part, at);
        yield at === 0 && end === part.length ? part : part.slice(at, end);
        at = end;
      }
    }
    yield this.tail;
  }

  /** The whole message as one string (for a stream event or a runtime that wants it so). */
  toString(): string {
    return `${this.head}${this.middle.join('')}${this.tail}`;
  }
}

/** A message body: whole, or split around one big text (#18). */
export type MessageBody = string | SplitMessage;

/**
 * `result` framed and serialized around its one big text block (the first of at least
 * SPLIT_TEXT_CHARS characters in `content`), with the result's own size (`chars`, and `bytes` on
 * demand) measured as the cap measures it; undefined when it has no such block.
 */
export function splitResult(
  result: Record<string, unknown>,
  framing: ResultFraming,
): { message: SplitMessage; chars: number; bytes: () => number } | undefined {
  const block = splitBlock(result);
  if (!block) return undefined;
  const text = block.text;
  // The replacer sees every value before it is serialized: this block becomes a copy with the
  // mark for its text (a RawJsonString is never unescaped for it). A mark already in the result
  // would not serialize as expected: not split then.
  const skeleton = JSON.stringify(framing.wrap(result), (_key, value) =>
    value === block ? { ...block, text: MARK } : value,
  );
  const markJson = JSON.stringify(MARK).slice(1, -1);
  const at = skeleton.indexOf(markJson);
  if (at === -1 || skeleton.indexOf(markJson, at + 1) !== -1) return undefined;
  const head = skeleton.slice(0, at);
  const tail = skeleton.slice(at + markJson.length);
  let middle: string[];
  let textChars: number;
  if (text instanceof RawJsonString) {
    // The upstream's own JSON text of it, checked when it was read: sent as it came.
    middle = [text.json];
    textChars = text.json.length;
  } else if (ESCAPED.test(text)) {
    // Escaped a step at a time (a step never ends inside a surrogate pair, so the steps' JSON
    // joined is the whole string's): the escaped text is never one string, and is escaped once.
    middle = [];
    textChars = 0;
    for (let s = 0; s < text.length; ) {
      const end = stepEnd(text, s);
      const step = JSON.stringify(text.slice(s, end)).slice(1, -1);
      middle.push(step);
      textChars += step.length;
      s = end;
    }
  } else {
    middle = [text];
    textChars = text.length;
  }
  const length = head.length + textChars + tail.length;
  const message = new SplitMessage(head, middle, tail, length);
  return {
    message,
    chars: length - framing.chars,
    bytes: () =>
      middle.reduce((n, part) => n + byteLength(part), byteLength(head) + byteLength(tail)) - framing.bytes,
  };
}

/**
 * The text block `splitResult` splits around: the first in `content` whose text is an upstream's
 * raw JSON text or at least SPLIT_TEXT_CHARS characters; undefined for most results.
 */
export function splitBlock(result: Record<string, unknown>): { text: string | RawJsonString } | undefined {
  const content = result.content;
  if (!Array.isArray(content)) return undefined;
  return content.find((b) => {
    if (typeof b !== 'object' || b === null || (b as { type?: unknown }).type !== 'text') return false;
    const t = (b as { text?: unknown }).text;
    return t instanceof RawJsonString || (typeof t === 'string' && t.length >= SPLIT_TEXT_CHARS);
  }) as { text: string | RawJsonString } | undefined;
}

/** The end of the step from `at`: never between the halves of a surrogate pair. */
function stepEnd(text: string, at: number): number {
  let end = Math.min(at + STEP, text.length);
  const last = text.charCodeAt(end - 1);
  if (end < text.length && last >= 0xd800 && last <= 0xdbff) end++;
  return end;
}
