/**
 * JSON reading over jsonc-parser's event visitor rather than JSON.parse, so that errors carry a
 * line and column on every runtime, duplicate keys are caught, and objects keep their keys in
 * file order (JSON.parse would move integer-like keys such as "1" to the front).
 */

import { type ParseErrorCode, printParseErrorCode, visit } from 'jsonc-parser';
import type { JsonObject } from '../lib/json.js';
import type { PathSegment } from './paths.js';
import type { ConfigIssue } from './types.js';

const MAX_DEPTH = 64;

/** Key order of objects built by the reader, as written in the file. */
const fileOrder = new WeakMap<object, string[]>();

export function keysOf(value: JsonObject): string[] {
  return fileOrder.get(value) ?? Object.keys(value);
}

/** An open object or array, with its path and (for an object) the key its next value takes. */
interface Open {
  value: JsonObject | unknown[];
  path: PathSegment[];
  key?: string;
}

/** The reason and hint for jsonc-parser's error code, given the text at the error. */
function explain(code: ParseErrorCode, text: string, offset: number, inArray: boolean): [string, string?] {
  const c = text[offset];
  const closer = inArray ? ']' : '}';
  switch (printParseErrorCode(code)) {
    case 'InvalidCommentToken':
      return ['unexpected character "/"', 'JSON does not allow comments; remove them'];
    case 'UnexpectedEndOfString':
      return ['unterminated string', 'close the string with a double quote'];
    case 'InvalidEscapeCharacter':
    case 'InvalidUnicode':
      return ['invalid escape sequence in a string', 'write a backslash as \\\\'];
    case 'InvalidCharacter':
      return ['control character inside a string', 'write a line break as \\n and a tab as \\t'];
    case 'EndOfFileExpected':
      return [
        'unexpected content after the end of the JSON value',
        'remove it, or wrap it in the one top-level object',
      ];
    case 'CommaExpected':
      return inArray
        ? ['expected "," or "]" after an array element']
        : ['expected "," or "}" after a property value'];
    case 'ColonExpected':
      return ['expected ":" after a property name'];
  }
  if (c === undefined) {
    return offset === 0 && text.trim() === ''
      ? ['the file is empty']
      : ['unexpected end of input', 'close every open "{", "[" and string'];
  }
  if (c === closer) return ['trailing comma', `JSON does not allow a comma before "${closer}"; remove it`];
  if (c === "'") return [`unexpected character "'"`, 'JSON strings must use double quotes'];
  if (printParseErrorCode(code) === 'PropertyNameExpected')
    return ['expected a property name in double quotes'];
  return [`unexpected character ${JSON.stringify(c)}`];
}

type JsonRead = { ok: true; value: unknown; duplicates: PathSegment[][] } | { ok: false; error: ConfigIssue };

export function readJson(input: string, source?: string): JsonRead {
  const text = input.charCodeAt(0) === 0xfeff ? input.slice(1) : input;
  const duplicates: PathSegment[][] = [];
  const open: Open[] = [];
  let root: unknown;
  let failure: ConfigIssue | undefined;
  /** The first problem only, as an issue; jsonc-parser counts lines and columns from 0. */
  const fail = (line: number, column: number, reason: string, hint?: string) => {
    const at = `line ${line + 1}, column ${column + 1}`;
    const fix = hint ?? `correct the JSON syntax${source ? ` in ${source}` : ''} at ${at}`;
    failure ??= { path: '', message: `invalid JSON at ${at}: ${reason}`, fix };
  };
  /** Places a value in the open container (or as the root) and returns its path. */
  const place = (value: unknown): PathSegment[] => {
    const parent = open.at(-1);
    if (!parent) {
      root = value;
      return [];
    }
    if (Array.isArray(parent.value)) {
      parent.value.push(value);
      return [...parent.path, parent.value.length - 1];
    }
    const key = parent.key ?? '';
    const path = [...parent.path, key];
    if (Object.hasOwn(parent.value, key)) duplicates.push(path);
    else fileOrder.get(parent.value)?.push(key);
    // defineProperty, not assignment: a "__proto__" key must stay an ordinary property.
    Object.defineProperty(parent.value, key, { value, enumerable: true, writable: true, configurable: true });
    return path;
  };
  const begin = (value: JsonObject | unknown[], line: number, column: number) => {
    if (failure) return false;
    if (open.length >= MAX_DEPTH) {
      fail(line, column, `nesting is deeper than ${MAX_DEPTH} levels`);
      return false;
    }
    open.push({ value, path: place(value) });
  };

  try {
    visit(
      text,
      {
        onObjectBegin: (_o, _l, line, column) => {
          const object: JsonObject = {};
          fileOrder.set(object, []);
          return begin(object, line, column);
        },
        onArrayBegin: (_o, _l, line, column) => begin([], line, column),
        onObjectEnd: () => void open.pop(),
        onArrayEnd: () => void open.pop(),
        onObjectProperty: (key) => {
          const parent = open.at(-1);
          if (parent) parent.key = key;
        },
        onLiteralValue: (value) => {
          if (!failure) place(value);
        },
        onError: (code, offset, _l, line, column) => {
          const [reason, hint] = explain(code, text, offset, Array.isArray(open.at(-1)?.value));
          fail(line, column, reason, hint);
        },
      },
      { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false },
    );
  } catch (e) {
    // The visitor recurses per level; past the depth limit, which `begin` has already reported,
    // a deep enough text overflows the stack.
    if (!(e instanceof RangeError && failure)) throw e;
  }

  return failure ? { ok: false, error: failure } : { ok: true, value: root, duplicates };
}
