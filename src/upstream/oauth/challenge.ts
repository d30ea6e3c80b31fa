/**
 * WWW-Authenticate parsing (RFC 9110 §11.6.1): several challenges in one header, auth-params with
 * token or quoted-string values, token68. Whatever an upstream sends, this returns what it could
 * read and never throws: the header comes from a server we do not control.
 */
import type { Challenge } from './types.js';

// RFC 9110 §5.6.2 tchar.
const TCHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/;
// OWS, and the CR LF of an obsolete line folding a raw header may still hold.
const SPACE = /^[ \t\r\n]$/;
// RFC 9110 §11.2 token68, when it is the whole credential part of a challenge.
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*(?=[ \t\r\n]*(,|$))/;

class Reader {
  pos = 0;
  constructor(readonly s: string) {}
  get done(): boolean {
    return this.pos >= this.s.length;
  }
  peek(): string {
    return this.s[this.pos] ?? '';
  }
  skipSpace(): void {
    while (SPACE.test(this.peek())) this.pos++;
  }
  skipSeparators(): void {
    while (SPACE.test(this.peek()) || this.peek() === ',') this.pos++;
  }
  token(): string {
    const start = this.pos;
    while (!this.done && TCHAR.test(this.peek())) this.pos++;
    return this.s.slice(start, this.pos);
  }
  /** RFC 9110 §5.6.4 quoted-string, the opening quote current; an unterminated one runs to the end. */
  quoted(): string {
    this.pos++;
    let out = '';
    while (!this.done) {
      const ch = this.s[this.pos++];
      if (ch === '"') return out;
      if (ch === '\\' && !this.done) out += this.s[this.pos++];
      else out += ch;
    }
    return out;
  }
  /** An unquoted value: a token by the grammar, but servers send bare URLs too, so up to OWS or ",". */
  bare(): string {
    const start = this.pos;
    while (!this.done && this.peek() !== ',' && this.peek() !== '"' && !SPACE.test(this.peek())) this.pos++;
    return this.s.slice(start, this.pos);
  }
  /** Junk: skip to the next comma so the rest of the header can still be read. */
  skipItem(): void {
    while (!this.done && this.peek() !== ',') {
      if (this.peek() === '"') this.quoted();
      else this.pos++;
    }
  }
}

/** Every challenge of a WWW-Authenticate header (several headers arrive joined by ", "). */
export function parseChallenges(header: string | null): Challenge[] {
  if (!header) return [];
  const r = new Reader(header);
  const out: Challenge[] = [];
  while (!r.done) {
    r.skipSeparators();
    if (r.done) break;
    const scheme = r.token();
    if (!scheme) {
      r.pos++;
      continue;
    }
    const params: Record<string, string> = {};
    r.skipSpace();
    const token68 = TOKEN68.exec(r.s.slice(r.pos));
    if (token68) r.pos += token68[0].length;
    else readParams(r, params);
    out.push(withBearerFields(scheme.toLowerCase(), params));
  }
  return out;
}

/** auth-params up to the start of the next challenge (a token not followed by "="). */
function readParams(r: Reader, params: Record<string, string>): void {
  for (;;) {
    r.skipSeparators();
    if (r.done) return;
    const start = r.pos;
    const name = r.token();
    if (!name) {
      r.skipItem();
      continue;
    }
    r.skipSpace();
    if (r.peek() !== '=') {
      r.pos = start;
      return;
    }
    r.pos++;
    r.skipSpace();
    const value = r.peek() === '"' ? r.quoted() : r.bare();
    const key = name.toLowerCase();
    // RFC 9110 §11.2: each parameter name MUST only occur once; the first one wins.
    if (!(key in params)) params[key] = value;
    r.skipSpace();
    if (!r.done && r.peek() !== ',') r.skipItem();
  }
}

function withBearerFields(scheme: string, params: Record<string, string>): Challenge {
  const c: Challenge = { scheme, params };
  if (scheme !== 'bearer') return c;
  if (params.resource_metadata) c.resourceMetadata = params.resource_metadata;
  // RFC 6750 §3: scope is a space-delimited list; an empty one says nothing.
  const scope = params.scope?.split(/[ \t]+/).filter(Boolean);
  if (scope && scope.length > 0) c.scope = scope;
  if (params.error) c.error = params.error;
  return c;
}

/** The Bearer challenge of a WWW-Authenticate header, if any (RFC 6750 §3, RFC 9728 §5.1). */
export function bearerChallenge(header: string | null): Challenge | undefined {
  return parseChallenges(header).find((c) => c.scheme === 'bearer');
}
