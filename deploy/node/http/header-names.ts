import { IncomingMessage } from 'node:http';

/**
 * Node's `req.headers`, built for less (#18). Node files each header name on every request: it
 * compares the name with its known ones, lower-cases it, prefixes a flag, slices it off again and
 * interns the result as a property key. For a name it does not know, such as `Mcp-Method`,
 * `Mcp-Name` or `Mcp-Session-Id`, that is about 2,250 instructions a header, more than the whole
 * difference between a 2026-07-28 call and a 2025-11-25 one (docs/design.md, "Thirteenth round of
 * #18"). Clients send the same names on every request, so this remembers how Node filed each name
 * the first time, by asking Node itself, and files it the same way after that.
 *
 * A client also sends its names in the same order every time. The last few such sequences are
 * kept as shapes (`Shape`): a request whose names are one of them gets `req.headers` as a copy of
 * an object that already has those keys in that order, filled with its values. Filing names one
 * by one still cost about 8,000 instructions a request for nine headers: a Map lookup that hashes
 * each fresh name string, and a property added, with its map transition, per header (#18,
 * docs/design.md "Sixteenth round").
 */

/** What Node does with a second header of the same name: join with ", " or "; ", collect, or keep the first. */
type Repeat = 'comma' | 'semicolon' | 'array' | 'first';

interface Filing {
  /** The key in `req.headers`: lower case, and interned, since Node made it a property key. */
  key: string;
  repeat: Repeat;
}

type HeaderDest = Record<string, unknown>;
type AddHeaderLine = (this: IncomingMessage, field: string, value: string, dest: HeaderDest) => void;

/** Node's own filing, the one `req.headers` and the trailers use (`_http_incoming.js`). */
const nodeAdd = (IncomingMessage.prototype as unknown as { _addHeaderLine: AddHeaderLine })._addHeaderLine;

/** Names remembered, by their bytes as sent; past this, a new name is filed by Node every time. */
export const MAX_NAMES = 256;
/** A longer name is not remembered (a header section can be 16 KB). */
const MAX_NAME_LENGTH = 64;

const filings = new Map<string, Filing>();

/** How Node files `field`: two values through its own code, into an object of their own. */
function learn(message: IncomingMessage, field: string): Filing | undefined {
  const probe: HeaderDest = {};
  nodeAdd.call(message, field, 'a', probe);
  nodeAdd.call(message, field, 'b', probe);
  const keys = Object.keys(probe);
  if (keys.length !== 1) return undefined;
  const key = keys[0]!;
  const value = probe[key];
  const repeat: Repeat | undefined =
    value === 'a, b'
      ? 'comma'
      : value === 'a; b'
        ? 'semicolon'
        : value === 'a'
          ? 'first'
          : Array.isArray(value) && value.length === 2
            ? 'array'
            : undefined;
  return repeat ? { key, repeat } : undefined;
}

/** One sequence of header names, as a client sends them, and where Node files each. */
interface Shape {
  /** The names as sent, in order. */
  names: readonly string[];
  /** Each name's key in `req.headers`: all different, so no value joins another. */
  keys: readonly string[];
  /** The keys in that order, each set to '': what a request's `req.headers` is copied from. */
  template: HeaderDest;
  /** Makes a request's `req.headers` in one object literal, where the host lets code be made. */
  fill: ((raw: readonly string[]) => HeaderDest) | undefined;
}

/** Shapes kept, the last one matched first. */
export const MAX_SHAPES = 8;
/**
 * A request with more headers than this is filed name by name. Far below Node's default
 * `maxHeadersCount` (2,000, which the gateway keeps): every raw pair of a shaped request is one
 * Node's own getter would file.
 */
const MAX_SHAPE_HEADERS = 32;

const shapes: Shape[] = [];

/** The kept shape whose names are exactly `raw`'s, moved to the front; undefined if none is. */
function shapeOf(raw: readonly string[]): Shape | undefined {
  for (let s = 0; s < shapes.length; s++) {
    const shape = shapes[s]!;
    const { names } = shape;
    if (names.length * 2 !== raw.length) continue;
    let i = 0;
    while (i < names.length && names[i] === raw[i * 2]) i++;
    if (i < names.length) continue;
    if (s > 0) {
      shapes.splice(s, 1);
      shapes.unshift(shape);
    }
    return shape;
  }
  return undefined;
}

/**
 * Keeps `raw`'s names as a shape when every one is filed from memory (not collected into an
 * array, as Set-Cookie is) and no two share a key, so each value lands alone under its own key.
 */
function learnShape(raw: readonly string[]): void {
  if (raw.length > MAX_SHAPE_HEADERS * 2) return;
  const names: string[] = [];
  const keys: string[] = [];
  const template: HeaderDest = {};
  for (let i = 0; i < raw.length; i += 2) {
    const filing = filings.get(raw[i]!);
    if (filing === undefined || filing.repeat === 'array' || Object.hasOwn(template, filing.key)) return;
    names.push(raw[i]!);
    keys.push(filing.key);
    template[filing.key] = '';
  }
  // A key such as `__proto__` is not an own property once set: such names are filed one by one.
  if (Object.keys(template).length !== keys.length) return;
  shapes.unshift({ names, keys, template, fill: compileFill(keys) });
  if (shapes.length > MAX_SHAPES) shapes.pop();
}

/**
 * A function that makes a shape's `req.headers` as one object literal: `{"host": raw[1], ...}`.
 * Filling a copy of the template stored each value through a megamorphic keyed store, about 170
 * instructions a header (#18, docs/design.md "Seventeenth round"); a literal's stores are at fixed
 * places. The keys are Node's filing of the names (lower case, HTTP token characters only, as
 * Node's parser accepts them), written as JSON string literals, which are JavaScript string
 * literals; `__proto__`, which a literal would read as the prototype, never reaches a shape.
 * Undefined where the host does not let code be made from strings
 * (`--disallow-code-generation-from-strings`): the template is copied and filled instead.
 */
function compileFill(keys: readonly string[]): Shape['fill'] {
  if (keys.includes('__proto__')) return undefined;
  const members = keys.map((key, i) => `${JSON.stringify(key)}: raw[${i * 2 + 1}]`).join(', ');
  try {
    return new Function('raw', `return { ${members} };`) as Shape['fill'];
  } catch {
    return undefined;
  }
}

/** Node's `req.headers` accessor: what a server that joins every repeat still uses, and the first request of a shape. */
const nodeHeaders = Object.getOwnPropertyDescriptor(IncomingMessage.prototype, 'headers')!;

/** The request class the gateway's server makes (`createServer({ IncomingMessage })`). */
export class FiledIncomingMessage extends IncomingMessage {
  /** `req.headers` once built or set. */
  _filedHeaders?: HeaderDest;
  /** Built from a shape: no two headers share a name. */
  _distinct?: boolean;
  /** Built from a shape: its keys, each at its raw pair's place (`shapedHeader`). */
  _keys?: readonly string[] | undefined;

  _addHeaderLine(field: string, value: string, dest: HeaderDest): void {
    // `joinDuplicateHeaders` changes what a repeat does: such a server is left to Node (the
    // gateway's never sets it), and what is remembered is what a server without it does.
    if ((this as { joinDuplicateHeaders?: boolean }).joinDuplicateHeaders) {
      nodeAdd.call(this, field, value, dest);
      return;
    }
    let filing = filings.get(field);
    if (filing === undefined) {
      if (filings.size >= MAX_NAMES || field.length > MAX_NAME_LENGTH) {
        nodeAdd.call(this, field, value, dest);
        return;
      }
      filing = learn(this, field);
      if (filing === undefined) {
        nodeAdd.call(this, field, value, dest);
        return;
      }
      filings.set(field, filing);
    }
    const { key } = filing;
    const seen = dest[key];
    switch (filing.repeat) {
      case 'comma':
        dest[key] = typeof seen === 'string' ? `${seen}, ${value}` : value;
        return;
      case 'semicolon':
        dest[key] = typeof seen === 'string' ? `${seen}; ${value}` : value;
        return;
      case 'array':
        if (seen !== undefined) (seen as string[]).push(value);
        else dest[key] = [value];
        return;
      case 'first':
        if (seen === undefined) dest[key] = value;
        return;
    }
  }
}

Object.defineProperty(FiledIncomingMessage.prototype, 'headers', {
  configurable: true,
  enumerable: false,
  get(this: FiledIncomingMessage): HeaderDest {
    const built = this._filedHeaders;
    if (built !== undefined) return built;
    const raw = this.rawHeaders;
    // A server that joins every repeat is left to Node, as in `_addHeaderLine`.
    const join = (this as { joinDuplicateHeaders?: boolean }).joinDuplicateHeaders === true;
    const shape = join ? undefined : shapeOf(raw);
    let headers: HeaderDest;
    if (shape === undefined) {
      headers = nodeHeaders.get!.call(this) as HeaderDest;
      if (!join) learnShape(raw);
    } else {
      const { keys, fill } = shape;
      if (fill !== undefined) headers = fill(raw);
      else {
        headers = { ...shape.template };
        for (let i = 0; i < keys.length; i++) headers[keys[i]!] = raw[i * 2 + 1];
      }
      this._distinct = true;
      this._keys = keys;
    }
    this._filedHeaders = headers;
    return headers;
  },
  set(this: FiledIncomingMessage, value: HeaderDest) {
    this._filedHeaders = value;
    this._distinct = false;
    this._keys = undefined;
  },
});

/**
 * Whether a header name comes twice in `req` (the Node lane then joins them itself, http-lane.ts).
 * Node has already built `req.headers` (its server reads Host from it), one key per distinct name:
 * a request built from a shape has none repeated, and otherwise fewer keys than raw pairs means a
 * repeat. Without one, that table is exactly what the lane would build, and it reads it instead
 * (#18: ~0.3 µs and 0.7-1.2 KB per call).
 */
export function repeatsName(req: IncomingMessage): boolean {
  const { headers } = req;
  if ((req as FiledIncomingMessage)._distinct === true) return false;
  return Object.keys(headers).length * 2 !== req.rawHeaders.length;
}

/**
 * `req.headers[key]` for a request built from a shape, found by its place among the shape's keys
 * (string compares of interned names) instead of a keyed load, which is megamorphic where one
 * function reads every header (#18); null for any other request. The Node lane never writes to
 * `req.headers`, so its values are the raw ones.
 */
export function shapedHeader(req: IncomingMessage, key: string): string | undefined | null {
  const keys = (req as FiledIncomingMessage)._keys;
  if (keys === undefined) return null;
  for (let i = 0; i < keys.length; i++) if (keys[i] === key) return req.rawHeaders[i * 2 + 1];
  return undefined;
}

/** For tests: how many names are remembered. */
export function filedNames(): number {
  return filings.size;
}

/** For tests: how many shapes are kept. */
export function keptShapes(): number {
  return shapes.length;
}
