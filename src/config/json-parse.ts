/**
 * JSON reading. A small strict parser instead of JSON.parse, so that errors carry a line and
 * column on every runtime, duplicate keys are caught, and objects keep their keys in file order
 * (JSON.parse would move integer-like keys such as "1" to the front).
 */

import type { JsonObject } from '../lib/json.js';
import type { PathSegment } from './paths.js';
import type { ConfigIssue } from './types.js';

const MAX_DEPTH = 64;

/** Key order of objects built by the reader, as written in the file. */
const fileOrder = new WeakMap<object, string[]>();

export function keysOf(value: JsonObject): string[] {
  return fileOrder.get(value) ?? Object.keys(value);
}

class JsonSyntaxError {
  constructor(
    readonly offset: number,
    readonly reason: string,
    readonly hint?: string,
  ) {}
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

class JsonReader {
  private i = 0;
  readonly duplicates: PathSegment[][] = [];

  constructor(private readonly text: string) {}

  read(): unknown {
    this.space();
    if (this.i >= this.text.length) throw new JsonSyntaxError(this.i, 'the file is empty');
    const value = this.value([], 0);
    this.space();
    if (this.i < this.text.length) {
      throw this.fail(
        'unexpected content after the end of the JSON value',
        'remove it, or wrap it in the one top-level object',
      );
    }
    return value;
  }

  private fail(reason: string, hint?: string): JsonSyntaxError {
    return new JsonSyntaxError(this.i, reason, hint);
  }

  private unexpected(): JsonSyntaxError {
    const c = this.text[this.i];
    if (c === undefined) return this.fail('unexpected end of input', 'close every open "{", "[" and string');
    if (c === '/') return this.fail('unexpected character "/"', 'JSON does not allow comments; remove them');
    if (c === "'") return this.fail(`unexpected character "'"`, 'JSON strings must use double quotes');
    return this.fail(`unexpected character ${JSON.stringify(c)}`);
  }

  private space(): void {
    for (;;) {
      const c = this.text[this.i];
      if (c === ' ' || c === '\t' || c === '\n' || c === '\r') this.i += 1;
      else return;
    }
  }

  private value(path: PathSegment[], depth: number): unknown {
    if (depth > MAX_DEPTH) throw this.fail(`nesting is deeper than ${MAX_DEPTH} levels`);
    const c = this.text[this.i];
    switch (c) {
      case '{':
        return this.object(path, depth);
      case '[':
        return this.array(path, depth);
      case '"':
        return this.string();
      case 't':
        return this.literal('true', true);
      case 'f':
        return this.literal('false', false);
      case 'n':
        return this.literal('null', null);
      default:
        if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
        throw this.unexpected();
    }
  }

  private literal(word: string, value: unknown): unknown {
    if (!this.text.startsWith(word, this.i)) throw this.unexpected();
    this.i += word.length;
    return value;
  }

  private number(): number {
    NUMBER.lastIndex = this.i;
    const match = NUMBER.exec(this.text);
    if (!match) throw this.fail('invalid number');
    this.i += match[0].length;
    return Number(match[0]);
  }

  private string(): string {
    const start = this.i;
    this.i += 1;
    let out = '';
    let run = this.i;
    for (;;) {
      const c = this.text[this.i];
      if (c === undefined) {
        throw new JsonSyntaxError(start, 'unterminated string', 'close the string with a double quote');
      }
      if (c === '"') {
        out += this.text.slice(run, this.i);
        this.i += 1;
        return out;
      }
      if (c === '\\') {
        out += this.text.slice(run, this.i);
        out += this.escape();
        run = this.i;
        continue;
      }
      if (c < ' ') {
        throw this.fail('control character inside a string', 'write a line break as \\n and a tab as \\t');
      }
      this.i += 1;
    }
  }

  private escape(): string {
    const c = this.text[this.i + 1];
    const simple: Record<string, string> = {
      '"': '"',
      '\\': '\\',
      '/': '/',
      b: '\b',
      f: '\f',
      n: '\n',
      r: '\r',
      t: '\t',
    };
    if (c !== undefined && Object.hasOwn(simple, c)) {
      this.i += 2;
      return simple[c]!;
    }
    if (c === 'u') {
      const hex = this.text.slice(this.i + 2, this.i + 6);
      if (/^[0-9A-Fa-f]{4}$/.test(hex)) {
        this.i += 6;
        return String.fromCharCode(Number.parseInt(hex, 16));
      }
    }
    throw this.fail('invalid escape sequence in a string', 'write a backslash as \\\\');
  }

  private object(path: PathSegment[], depth: number): JsonObject {
    this.i += 1;
    const object: JsonObject = {};
    const keys: string[] = [];
    fileOrder.set(object, keys);
    this.space();
    if (this.text[this.i] === '}') {
      this.i += 1;
      return object;
    }
    for (;;) {
      this.space();
      const c = this.text[this.i];
      if (c !== '"') {
        if (c === '}' && keys.length > 0)
          throw this.fail('trailing comma', 'JSON does not allow a comma before "}"; remove it');
        if (c === undefined || c === '/' || c === "'") throw this.unexpected();
        throw this.fail('expected a property name in double quotes');
      }
      const key = this.string();
      this.space();
      if (this.text[this.i] !== ':') throw this.fail('expected ":" after a property name');
      this.i += 1;
      this.space();
      const value = this.value([...path, key], depth + 1);
      if (Object.hasOwn(object, key)) this.duplicates.push([...path, key]);
      else keys.push(key);
      // defineProperty, not assignment: a "__proto__" key must stay an ordinary property.
      Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
      this.space();
      const next = this.text[this.i];
      if (next === ',') {
        this.i += 1;
        continue;
      }
      if (next === '}') {
        this.i += 1;
        return object;
      }
      if (next === undefined || next === '/') throw this.unexpected();
      throw this.fail('expected "," or "}" after a property value');
    }
  }

  private array(path: PathSegment[], depth: number): unknown[] {
    this.i += 1;
    const out: unknown[] = [];
    this.space();
    if (this.text[this.i] === ']') {
      this.i += 1;
      return out;
    }
    for (;;) {
      this.space();
      if (this.text[this.i] === ']' && out.length > 0) {
        throw this.fail('trailing comma', 'JSON does not allow a comma before "]"; remove it');
      }
      out.push(this.value([...path, out.length], depth + 1));
      this.space();
      const next = this.text[this.i];
      if (next === ',') {
        this.i += 1;
        continue;
      }
      if (next === ']') {
        this.i += 1;
        return out;
      }
      if (next === undefined || next === '/') throw this.unexpected();
      throw this.fail('expected "," or "]" after an array element');
    }
  }
}

function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let k = 0; k < offset && k < text.length; k++) {
    if (text[k] === '\n') {
      line += 1;
      lineStart = k + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

type JsonRead = { ok: true; value: unknown; duplicates: PathSegment[][] } | { ok: false; error: ConfigIssue };

export function readJson(input: string, source?: string): JsonRead {
  const text = input.charCodeAt(0) === 0xfeff ? input.slice(1) : input;
  const reader = new JsonReader(text);
  try {
    const value = reader.read();
    return { ok: true, value, duplicates: reader.duplicates };
  } catch (err) {
    if (!(err instanceof JsonSyntaxError)) throw err;
    const { line, column } = lineAndColumn(text, err.offset);
    const where = source ? ` in ${source}` : '';
    const fix = err.hint ?? `correct the JSON syntax${where} at line ${line}, column ${column}`;
    return {
      ok: false,
      error: { path: '', message: `invalid JSON at line ${line}, column ${column}: ${err.reason}`, fix },
    };
  }
}
