/**
 * A 2026-07-28 request carries its `_meta` envelope (version, capabilities, client identity) on
 * every request, and a client sends the same bytes each time. Parsing those bytes again was most
 * of what a modern call costs more than a legacy one (#18, docs/design.md "Eleventh round").
 *
 * `parse` reads a body whose envelope text it has seen before with that text replaced by a
 * sentinel, and puts the envelope it parsed once (frozen) in the sentinel's place. That is exact
 * by construction: the sentinel is a random number no client knows, so finding it as
 * `params._meta` of the parse proves the replaced text stood there, and a JSON value's text
 * parses the same wherever it stands. (A number, not a string: it parses to a small integer with
 * nothing allocated, about 320 instructions a call fewer than a 16-character string, #18. A client
 * that guessed it would only change how its own request's `_meta` is read, and `_meta` is an
 * object in every valid request.) The text is looked for where the last known envelope stood,
 * counted from the body's end, then at the first `"_meta":`. Anything else (the text found
 * elsewhere, a repeated key, a body that does not parse) is parsed in full, as it would be without
 * the cache.
 */
import { isObject } from '../../lib/json.js';
import { readEnvelopedCall } from './call-reader.js';

const KEY = '"_meta":';
const KEY_TAIL = KEY.slice(1);
/** Envelopes remembered: a few clients at once, each sending its own. */
const SLOTS = 4;
/** A body larger than this is parsed in full: the splice copies it, and the envelope is a small part. */
const MAX_BODY = 64 * 1024;
/** A miss tries to learn its envelope once in this many, so a client whose `_meta` changes on every request (a trace id, a progress token) pays for that rarely. */
const LEARN_EVERY = 16;

interface Slot {
  /** `"_meta":` and the envelope's JSON, as the client sent it. */
  text: string;
  value: Record<string, unknown>;
  /**
   * How many characters followed the envelope in the last body it was found in. A client lays out
   * every request alike (the SDK puts `_meta` last in `params`, then `jsonrpc` and `id`), so the
   * next body's envelope is looked for there first (#18).
   */
  tail: number;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * Where the first `"_meta":` starts, or -1. Searched without its quote: V8 looks for a pattern's
 * first character before comparing the rest, and a JSON body is full of quotes (0.13 µs against
 * 0.03 µs for this bench's body).
 */
function keyAt(body: string): number {
  let i = body.indexOf(KEY_TAIL);
  while (i > 0 && body.charCodeAt(i - 1) !== 0x22) i = body.indexOf(KEY_TAIL, i + 1);
  return i > 0 ? i - 1 : -1;
}

/** Whether `text` stands in `body` at `at`. */
function standsAt(body: string, at: number, text: string): boolean {
  return body.slice(at, at + text.length) === text;
}

export class EnvelopeCache {
  private readonly slots: Slot[] = [];
  /** What replaces a known envelope's text: `"_meta":<random>`. */
  private readonly replacement: string;
  /**
   * The sentinel as the parse gives it back: a nine-digit integer. V8's JSON parser reads up to
   * nine digits straight into a small integer; a tenth sends it through its string-to-double
   * conversion (about 450 instructions a call, #18: a sentinel in [2^29, 2^30) had ten digits in
   * one process of seven).
   */
  private readonly mark: number;
  private misses = 0;
  /** The slot the last known envelope was found in: the next body is tried against it first. */
  private last: Slot | undefined;

  constructor() {
    // In [10^8, 10^9): nine digits, about 29.7 random bits.
    this.mark = 1e8 + (crypto.getRandomValues(new Uint32Array(1))[0]! % 9e8);
    this.replacement = `${KEY}${this.mark}`;
  }

  /** `JSON.parse(body)`, the same value and the same errors; a known envelope is not parsed again. */
  parse(body: string): unknown {
    if (body.length > MAX_BODY) return JSON.parse(body);
    // Where the last known envelope stood, counted from the end: found there, no search (#18).
    const last = this.last;
    if (last !== undefined) {
      const at = body.length - last.tail - last.text.length;
      if (at > 0 && standsAt(body, at, last.text)) {
        // A tools/call in either common layout is read around the envelope, with no splice (#18).
        const call = readEnvelopedCall(body, at, at + last.text.length, last.value);
        return call ?? this.spliced(body, at, last);
      }
    }
    const at = keyAt(body);
    if (at === -1) return JSON.parse(body);
    for (const slot of this.slots) {
      if (standsAt(body, at, slot.text)) return this.spliced(body, at, slot);
    }
    const message = JSON.parse(body);
    if (this.misses++ % LEARN_EVERY === 0) this.learn(body, at, message);
    return message;
  }

  /**
   * `body` parsed with `slot`'s text, which stands at `at`, read as the sentinel. Where it stands
   * does not matter for exactness: the sentinel found as `params._meta` proves the text was that
   * member (its key's quote opened a string, and the value is a whole JSON value).
   */
  private spliced(body: string, at: number, slot: Slot): unknown {
    const end = at + slot.text.length;
    let message: unknown;
    try {
      message = JSON.parse(body.slice(0, at) + this.replacement + body.slice(end));
    } catch {
      return JSON.parse(body);
    }
    const params = isObject(message) ? message.params : undefined;
    if (!isObject(params) || params._meta !== this.mark) return JSON.parse(body);
    params._meta = slot.value;
    slot.tail = body.length - end;
    this.last = slot;
    return message;
  }

  /** Remembers the envelope when the first `"_meta":` of the body is `params._meta`, byte for byte. */
  private learn(body: string, at: number, message: unknown): void {
    const params = isObject(message) ? message.params : undefined;
    const meta = isObject(params) ? params._meta : undefined;
    if (!isObject(meta)) return;
    const text = KEY + JSON.stringify(meta);
    if (!standsAt(body, at, text)) return;
    // A copy of its own, so this request's `_meta` stays as mutable as any other's.
    const value = deepFreeze(JSON.parse(text.slice(KEY.length)) as Record<string, unknown>);
    const slot = { text, value, tail: body.length - at - text.length };
    this.slots.unshift(slot);
    if (this.slots.length > SLOTS) this.slots.pop();
    this.last = slot;
    this.misses = 1;
  }
}
