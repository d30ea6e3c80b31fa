/**
 * Canonical JSON and tool fingerprints for drift quarantine (SECURITY C1, C3). The fingerprint is
 * what "the tool as it was trusted" means: any change of text or schema changes it, key order
 * never does. Pure and portable: Web Crypto only, so it runs on Node and on Workers.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';

// ---------------------------------------------------------------------------------------------
// Canonical JSON
// ---------------------------------------------------------------------------------------------

/**
 * Deeper than any real schema, shallow enough to stay far from the smallest engine stack. A fixed
 * bound keeps the answer the same on Node and on Workers instead of depending on stack size.
 */
const MAX_DEPTH = 512;

/**
 * One value as JSON, or `undefined` when JSON.stringify would leave it out. Mirrors
 * JSON.stringify (toJSON, boxed primitives, -0, non-finite numbers, holes) except that object
 * keys are sorted, so only the data and never the insertion order decides the output.
 */
function serialize(
  key: string,
  input: unknown,
  indent: string,
  depth: number,
  ancestors: Set<object>,
): string | undefined {
  let value = input;
  if (value !== null && (typeof value === 'object' || typeof value === 'bigint')) {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = toJSON.call(value, key);
  }
  // Boxed primitives serialize as what they box, as in JSON.
  if (value instanceof Number) value = Number(value);
  else if (value instanceof String) value = String(value);
  else if (value instanceof Boolean) value = value.valueOf();

  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      // `String(-0)` is "0" already; NaN and the infinities have no JSON spelling.
      return Number.isFinite(value) ? String(value) : 'null';
    case 'string':
      // JSON.stringify escapes lone surrogates (ES2019), so two distinct strings never collapse
      // into the same UTF-8 bytes (TextEncoder would turn both into U+FFFD).
      return JSON.stringify(value);
    case 'bigint':
      throw new TypeError(`canonicalJson: BigInt at ${JSON.stringify(key)} has no JSON form`);
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  // Only objects remain.
  const object = value as object;
  if (depth >= MAX_DEPTH) throw new RangeError(`canonicalJson: nesting deeper than ${MAX_DEPTH}`);
  if (ancestors.has(object)) throw new TypeError('canonicalJson: circular structure');
  ancestors.add(object);
  const inner = indent === '' ? '' : `\n${indent.repeat(depth + 1)}`;
  const outer = indent === '' ? '' : `\n${indent.repeat(depth)}`;
  const parts: string[] = [];
  let open = '{';
  let close = '}';
  if (Array.isArray(object)) {
    open = '[';
    close = ']';
    for (let i = 0; i < object.length; i++) {
      // Arrays keep their order (it is data: enum order, tuple positions). Holes and skipped
      // values become null so positions never shift.
      parts.push(serialize(String(i), object[i], indent, depth + 1, ancestors) ?? 'null');
    }
  } else {
    // Default sort is by UTF-16 code units, the order RFC 8785 (JCS) uses. It ignores the engine's
    // "integer keys first" enumeration, so {"10":…,"2":…} keeps "10" first.
    const colon = indent === '' ? ':' : ': ';
    for (const k of Object.keys(object).sort()) {
      const member = (object as Record<string, unknown>)[k];
      // undefined, functions and symbols come back undefined: the member is left out.
      const text = serialize(k, member, indent, depth + 1, ancestors);
      if (text !== undefined) parts.push(`${JSON.stringify(k)}${colon}${text}`);
    }
  }
  ancestors.delete(object);
  if (parts.length === 0) return `${open}${close}`;
  return `${open}${inner}${parts.join(`,${inner}`)}${outer}${close}`;
}

function render(value: unknown, indent: string): string {
  const text = serialize('', value, indent, 0, new Set());
  if (text === undefined) throw new TypeError(`canonicalJson: a top-level ${typeof value} has no JSON form`);
  return text;
}

/**
 * Canonical JSON: JSON.stringify's output with object keys sorted at every level (UTF-16 code
 * unit order, as in RFC 8785), arrays in their own order, no whitespace. Two values that are the
 * same JSON data give the same string whatever order their keys were inserted in.
 *
 * Non-JSON input is handled as JSON.stringify handles it: `undefined`, functions and symbols are
 * dropped from objects and become `null` in arrays, `-0` becomes `0`, NaN and the infinities
 * become `null`, `toJSON` is honoured. What JSON.stringify would throw on, this throws on too:
 * BigInt and cycles (TypeError). It also throws when there is no JSON text at all (a top-level
 * `undefined`) and, at a fixed depth of 512, RangeError. Unicode is not normalized.
 *
 * @example
 * canonicalJson({ b: 1, a: [2, 1] }); // '{"a":[2,1],"b":1}'
 * canonicalJson({ a: undefined, b: -0, c: NaN }); // '{"b":0,"c":null}'
 * canonicalJson([undefined]); // '[null]'
 */
export function canonicalJson(value: unknown): string {
  return render(value, '');
}

/** The same canonical order, indented by two spaces: for humans reading a diff. */
export function prettyCanonicalJson(value: unknown): string {
  return render(value, '  ');
}

// ---------------------------------------------------------------------------------------------
// Fingerprint
// ---------------------------------------------------------------------------------------------

const encoder = new TextEncoder();

/**
 * What the fingerprint covers. An absent field is omitted (not null), so "no description" and an
 * empty description are different, and so are "no outputSchema" and any outputSchema. The name is
 * the baseline key, and annotations are compared separately so that a safer hint is not drift.
 */
function fingerprintInput(tool: Tool): Record<string, unknown> {
  return { description: tool.description, inputSchema: tool.inputSchema, outputSchema: tool.outputSchema };
}

/**
 * SHA-256, as lowercase hex, of the canonical JSON of the tool's `description`, `inputSchema` and
 * `outputSchema`. Reordering keys anywhere leaves it unchanged; any change of text, property,
 * enum, default or `required` changes it. No Unicode normalization: a precomposed and a decomposed
 * "é" are different tools, because a model reads them as different tokens. Rejects (as
 * canonicalJson throws) on data that is not JSON; a tool that cannot be fingerprinted must not be
 * trusted.
 *
 * @example
 * const a = await fingerprintTool({ name: 't', inputSchema: { type: 'object', required: ['x'] } });
 * const b = await fingerprintTool({ name: 't', inputSchema: { required: ['x'], type: 'object' } });
 * a === b; // true
 */
export async function fingerprintTool(tool: Tool): Promise<string> {
  return sha256Hex(canonicalJson(fingerprintInput(tool)));
}

/** SHA-256 of a text's UTF-8 bytes, as lowercase hex (Web Crypto, so it runs on Workers too). */
export async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(text)));
  let hex = '';
  for (const byte of digest) hex += byte.toString(16).padStart(2, '0');
  return hex;
}
