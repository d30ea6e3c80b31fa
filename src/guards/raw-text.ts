/** A text block at least this long (in characters) is kept out of the serialized message (#18). */
export const SPLIT_TEXT_CHARS = 1 << 20;

/**
 * A big text of an upstream's tools/call answer, kept as the JSON it arrived in (#18).
 *
 * A JSON string literal means the same wherever it stands, so the gateway can send the
 * upstream's own escaped text on to its client as it is: the text is never unescaped into a
 * second string, and never escaped again into a third. `json` is a slice of the answer's text,
 * which V8 keeps as a view of it, not a copy. Anything that serializes the result the ordinary
 * way still gets the right text (`toJSON`), and whatever must read or cut the text calls
 * `materialize` first.
 */
export class RawJsonString {
  constructor(
    /** The literal's JSON text between its quotes: valid JSON string content, checked. */
    readonly json: string,
  ) {}

  /** The text itself (the one place it is ever unescaped). */
  toJSON(): string {
    return JSON.parse(`"${this.json}"`) as string;
  }

  toString(): string {
    return this.toJSON();
  }
}

/**
 * What JSON forbids between a string's quotes: a raw control character, or an escape other than
 * `\" \\ \/ \b \f \n \r \t \uXXXX`. An escape starts at a backslash that follows an even run
 * of them (the run's pairs are escaped backslashes). Built from `\u` escapes: no control
 * characters in source.
 */
// biome-ignore lint/complexity/useRegexLiterals: the literal would hold control characters.
const CONTROL = new RegExp('[\\u0000-\\u001f]');
const BAD_ESCAPE = /(?<!\\)(?:\\\\)*\\(?:[^"\\/bfnrtu]|u(?![0-9a-fA-F]{4}))/;
/** The placeholder's prefix inside the skeleton; a random part per answer makes it unforgeable. */
const MARK = '\\u0000manifold-raw:';
/** More literals than this before the first big one: a body of many small strings, parsed as usual. */
const MAX_LITERALS = 4096;

/**
 * An upstream's JSON answer, parsed. For a tools/call answer of at least SPLIT_TEXT_CHARS
 * characters, each text block of `result.content` whose text is that long comes back as a
 * `RawJsonString` (and only there: any other place, or any doubt, and the answer is parsed
 * whole, as `JSON.parse` would). Invalid JSON throws `JSON.parse`'s own SyntaxError.
 */
export function parseAnswer(text: string, toolsCall: boolean): unknown {
  if (!toolsCall || text.length < SPLIT_TEXT_CHARS) return JSON.parse(text);
  const spans = bigTextLiterals(text);
  if (!spans || spans.length === 0) return JSON.parse(text);
  // An upstream cannot write a literal that parses to a mark it cannot predict.
  const nonce = crypto.randomUUID();
  let skeleton = '';
  let from = 0;
  for (let k = 0; k < spans.length; k++) {
    const [start, end] = spans[k]!;
    skeleton += `${text.slice(from, start)}${MARK}${nonce}:${k}`;
    from = end;
  }
  skeleton += text.slice(from);
  let message: unknown;
  try {
    message = JSON.parse(skeleton);
  } catch {
    return JSON.parse(text);
  }
  const content = contentOf(message);
  if (!content) return JSON.parse(text);
  let placed = 0;
  const marks = new Map<string, number>();
  for (let k = 0; k < spans.length; k++) marks.set(`\u0000manifold-raw:${nonce}:${k}`, k);
  for (const block of content) {
    if (typeof block !== 'object' || block === null || Array.isArray(block)) continue;
    const b = block as Record<string, unknown>;
    const mark = b.text;
    const k = typeof mark === 'string' ? marks.get(mark) : undefined;
    if (k === undefined || b.type !== 'text') continue;
    const [start, end] = spans[k]!;
    const json = text.slice(start, end);
    if (CONTROL.test(json) || BAD_ESCAPE.test(json)) return JSON.parse(text);
    b.text = new RawJsonString(json);
    marks.delete(mark as string);
    placed++;
  }
  // A literal found anywhere else (a structured field that happens to be named text, a second
  // use of one mark): the ordinary parse decides, as if nothing had been tried.
  return placed === spans.length ? message : JSON.parse(text);
}

/** `message.result.content`, when the message is a response with a content array. */
function contentOf(message: unknown): unknown[] | undefined {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return undefined;
  const result = (message as { result?: unknown }).result;
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return undefined;
  const content = (result as { content?: unknown }).content;
  return Array.isArray(content) ? content : undefined;
}

/**
 * The [start, end) of every string literal's content of at least SPLIT_TEXT_CHARS characters that
 * is the value of a "text" key; undefined when the body is not worth it (too many literals first)
 * or cannot be JSON (an unterminated string). Quotes are found with indexOf, so a long literal
 * costs one step per escaped quote in it, not one per character.
 */
function bigTextLiterals(text: string): [number, number][] | undefined {
  const spans: [number, number][] = [];
  let small = 0;
  for (let at = text.indexOf('"'); at !== -1; ) {
    let end = at + 1;
    for (;;) {
      end = text.indexOf('"', end);
      if (end === -1) return undefined;
      let slashes = 0;
      while (text.charCodeAt(end - 1 - slashes) === 0x5c) slashes++;
      if (slashes % 2 === 0) break;
      end++;
    }
    if (end - at - 1 >= SPLIT_TEXT_CHARS && isTextValue(text, at)) spans.push([at + 1, end]);
    else if (spans.length === 0 && ++small > MAX_LITERALS) return undefined;
    at = text.indexOf('"', end + 1);
  }
  return spans;
}

/** Whether the literal opening at `quote` follows `"text"` and a colon (whitespace allowed). */
function isTextValue(text: string, quote: number): boolean {
  let i = quote - 1;
  while (i >= 0 && isSpace(text.charCodeAt(i))) i--;
  if (text.charCodeAt(i) !== 0x3a) return false;
  i--;
  while (i >= 0 && isSpace(text.charCodeAt(i))) i--;
  return i >= 5 && text.slice(i - 5, i + 1) === '"text"';
}

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/**
 * The result with every RawJsonString text unescaped, for what reads or cuts the text (the cap
 * when it must truncate, the output schema check). A result without one is returned as is.
 */
export function materialize(result: Record<string, unknown>): Record<string, unknown> {
  const content = result.content;
  if (!Array.isArray(content) || !content.some(isRawBlock)) return result;
  return {
    ...result,
    content: content.map((b) => (isRawBlock(b) ? { ...b, text: b.text.toJSON() } : b)),
  };
}

export function isRawBlock(b: unknown): b is { type: 'text'; text: RawJsonString } {
  return typeof b === 'object' && b !== null && (b as { text?: unknown }).text instanceof RawJsonString;
}
