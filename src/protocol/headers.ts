import { ManifoldError } from '../errors.js';
import { isObject } from '../lib/json.js';

/**
 * Request metadata headers of streamable HTTP (spec 2026-07-28: basic/transports/streamable-http,
 * "Request Metadata"): the Base64 sentinel encoding of `Mcp-Name` and `Mcp-Param-*` values, and
 * the `x-mcp-header` schema extension that mirrors tool arguments into headers. Both edges use
 * it: src/server validates what a client sent, src/upstream writes what a server must receive.
 */

const SENTINEL_START = '=?base64?';
const SENTINEL_END = '?=';
const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Visible ASCII, space and tab, with no leading or trailing whitespace (RFC 9110 field values). */
function plainSafe(value: string): boolean {
  if (value.length === 0) return true;
  if (/^[ \t]|[ \t]$/.test(value)) return false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c !== 0x09 && (c < 0x20 || c > 0x7e)) return false;
  }
  return !(value.startsWith(SENTINEL_START) && value.endsWith(SENTINEL_END));
}

function toBase64(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

/** A header value for `value`: as-is when safe, else `=?base64?…?=` over its UTF-8 ("Value Encoding"). */
export function encodeHeaderValue(value: string): string {
  return plainSafe(value) ? value : `${SENTINEL_START}${toBase64(enc.encode(value))}${SENTINEL_END}`;
}

/**
 * The value a received `Mcp-Name` or `Mcp-Param-*` header stands for, decoded when it uses the
 * sentinel; undefined when it is malformed (bad Base64, not UTF-8, or invalid characters).
 */
export function decodeHeaderValue(raw: string): string | undefined {
  if (
    raw.charCodeAt(0) === 0x3d &&
    raw.startsWith(SENTINEL_START) &&
    raw.endsWith(SENTINEL_END) &&
    raw.length >= 11
  ) {
    const b64 = raw.slice(SENTINEL_START.length, raw.length - SENTINEL_END.length);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) return undefined;
    try {
      const bin = atob(b64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return dec.decode(bytes);
    } catch {
      return undefined;
    }
  }
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c !== 0x09 && (c < 0x20 || c > 0x7e)) return undefined;
  }
  return raw;
}

/**
 * The body field each named method mirrors into `Mcp-Name` (streamable-http, "Standard Request
 * Headers"; the tasks extension adds its methods, naming the task).
 */
export const NAME_FIELD: Readonly<Record<string, 'name' | 'uri' | 'taskId'>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/** The params field `Mcp-Name` mirrors for `method`, if any: an own key only (`toString` is a method name a client can send). */
export function nameField(method: string): 'name' | 'uri' | 'taskId' | undefined {
  return Object.hasOwn(NAME_FIELD, method) ? NAME_FIELD[method] : undefined;
}

/** One argument mirrored into a header: `Mcp-Param-<header>` carries the value at `path`. */
export interface ParamHeader {
  header: string;
  path: readonly string[];
  type: 'string' | 'integer' | 'boolean';
}

export type ParamHeaderPlan = { ok: true; params: readonly ParamHeader[] } | { ok: false; reason: string };

/** An HTTP token (RFC 9110 §5.6.2): a header field name, a baggage key. */
export const HTTP_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const NO_HEADERS: ParamHeaderPlan = { ok: true, params: [] };

/**
 * Reads the `x-mcp-header` annotations of a tool's input schema ("Schema Extension"). A value must
 * be a non-empty token, unique case-insensitively, on a string, integer or boolean property reached
 * only through `properties` keys; an annotation anywhere else makes the tool invalid, and a client
 * must then leave the tool out of its list.
 */
export function paramHeaderPlan(inputSchema: unknown): ParamHeaderPlan {
  if (!isObject(inputSchema) || !JSON.stringify(inputSchema).includes('"x-mcp-header"')) return NO_HEADERS;
  const params: ParamHeader[] = [];
  const seen = new Set<string>();
  let problem: string | undefined;
  const walk = (node: unknown, path: string[] | undefined, where: string): void => {
    if (problem || !isObject(node)) {
      if (Array.isArray(node)) {
        for (let i = 0; i < node.length; i++) walk(node[i], undefined, `${where}[${i}]`);
      }
      return;
    }
    for (const [key, value] of Object.entries(node)) {
      if (key === 'x-mcp-header') {
        if (!path || path.length === 0) {
          problem = `x-mcp-header at ${where} is not on a property reached through "properties" alone`;
          return;
        }
        if (typeof value !== 'string' || !HTTP_TOKEN.test(value)) {
          problem = `x-mcp-header at ${where} is not an HTTP token`;
          return;
        }
        const type = node.type;
        if (type !== 'string' && type !== 'integer' && type !== 'boolean') {
          problem = `x-mcp-header at ${where} is on a property of type ${JSON.stringify(type)}, not string, integer or boolean`;
          return;
        }
        const lower = value.toLowerCase();
        if (seen.has(lower)) {
          problem = `x-mcp-header ${JSON.stringify(value)} is used twice`;
          return;
        }
        seen.add(lower);
        params.push({ header: value, path, type });
        continue;
      }
      if (key === 'properties' && isObject(value) && path) {
        for (const [prop, schema] of Object.entries(value)) walk(schema, [...path, prop], `${where}.${prop}`);
        continue;
      }
      // Anything else (composition, arrays, $ref, $defs…) is not statically reachable: an
      // annotation found below it makes the tool invalid.
      walk(value, undefined, `${where}.${key}`);
    }
  };
  walk(inputSchema, [], 'inputSchema');
  return problem ? { ok: false, reason: problem } : { ok: true, params };
}

/**
 * The header value of one argument, or undefined when it is absent or null: then no header is sent
 * ("Server Behavior for Custom Headers": a null parameter, like an absent one, has no header; the
 * argument check reads that null as absent too, guards/args.ts).
 */
export function paramValue(args: Record<string, unknown>, param: ParamHeader): string | undefined {
  let v: unknown = args;
  for (const key of param.path) {
    if (!isObject(v)) return undefined;
    v = v[key];
  }
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  return undefined;
}

/** Header values compared as the spec asks: integers numerically (`42.0` equals `42`). */
export function sameParamValue(header: string, body: string, type: ParamHeader['type']): boolean {
  if (type === 'integer') return header.trim() !== '' && Number(header) === Number(body);
  return header === body;
}

/**
 * A tool call's `Mcp-Param-*` headers against its arguments ("Server Behavior for Custom
 * Headers"): each argument the tool's schema mirrors and the call sets must come with its header,
 * and the header must decode to the same value. Headers for arguments not set, and unrecognised
 * ones, pass unread.
 */
export function checkParamHeaders(
  plan: readonly ParamHeader[],
  args: Record<string, unknown>,
  header: (name: string) => string | undefined,
): void {
  for (const param of plan) {
    const expected = paramValue(args, param);
    if (expected === undefined) continue;
    const raw = header(`mcp-param-${param.header.toLowerCase()}`);
    if (raw === undefined) {
      throw new ManifoldError(
        'ERR_HEADER_MISMATCH',
        `Header mismatch: the Mcp-Param-${param.header} header is required when that argument is set`,
      );
    }
    const got = decodeHeaderValue(raw);
    if (got === undefined || !sameParamValue(got, expected, param.type)) {
      throw new ManifoldError(
        'ERR_HEADER_MISMATCH',
        `Header mismatch: Mcp-Param-${param.header} does not match the argument in the body`,
      );
    }
  }
}
