/**
 * A `tools/call` in either of the two layouts clients write, read without parsing the parts every
 * such request has in common (#18, docs/design.md "Twentieth round"):
 *
 *   {"method":"tools/call","params":{"name":"<name>","arguments":<args>[,<envelope>]},"jsonrpc":"2.0","id":<digits>}
 *   {"jsonrpc":"2.0","id":<digits>,"method":"tools/call","params":{"name":"<name>","arguments":<args>[,<envelope>]}}
 *
 * (the SDK clients' order, and the spec's examples'). Only `<args>` goes through `JSON.parse`. The
 * envelope, where there is one, is text the caller has already compared with a known envelope, and
 * its parsed value is the caller's. Exact by construction: the fixed parts are compared character
 * for character, the name is taken only when it has no escape or control character (so its text
 * is its value), the id only as a safe integer's digits, and `<args>` only when it parses as one
 * whole JSON value. A text made of those pieces is valid JSON whose `JSON.parse` is exactly the
 * object built here, keys in the same order. Anything else gives `undefined`, and the caller
 * parses the body in full.
 */

const HEAD = '{"method":"tools/call","params":{"name":"';
const ARGS = '","arguments":';
const TAIL = '},"jsonrpc":"2.0","id":';
const ID_HEAD = '{"jsonrpc":"2.0","id":';
const ID_MID = ',"method":"tools/call","params":{"name":"';
/** At most this many digits in an id read here: below 2^53, so the digits are the number's. */
const MAX_ID_DIGITS = 15;
/**
 * After `<args>` failed to parse (another member follows `arguments`: a `task`, a legacy
 * `_meta`), this many calls are not tried: a thrown SyntaxError costs microseconds, and a client
 * that sends one such body sends many.
 */
const COOL_DOWN = 64;
let coolDown = 0;

/**
 * The id whose digits stand from `from` to `to`, when they are a non-negative integer as JSON
 * writes it (no sign, no leading zero, no fraction or exponent) of at most MAX_ID_DIGITS digits;
 * -1 otherwise. Read digit by digit: `Number` on a string goes through the runtime, and with the
 * test a pattern would need, that cost about 400 instructions a call (#18).
 */
function idAt(text: string, from: number, to: number): number {
  const digits = to - from;
  if (digits < 1 || digits > MAX_ID_DIGITS || (digits > 1 && text.charCodeAt(from) === 0x30)) return -1;
  let id = 0;
  for (let i = from; i < to; i++) {
    const d = text.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return -1;
    id = id * 10 + d;
  }
  return id;
}

/**
 * Where the name that starts at `from` ends (its closing quote), or -1 when it holds a backslash
 * or a control character before that quote (an escape, or text JSON forbids: its text would not
 * be its value) or has no closing quote.
 */
function nameEnd(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) return i;
    if (c === 0x5c || c < 0x20) return -1;
  }
  return -1;
}

/**
 * The call whose name starts at `nameStart` and whose arguments end at `argsEnd`, with the id's
 * digits from `idFrom` to `idTo`; the fixed parts around them were checked by the caller.
 * `idFirst`: the second layout.
 */
function build(
  text: string,
  nameStart: number,
  argsEnd: number,
  idFrom: number,
  idTo: number,
  meta: Record<string, unknown> | undefined,
  idFirst: boolean,
): Record<string, unknown> | undefined {
  const id = idAt(text, idFrom, idTo);
  if (id === -1) return undefined;
  const quote = nameEnd(text, nameStart);
  const from = quote + ARGS.length;
  if (quote === -1 || from >= argsEnd || !text.startsWith(ARGS, quote)) return undefined;
  const name = text.slice(nameStart, quote);
  if (coolDown > 0) {
    coolDown--;
    return undefined;
  }
  let args: unknown;
  try {
    args = JSON.parse(text.slice(from, argsEnd));
  } catch {
    coolDown = COOL_DOWN;
    return undefined;
  }
  const params = meta === undefined ? { name, arguments: args } : { name, arguments: args, _meta: meta };
  return idFirst
    ? { jsonrpc: '2.0', id, method: 'tools/call', params }
    : { method: 'tools/call', params, jsonrpc: '2.0', id };
}

/**
 * The call in `text`, with `params` closing at `paramsEnd` (the `}` after the arguments or the
 * envelope; found when undefined) and its arguments ending at `argsEnd` (at `params`' close when
 * undefined); undefined when the text is in neither layout.
 */
function readAt(
  text: string,
  argsEnd: number | undefined,
  paramsEnd: number | undefined,
  meta: Record<string, unknown> | undefined,
): Record<string, unknown> | undefined {
  const last = text.length - 1;
  if (text.charCodeAt(last) !== 0x7d) return undefined;
  if (text.startsWith(HEAD)) {
    const tailAt = paramsEnd ?? text.lastIndexOf(TAIL);
    if (tailAt === -1 || !text.startsWith(TAIL, tailAt)) return undefined;
    return build(text, HEAD.length, argsEnd ?? tailAt, tailAt + TAIL.length, last, meta, false);
  }
  if (text.startsWith(ID_HEAD)) {
    const comma = text.indexOf(',', ID_HEAD.length);
    const closeAt = last - 1;
    if (comma === -1 || !text.startsWith(ID_MID, comma) || text.charCodeAt(closeAt) !== 0x7d)
      return undefined;
    if (paramsEnd !== undefined && paramsEnd !== closeAt) return undefined;
    return build(text, comma + ID_MID.length, argsEnd ?? closeAt, ID_HEAD.length, comma, meta, true);
  }
  return undefined;
}

/** A `tools/call` without `_meta`, as a 2025-11-25 client sends it; undefined otherwise. */
export function readPlainCall(text: string): Record<string, unknown> | undefined {
  return readAt(text, undefined, undefined, undefined);
}

/**
 * A `tools/call` whose known envelope text (`"_meta":{…}`) stands from `at` to `end`, last in
 * `params`, as a 2026-07-28 client sends it; `meta` is that envelope parsed. Undefined otherwise.
 */
export function readEnvelopedCall(
  text: string,
  at: number,
  end: number,
  meta: Record<string, unknown>,
): Record<string, unknown> | undefined {
  return text.charCodeAt(at - 1) === 0x2c ? readAt(text, at - 1, end, meta) : undefined;
}
