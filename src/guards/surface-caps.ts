/**
 * The result cap (SECURITY E1) for answers other than tool results: `prompts/get` messages and
 * `resources/read` contents are capped exactly as tool content is (result-cap.ts), through the
 * same cutting rules: text is cut at a UTF-8 boundary with a visible marker, binary parts that do
 * not fit become a note, and `_meta["manifold/truncated"]` says the client got less than was sent.
 */

import { isObject } from '../lib/json.js';
import { resultCap, TRUNCATED_META_KEY } from './result-cap.js';

type Obj = Record<string, unknown>;

export interface Capped {
  result: Obj;
  truncated: boolean;
  originalBytes: number;
}

/** Caps a `prompts/get` result: each message's content is one content block. */
export function promptResultCap(maxBytes: number): (result: Obj) => Capped {
  const cap = resultCap(maxBytes);
  return (result) => {
    const messages = Array.isArray(result.messages) ? result.messages : [];
    const { messages: _m, ...rest } = result;
    const capped = cap({ ...rest, content: messages.map((m) => (isObject(m) ? m.content : m)) });
    if (!capped.truncated) return { result, truncated: false, originalBytes: capped.originalBytes };
    const { content, ...others } = capped.result;
    const blocks = Array.isArray(content) ? content : [];
    const out = blocks.map((block, i) => {
      const original = messages[i];
      // Kept or cut messages keep their role; the gateway's own markers speak as the user turn.
      return {
        role:
          isObject(original) && i < messages.length && sameKind(original.content, block)
            ? original.role
            : 'user',
        content: block,
      };
    });
    return { result: { ...others, messages: out }, truncated: true, originalBytes: capped.originalBytes };
  };
}

function sameKind(a: unknown, b: unknown): boolean {
  return isObject(a) && isObject(b) && a.type === b.type;
}

/** Caps a `resources/read` result: each content item becomes an embedded-resource block and back. */
export function contentsCap(maxBytes: number): (result: Obj) => Capped {
  const cap = resultCap(maxBytes);
  return (result) => {
    const contents = Array.isArray(result.contents) ? result.contents : [];
    const { contents: _c, ...rest } = result;
    const capped = cap({ ...rest, content: contents.map((c) => ({ type: 'resource', resource: c })) });
    if (!capped.truncated) return { result, truncated: false, originalBytes: capped.originalBytes };
    const { content, ...others } = capped.result;
    const blocks = Array.isArray(content) ? content : [];
    const lastUri = (i: number) => {
      const c = contents[Math.min(i, contents.length - 1)];
      return isObject(c) && typeof c.uri === 'string' ? c.uri : 'manifold://truncated';
    };
    // A marker or a note about an omitted binary part becomes a text item of the same resource.
    const out = blocks.map((block, i) =>
      isObject(block) && block.type === 'resource' && isObject(block.resource)
        ? block.resource
        : { uri: lastUri(i), mimeType: 'text/plain', text: isObject(block) ? String(block.text ?? '') : '' },
    );
    const meta = isObject(others._meta) ? others._meta : { [TRUNCATED_META_KEY]: true };
    return {
      result: { ...others, _meta: meta, contents: out },
      truncated: true,
      originalBytes: capped.originalBytes,
    };
  };
}
