import { IncomingMessage } from 'node:http';

/**
 * Node's `req.headers`, built for less (#18). Node files each header name on every request: it
 * compares the name with its known ones, lower-cases it, prefixes a flag, slices it off again and
 * interns the result as a property key. For a name it does not know, such as `Mcp-Method`,
 * `Mcp-Name` or `Mcp-Session-Id`, that is about 2,250 instructions a header, more than the whole
 * difference between a 2026-07-28 call and a 2025-11-25 one (docs/design.md, "Thirteenth round of
 * #18"). Clients send the same names on every request, so this remembers how Node filed each name
 * the first time, by asking Node itself, and files it the same way after that.
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

/** The request class the gateway's server makes (`createServer({ IncomingMessage })`). */
export class FiledIncomingMessage extends IncomingMessage {
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

/** For tests: how many names are remembered. */
export function filedNames(): number {
  return filings.size;
}
