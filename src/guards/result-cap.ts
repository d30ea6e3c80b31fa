import { isObject } from '../lib/json.js';
import { utf8Bytes, utf8Prefix } from './text.js';

/** The `_meta` key set on every capped result, so a client can tell it got less than was sent. */
export const TRUNCATED_META_KEY = 'manifold/truncated';

/**
 * How far a capped result may exceed the cap: room for the gateway's own markers when the cap is
 * too small to hold even them. From 1024 bytes up the capped result always fits the cap itself.
 */
export const RESULT_CAP_SLACK = 512;

export interface CappedResult {
  /**
   * The serialized result when it passed unchanged, so the caller need not serialize it again
   * (inside its framing, when one was given).
   */
  json?: string;
  /** The input itself when it fits; otherwise a new, smaller object. */
  result: Record<string, unknown>;
  truncated: boolean;
  /** UTF-8 bytes of the input's JSON serialization. */
  originalBytes: number;
}

/**
 * What a result is sent inside (a JSON-RPC response, say): serializing the whole message at once
 * makes one string, where the result's JSON joined into the message later would make a second
 * copy of it (a 20 MiB result). The result's JSON must appear in `wrap(result)`'s exactly once,
 * with `chars` characters and `bytes` UTF-8 bytes of framing around it.
 */
export interface ResultFraming {
  wrap(result: Record<string, unknown>): unknown;
  chars: number;
  bytes: number;
}

const OVER = 'over the result size cap';
/** Upstream `_meta` and unknown top-level fields may take at most this share of the cap. */
const ENVELOPE_SHARE = 4;

/**
 * Builds the cap applied to every tools/call result before it is relayed (SECURITY E1). The size
 * is the UTF-8 length of the result's JSON. A result within the cap is returned as is. A larger
 * one is rebuilt, never mutated:
 *
 * - content blocks are kept in order while they fit; the text block that crosses the cap is cut
 *   at a UTF-8 boundary and ends with `[… truncated: <kept> of <total> bytes]`;
 * - an image, audio or resource blob that does not fit becomes a text placeholder naming its
 *   type, MIME type and size; once nothing more fits, one marker counts the blocks left out;
 * - `structuredContent` is kept whole or dropped with a notice, since half a JSON value is not
 *   JSON. It is kept only if content still gets half of the room (or all it needs): content is
 *   what every client reads;
 * - `_meta["manifold/truncated"]` is set to true; other `_meta` keys stay unless they (with any
 *   unknown top-level fields) take over a quarter of the cap.
 *
 * The capped result serializes to at most `maxBytes + RESULT_CAP_SLACK` bytes, and to at most
 * `maxBytes` when `maxBytes >= 1024`.
 *
 * @example
 * const cap = resultCap(65_536);
 * const { result, truncated, originalBytes } = cap(upstreamResult);
 * // truncated: result.content ends with a marker and result._meta['manifold/truncated'] === true
 *
 * With a `framing`, the cap still applies to the result alone, and `json` (when the result fits)
 * is the whole framed value serialized.
 */
export function resultCap(
  maxBytes: number,
): (result: Record<string, unknown>, framing?: ResultFraming) => CappedResult {
  if (typeof maxBytes !== 'number' || !Number.isSafeInteger(maxBytes) || maxBytes < 1) {
    throw new TypeError(`resultCap: maxBytes must be a positive integer, got ${String(maxBytes)}`);
  }
  return function capResult(result: Record<string, unknown>, framing?: ResultFraming): CappedResult {
    const json = (framing ? JSON.stringify(framing.wrap(result)) : JSON.stringify(result)) ?? '';
    const fitted = new Fitted(result, json, framing);
    if (fitsCap(json.length - (framing?.chars ?? 0), fitted.measure, maxBytes)) return fitted;
    return { result: shrink(result, maxBytes), truncated: true, originalBytes: fitted.originalBytes };
  };
}

/** A result that fits, as it is. Its byte count is measured only when asked for: most need none. */
class Fitted implements CappedResult {
  readonly truncated = false;
  private bytes: number | undefined;

  constructor(
    readonly result: Record<string, unknown>,
    readonly json: string,
    private readonly framing: ResultFraming | undefined,
  ) {}

  get originalBytes(): number {
    this.bytes ??= byteLength(this.json) - (this.framing?.bytes ?? 0);
    return this.bytes;
  }

  /** The byte count, for `fitsCap`. */
  readonly measure = (): number => this.originalBytes;
}

/**
 * Whether a result of `chars` characters of JSON fits `maxBytes`. A JSON string's UTF-8 size is
 * between its length and three times it (JSON.stringify escapes lone surrogates, so every code
 * unit is at most 3 bytes): most results never need `bytes`, which may have to encode them.
 */
export function fitsCap(chars: number, bytes: () => number, maxBytes: number): boolean {
  return chars * 3 <= maxBytes || (chars <= maxBytes && bytes() <= maxBytes);
}

/**
 * `result` answered instead by an `isError` result whose content is one text block: every other
 * field (`_meta`, `resultType`, unknown ones) stays as it was, in order; `content` and
 * `isError` are replaced and `structuredContent` is left out. For an answer a conforming client
 * must not receive as a success (SDK clients throw on a tool with an output schema whose result
 * has no, or non-conforming, structured content; an error result is exempt).
 */
export function errorInstead(result: Record<string, unknown>, text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(result)) {
    if (key === 'content' || key === 'structuredContent' || key === 'isError') continue;
    define(out, key, result[key]);
  }
  define(out, 'content', [textBlock(text)]);
  define(out, 'isError', true);
  return out;
}

type Block = Record<string, unknown>;

function shrink(result: Record<string, unknown>, maxBytes: number): Record<string, unknown> {
  const hasContent = Array.isArray(result.content);
  const blocks: readonly unknown[] = hasContent ? (result.content as unknown[]) : [];
  // Malformed content (not an array) cannot be cut; it counts as one block left out.
  const blockCount = blocks.length + (result.content !== undefined && !hasContent ? 1 : 0);
  const upstreamMeta = isObject(result._meta) ? result._meta : {};
  const notices: string[] = [];
  // Each block's cost in the array: its JSON plus a comma (one byte too many for the first).
  const sizes = blocks.map((b) => jsonBytes(b) + 1);

  let minimal = false;
  let envelope = assemble(result, [], false, minimal, { ...upstreamMeta, [TRUNCATED_META_KEY]: true });
  if (jsonBytes(envelope) > maxBytes / ENVELOPE_SHARE) {
    minimal = true;
    envelope = assemble(result, [], false, minimal, { [TRUNCATED_META_KEY]: true });
    notices.push(`[… _meta and other result fields omitted: ${OVER}]`);
  }
  const meta = envelope._meta as Record<string, unknown>;
  // Room for the "blocks omitted" marker is set aside up front; the count is at most blockCount.
  const omittedReserve = jsonBytes(textBlock(omittedMarker(blockCount))) + 1;
  const noticeBytes = () => notices.reduce((n, t) => n + jsonBytes(textBlock(t)) + 1, 0);
  let room = maxBytes - jsonBytes(envelope) - omittedReserve - noticeBytes();

  let keepStructured = false;
  if (result.structuredContent !== undefined) {
    const withStructured = jsonBytes(assemble(result, [], true, minimal, meta)) - jsonBytes(envelope);
    const contentNeeds = sizes.reduce((n, size) => n + size, 0);
    keepStructured = withStructured <= room - Math.min(contentNeeds, Math.floor(room / 2));
    if (keepStructured) {
      room -= withStructured;
    } else {
      const size = jsonBytes(result.structuredContent);
      const notice = `[… structuredContent omitted: ${size} bytes, ${OVER}]`;
      notices.push(notice);
      room -= jsonBytes(textBlock(notice)) + 1;
    }
  }

  const content: unknown[] = [];
  let i = 0;
  for (; i < blocks.length; i++) {
    const block = blocks[i];
    const whole = sizes[i] ?? 0;
    if (whole <= room) {
      content.push(block);
      room -= whole;
      continue;
    }
    const reduced = reduceBlock(block, room - 1);
    if (reduced === undefined) break;
    content.push(reduced.block);
    room -= reduced.bytes + 1;
  }
  const omitted = blockCount - i;
  if (omitted > 0) content.push(textBlock(omittedMarker(omitted)));
  for (const notice of notices) content.push(textBlock(notice));
  return assemble(result, content, keepStructured, minimal, meta);
}

/**
 * A smaller stand-in for a block that does not fit in `room` bytes, or undefined when even that
 * does not fit (or the block is of a kind that cannot be cut, such as a resource link).
 */
function reduceBlock(block: unknown, room: number): { block: Block; bytes: number } | undefined {
  if (!isObject(block)) return undefined;
  if (block.type === 'text' && typeof block.text === 'string') {
    return cutText(block.text, room, (text) => ({ ...block, text }));
  }
  if ((block.type === 'image' || block.type === 'audio') && typeof block.data === 'string') {
    return fitting(placeholder(block.type, block.mimeType, base64Bytes(block.data)), room);
  }
  if (block.type === 'resource' && isObject(block.resource)) {
    const resource = block.resource;
    if (typeof resource.text === 'string') {
      return cutText(resource.text, room, (text) => ({ ...block, resource: { ...resource, text } }));
    }
    if (typeof resource.blob === 'string') {
      const uri = typeof resource.uri === 'string' ? utf8Prefix(resource.uri, 256).text : '';
      return fitting(placeholder(`resource ${uri}`, resource.mimeType, base64Bytes(resource.blob)), room);
    }
  }
  return undefined;
}

/**
 * Cuts `text` so the rebuilt block serializes within `room`. JSON escaping can only grow a
 * character (quotes, backslashes, controls), never shrink it, so cutting the raw text by the
 * overshoot always lands within room on the next try; the loop bound is a safety net.
 */
function cutText(
  text: string,
  room: number,
  rebuild: (text: string) => Block,
): { block: Block; bytes: number } | undefined {
  const total = byteLength(text);
  const marked = (kept: { text: string; bytes: number }) =>
    rebuild(`${kept.text}${kept.text === '' ? '' : '\n'}[… truncated: ${kept.bytes} of ${total} bytes]`);
  let target = room - (jsonBytes(marked({ text: '', bytes: total })) + 1);
  for (let attempt = 0; attempt < 8; attempt++) {
    const candidate = marked(utf8Prefix(text, Math.max(0, target)));
    const bytes = jsonBytes(candidate);
    if (bytes <= room) return { block: candidate, bytes };
    if (target <= 0) return undefined;
    target -= bytes - room;
  }
  return undefined;
}

function placeholder(kind: string, mimeType: unknown, bytes: number): Block {
  const type = typeof mimeType === 'string' ? ` ${utf8Prefix(mimeType, 100).text}` : '';
  return textBlock(`[${kind}${type}, ${bytes} bytes, omitted: ${OVER}]`);
}

function fitting(block: Block, room: number): { block: Block; bytes: number } | undefined {
  const bytes = jsonBytes(block);
  return bytes <= room ? { block, bytes } : undefined;
}

function omittedMarker(count: number): string {
  return `[… ${count} more content block${count === 1 ? '' : 's'} omitted: ${OVER}]`;
}

function textBlock(text: string): Block {
  return { type: 'text', text };
}

/** Decoded size of base64 data, which is what a reader means by "an image of N bytes". */
function base64Bytes(data: string): number {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}

/**
 * The result rebuilt: other fields in their original order (only `isError` when `minimal`), then
 * `content` and `_meta`. `structuredContent` is carried only when kept.
 */
function assemble(
  result: Record<string, unknown>,
  content: unknown[],
  keepStructured: boolean,
  minimal: boolean,
  meta: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const set = (key: string, value: unknown) => define(out, key, value);
  for (const key of Object.keys(result)) {
    if (key === 'content' || key === '_meta') continue;
    if (key === 'structuredContent') {
      if (keepStructured) set(key, result[key]);
    } else if (!minimal || (key === 'isError' && typeof result[key] === 'boolean')) {
      set(key, result[key]);
    }
  }
  set('content', content);
  set('_meta', meta);
  return out;
}

function define(out: Record<string, unknown>, key: string, value: unknown): void {
  // defineProperty, not assignment: an own `__proto__` key from JSON.parse must stay a key.
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}

function jsonBytes(value: unknown): number {
  // undefined (or a function) inside an array serializes as null.
  return byteLength(JSON.stringify(value) ?? 'null');
}

const encoder = new TextEncoder();
/** Strings up to this many code units are measured by `utf8Bytes` (which may encode them whole). */
const SLICE = 16 * 1024;
const scratch = new Uint8Array(SLICE * 3);

/**
 * `utf8Bytes`, without encoding a long non-ASCII string whole just to count its bytes (a 20 MiB
 * result would take another 20-60 MB for a moment): it is encoded a slice at a time into one
 * small buffer. A slice never ends between the halves of a surrogate pair, so the count is the
 * same (a lone surrogate is 3 bytes, as U+FFFD, either way).
 */
export function byteLength(text: string): number {
  if (text.length <= SLICE) return utf8Bytes(text);
  if (!NON_ASCII.test(text)) return text.length;
  let bytes = 0;
  for (let start = 0; start < text.length; ) {
    let end = Math.min(text.length, start + SLICE);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    bytes += encoder.encodeInto(text.slice(start, end), scratch).written;
    start = end;
  }
  return bytes;
}

/** Any UTF-16 unit above 0x7f, surrogates included (as in text.ts). */
const NON_ASCII = /[\u0080-\uffff]/;
