/**
 * Turns the text of a config file into a validated `Config`, reporting every problem at once.
 * Pure: no file system, no process, so it runs on Node and on Workers alike. The caller reads the
 * file and passes the environment.
 */
import { type Env, Interpolator } from './interpolate.js';
import {
  AUTH_DEFAULTS,
  AUTH_KEYS,
  authEntrySchema,
  closestKey,
  DEFAULT_STORE_PATH,
  DISCLOSURE_KEYS,
  DRIFT_KEYS,
  describeKind,
  FIELD_TEXT,
  formatPath,
  GATEWAY_DEFAULTS,
  GATEWAY_KEYS,
  gatewayEntrySchema,
  HTTP_ONLY_KEYS,
  JWS_ALGORITHMS,
  KEY_SOURCES,
  type KeySource,
  MIN_SECRET_BYTES,
  nameProblems,
  type PathSegment,
  SERVER_KEYS,
  STDIO_ONLY_KEYS,
  STORE_KEYS,
  STORE_SHAPE_TEXT,
  SYMMETRIC_ALGORITHMS,
  serverSchema,
  showValue,
  storeEntrySchema,
  suggestName,
  TENANT_KEYS,
  TOOLS_KEYS,
  TOP_LEVEL_KEYS,
  unknownKeyWarning,
  validateShape,
} from './schema.js';
import type {
  AuthConfig,
  Config,
  ConfigIssue,
  ConfigResult,
  GatewayConfig,
  ServerConfig,
  TenantConfig,
  TransportKind,
} from './types.js';

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// ---------------------------------------------------------------------------------------------
// JSON reading. A small strict parser instead of JSON.parse, so that errors carry a line and
// column on every runtime, duplicate keys are caught, and objects keep their keys in file order
// (JSON.parse would move integer-like keys such as "1" to the front).

const MAX_DEPTH = 64;

/** Key order of objects built by the reader, as written in the file. */
const fileOrder = new WeakMap<object, string[]>();

function keysOf(value: JsonObject): string[] {
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

function readJson(input: string, source?: string): JsonRead {
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

// ---------------------------------------------------------------------------------------------
// Validation

interface Findings {
  errors: ConfigIssue[];
  warnings: ConfigIssue[];
  interpolator: Interpolator;
}

function error(f: Findings, path: readonly PathSegment[], message: string, fix: string): void {
  f.errors.push({ path: formatPath(path), message, fix });
}

/** Interpolates a string, or the strings directly inside an array or object. */
function interpolateField(f: Findings, value: unknown, path: readonly PathSegment[]): unknown {
  const one = (v: unknown, p: PathSegment[]) =>
    typeof v === 'string' ? f.interpolator.string(v, formatPath(p)) : v;
  if (typeof value === 'string') return one(value, [...path]);
  if (Array.isArray(value)) return value.map((v, i) => one(v, [...path, i]));
  // fromEntries defines own properties, so a "__proto__" key cannot touch the prototype.
  if (isObject(value)) return Object.fromEntries(keysOf(value).map((k) => [k, one(value[k], [...path, k])]));
  return value;
}

/** True when some issue sits at `path` or below it. */
function hasIssueUnder(issues: readonly ConfigIssue[], path: readonly PathSegment[]): boolean {
  const p = formatPath(path);
  return issues.some((i) => i.path === p || i.path.startsWith(`${p}.`) || i.path.startsWith(`${p}[`));
}

function isTainted(f: Findings, path: readonly PathSegment[]): boolean {
  return f.interpolator.tainted.has(formatPath(path));
}

// --- gateway -----------------------------------------------------------------------------------

interface GatewayRead {
  config: GatewayConfig;
  /**
   * Keys whose configured value was rejected (the default stands in for them); keys inside
   * `disclosure` and `drift` are written `disclosure.budgetTokens`.
   */
  invalid: Set<string>;
  /** `disclosure.alwaysLoad` as written (interpolated, not deduplicated), so indices match the file. */
  alwaysLoad: string[];
}

function checkOrigin(f: Findings, origin: string, path: PathSegment[]): string | undefined {
  const fix = 'write an origin as scheme://host[:port], e.g. "https://app.example.com"';
  if (origin === '*' || origin === 'null') {
    error(
      f,
      path,
      `${JSON.stringify(origin)} is not supported as an allowed origin`,
      'list each origin, e.g. "https://app.example.com"',
    );
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    error(f, path, 'is not a valid origin', fix);
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    error(f, path, 'must be an http: or https: origin', fix);
    return undefined;
  }
  if (url.username !== '' || url.password !== '') {
    error(f, path, 'must not contain a username or password', fix);
    return undefined;
  }
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    const exact = isTainted(f, path) ? fix : `write ${JSON.stringify(url.origin)}`;
    error(f, path, 'must be an origin only, without a path, query or fragment', exact);
    return undefined;
  }
  return url.origin;
}

const HOSTNAME = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::[0-9]{1,5})?$/;

function checkHostname(f: Findings, host: string, path: PathSegment[]): string | undefined {
  if (HOSTNAME.test(host)) return host.toLowerCase();
  let fix = 'write a host name such as "mcp.example.com", optionally with ":port"';
  if (host.includes('://') && !isTainted(f, path)) {
    try {
      fix = `write ${JSON.stringify(new URL(host).host)}`;
    } catch {
      // keep the generic fix
    }
  }
  error(f, path, 'must be a host name (as sent in the Host header), not a URL or pattern', fix);
  return undefined;
}

const ALLOWED_HOST_FIX = 'write the bare host name, e.g. "api.example.com" or "127.0.0.1:3001"';
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;
const HOST_AND_PORT = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+)(?::([0-9]{1,5}))?$/u;

/**
 * An egress allowlist entry: a host name, IPv4 or bracketed IPv6 literal, optionally with `:port`.
 * Normalised by the WHATWG URL parser: lowercase, IDN as punycode, IPv4 in dotted form.
 */
function checkAllowedHost(f: Findings, entry: string, path: PathSegment[]): string | undefined {
  const tainted = isTainted(f, path);
  const reject = (message: string, fix = ALLOWED_HOST_FIX) => {
    error(f, path, message, fix);
    return undefined;
  };
  if (entry.trim() === '') return reject('must not be empty');
  if (SCHEME.test(entry)) {
    let fix = ALLOWED_HOST_FIX;
    if (!tainted) {
      try {
        const host = new URL(entry).host;
        if (host !== '') fix = `write ${JSON.stringify(host)}`;
      } catch {
        // keep the generic fix
      }
    }
    return reject('must be a bare host name, not a URL: remove the scheme', fix);
  }
  if (entry.includes('@')) return reject('must not contain a username or "@"');
  if (entry.includes('*')) {
    return reject(
      'wildcards are not supported; each host is matched exactly',
      'list each host name on its own, e.g. "api.example.com"',
    );
  }
  if (/[/?#\\]/.test(entry)) return reject('must be a bare host name, without a path, query or fragment');
  const match = HOST_AND_PORT.exec(entry);
  if (!match && !entry.includes('[') && (entry.match(/:/g)?.length ?? 0) > 1) {
    return reject(
      'an IPv6 address must be written in brackets',
      'write it as "[::1]", or with a port as "[::1]:8080"',
    );
  }
  if (!match) return reject('is not a valid host name, optionally followed by ":port"');
  const port = match[2];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) {
    return reject(`port must be from 1 to 65535, got ${port}`);
  }
  let hostname: string;
  try {
    hostname = new URL(`http://${match[1]}`).hostname;
  } catch {
    return reject('is not a valid host name, optionally followed by ":port"');
  }
  if (hostname === '') return reject('is not a valid host name, optionally followed by ":port"');
  return port === undefined ? hostname : `${hostname}:${Number(port)}`;
}

/** Picks the known keys of a nested gateway object (`disclosure`, `drift`, `store`), warning about the rest. */
function readNested(f: Findings, raw: unknown, base: PathSegment[], known: readonly string[]): unknown {
  if (!isObject(raw)) return raw;
  const picked: JsonObject = {};
  for (const key of keysOf(raw)) {
    if (known.includes(key)) picked[key] = interpolateField(f, raw[key], [...base, key]);
    else f.warnings.push(unknownKeyWarning([...base, key], known));
  }
  return picked;
}

/** `gateway.store`: `false` (state in memory only), or `{"path": ...}`; a missing path keeps the default. */
function readStore(f: Findings, raw: unknown, base: PathSegment[]): GatewayConfig['store'] | undefined {
  if (raw === false) return false;
  if (!isObject(raw)) {
    error(f, base, `expected ${STORE_SHAPE_TEXT.expected}, got ${describeKind(raw)}`, STORE_SHAPE_TEXT.fix);
    return undefined;
  }
  const picked = readNested(f, raw, base, STORE_KEYS) as JsonObject;
  const issues = validateShape(storeEntrySchema, picked, {
    table: FIELD_TEXT.store,
    base,
    tainted: f.interpolator.tainted,
  });
  f.errors.push(...issues);
  if (issues.length > 0) return undefined;
  const path = (picked.path as string | undefined) ?? DEFAULT_STORE_PATH;
  if (path.includes('\0')) {
    error(
      f,
      [...base, 'path'],
      'contains a NUL character',
      'remove the NUL character; file paths cannot hold it',
    );
    return undefined;
  }
  return { path };
}

function readGateway(f: Findings, raw: unknown): GatewayRead {
  const base = ['gateway'];
  const config: GatewayConfig = {
    ...GATEWAY_DEFAULTS,
    allowedOrigins: [],
    hostnames: [],
    allowedHosts: [],
    disclosure: { ...GATEWAY_DEFAULTS.disclosure, alwaysLoad: [] },
    store: { path: DEFAULT_STORE_PATH },
    drift: { ...GATEWAY_DEFAULTS.drift },
  };
  const invalid = new Set<string>();
  const nestedKeys = [
    ...DISCLOSURE_KEYS.map((k) => `disclosure.${k}`),
    ...DRIFT_KEYS.map((k) => `drift.${k}`),
  ];
  let alwaysLoad: string[] = [];
  if (raw === undefined) return { config, invalid, alwaysLoad };
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object, got ${describeKind(raw)}`,
      'write gateway as an object such as {"port": 8787}, or remove it',
    );
    for (const k of [...GATEWAY_KEYS, ...nestedKeys]) invalid.add(k);
    return { config, invalid, alwaysLoad };
  }
  const picked: JsonObject = {};
  for (const key of keysOf(raw)) {
    if (!(GATEWAY_KEYS as string[]).includes(key)) {
      f.warnings.push(unknownKeyWarning([...base, key], GATEWAY_KEYS));
      continue;
    }
    // `auth` and `store` have their own readers and rules (below); the other keys go through one shape.
    if (key === 'auth' || key === 'store') continue;
    picked[key] =
      key === 'disclosure'
        ? readNested(f, raw[key], [...base, key], DISCLOSURE_KEYS)
        : key === 'drift'
          ? readNested(f, raw[key], [...base, key], DRIFT_KEYS)
          : interpolateField(f, raw[key], [...base, key]);
  }
  const issues = validateShape(gatewayEntrySchema, picked, {
    table: FIELD_TEXT.gateway,
    base,
    tainted: f.interpolator.tainted,
  });
  f.errors.push(...issues);
  const target = config as unknown as JsonObject;
  for (const key of GATEWAY_KEYS) {
    if (picked[key] === undefined || key === 'disclosure' || key === 'drift' || key === 'auth') continue;
    if (hasIssueUnder(issues, [...base, key])) invalid.add(key);
    else target[key] = picked[key];
  }
  /** Copies the valid keys of `disclosure` or `drift` over their defaults; false if it was not an object. */
  const applyNested = (name: 'disclosure' | 'drift', known: readonly string[]): boolean => {
    const given = picked[name];
    if (given === undefined) return true;
    if (!isObject(given)) {
      invalid.add(name);
      for (const k of known) invalid.add(`${name}.${k}`);
      return false;
    }
    const nested = config[name] as unknown as JsonObject;
    for (const key of known) {
      if (given[key] === undefined) continue;
      if (hasIssueUnder(issues, [...base, name, key])) invalid.add(`${name}.${key}`);
      else nested[key] = given[key];
    }
    return true;
  };
  if (picked.disclosure !== undefined && applyNested('disclosure', DISCLOSURE_KEYS)) {
    alwaysLoad = config.disclosure.alwaysLoad;
    config.disclosure.alwaysLoad = [...new Set(alwaysLoad)];
  }
  applyNested('drift', DRIFT_KEYS);

  if (!invalid.has('allowedOrigins')) {
    const origins: string[] = [];
    config.allowedOrigins.forEach((o, i) => {
      const ok = checkOrigin(f, o, [...base, 'allowedOrigins', i]);
      if (ok !== undefined && !origins.includes(ok)) origins.push(ok);
    });
    config.allowedOrigins = origins;
  }
  if (!invalid.has('hostnames')) {
    const hosts: string[] = [];
    config.hostnames.forEach((h, i) => {
      const ok = checkHostname(f, h, [...base, 'hostnames', i]);
      if (ok !== undefined && !hosts.includes(ok)) hosts.push(ok);
    });
    config.hostnames = hosts;
  }
  if (!invalid.has('allowedHosts')) {
    const hosts: string[] = [];
    config.allowedHosts.forEach((h, i) => {
      const ok = checkAllowedHost(f, h, [...base, 'allowedHosts', i]);
      if (ok !== undefined && !hosts.includes(ok)) hosts.push(ok);
    });
    config.allowedHosts = hosts;
  }
  if (!invalid.has('maxResultBytes') && !invalid.has('maxUpstreamBodyBytes')) {
    const { maxResultBytes, maxUpstreamBodyBytes } = config;
    if (maxResultBytes > maxUpstreamBodyBytes) {
      if (picked.maxUpstreamBodyBytes !== undefined) {
        error(
          f,
          [...base, 'maxUpstreamBodyBytes'],
          `must be at least gateway.maxResultBytes (${maxResultBytes}), got ${maxUpstreamBodyBytes}`,
          `raise maxUpstreamBodyBytes to ${maxResultBytes} or more, or lower maxResultBytes`,
        );
        invalid.add('maxUpstreamBodyBytes');
      } else {
        error(
          f,
          [...base, 'maxResultBytes'],
          `must be at most gateway.maxUpstreamBodyBytes (${maxUpstreamBodyBytes}), got ${maxResultBytes}`,
          `lower maxResultBytes to ${maxUpstreamBodyBytes} or less, or raise maxUpstreamBodyBytes`,
        );
        invalid.add('maxResultBytes');
      }
    }
  }
  if (!invalid.has('callTimeoutMs') && !invalid.has('maxCallTimeoutMs')) {
    const { callTimeoutMs, maxCallTimeoutMs } = config;
    if (callTimeoutMs > maxCallTimeoutMs) {
      if (picked.maxCallTimeoutMs !== undefined) {
        error(
          f,
          [...base, 'maxCallTimeoutMs'],
          `must be at least gateway.callTimeoutMs (${callTimeoutMs}), got ${maxCallTimeoutMs}`,
          `raise maxCallTimeoutMs to ${callTimeoutMs} or more, or lower callTimeoutMs`,
        );
      } else {
        error(
          f,
          [...base, 'callTimeoutMs'],
          `must be at most gateway.maxCallTimeoutMs (${maxCallTimeoutMs}), got ${callTimeoutMs}`,
          `lower callTimeoutMs to ${maxCallTimeoutMs} or less, or raise maxCallTimeoutMs`,
        );
      }
      invalid.add('callTimeoutMs');
    }
  }
  if (Object.hasOwn(raw, 'auth')) {
    const auth = readAuth(f, raw.auth, [...base, 'auth']);
    if (auth === undefined) invalid.add('auth');
    else config.auth = auth;
  } else if (!invalid.has('host') && !isLoopbackHost(config.host)) {
    // Safe by default: no auth configured means loopback only; `"auth": false` is the way out.
    f.errors.push(bindIssue());
  }
  if (Object.hasOwn(raw, 'store')) {
    const store = readStore(f, raw.store, [...base, 'store']);
    if (store === undefined) invalid.add('store');
    else config.store = store;
  }
  return { config, invalid, alwaysLoad };
}

// --- gateway.auth ------------------------------------------------------------------------------

/** 127.0.0.0/8, ::1 (any spelling, with or without brackets) and `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  if (h === 'localhost') return true;
  const v4 = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
  if (v4) return v4.slice(1).every((n) => Number(n) <= 255);
  if (!h.includes(':')) return false;
  const bare = h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
  try {
    return new URL(`http://[${bare}]/`).hostname === '[::1]';
  } catch {
    return false;
  }
}

function bindIssue(): ConfigIssue {
  return {
    path: 'gateway.host',
    message:
      'is not a loopback address and gateway.auth is not set, so anyone who can reach the gateway could list and call every tool',
    fix: 'add gateway.auth, or set "auth": false to serve without authentication on a non-loopback address',
  };
}

/**
 * A gateway without `gateway.auth` may listen only on loopback. The loader checks the file; call
 * this again after anything (such as `--host`) changes `gateway.host`.
 */
export function checkBindSafety(config: Config): ConfigIssue | undefined {
  const { auth, host } = config.gateway;
  return auth === undefined && !isLoopbackHost(host) ? bindIssue() : undefined;
}

const ASYMMETRIC_SOURCES: readonly KeySource[] = ['jwksUrl', 'jwksFile', 'publicKey'];
const quoteList = (names: readonly string[], conjunction: 'and' | 'or') => {
  const q = names.map((n) => JSON.stringify(n));
  return q.length < 2 ? q.join('') : `${q.slice(0, -1).join(', ')} ${conjunction} ${q[q.length - 1]}`;
};

/** Reads `tenants`: each entry's known keys are interpolated, unknown keys warned about. */
function readTenants(f: Findings, raw: unknown, base: PathSegment[]): unknown {
  if (!isObject(raw)) return raw;
  return Object.fromEntries(
    keysOf(raw).map((id) => {
      const entry = raw[id];
      if (!isObject(entry)) return [id, entry];
      const picked: JsonObject = {};
      for (const key of keysOf(entry)) {
        if (TENANT_KEYS.includes(key)) picked[key] = interpolateField(f, entry[key], [...base, id, key]);
        else f.warnings.push(unknownKeyWarning([...base, id, key], TENANT_KEYS));
      }
      return [id, picked];
    }),
  );
}

/** An https URL; http is accepted only for a loopback host when `loopbackHttp` is set. */
function checkHttpsUrl(f: Findings, value: string, path: PathSegment[], loopbackHttp: boolean): boolean {
  const example = loopbackHttp
    ? 'write an https URL such as "https://auth.example.com/.well-known/jwks.json" (http only for 127.0.0.1 or localhost)'
    : 'write an https URL such as "https://auth.example.com/"';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    error(f, path, 'is not a valid absolute URL', example);
    return false;
  }
  const loopback = isLoopbackHost(url.hostname);
  if (url.protocol !== 'https:' && !(loopbackHttp && loopback && url.protocol === 'http:')) {
    const scheme = isTainted(f, path) ? 'another scheme' : url.protocol;
    const rule = loopbackHttp ? 'https: (http: only for a loopback host)' : 'https:';
    error(f, path, `must use ${rule}, got ${scheme}`, example);
    return false;
  }
  if (url.username !== '' || url.password !== '') {
    error(f, path, 'must not contain a username or password', example);
    return false;
  }
  return true;
}

function checkPublicKey(f: Findings, pem: string, path: PathSegment[]): void {
  if (pem.includes('PRIVATE KEY-----')) {
    error(
      f,
      path,
      'contains a private key; the gateway needs only the public key',
      'derive the public key with `openssl pkey -in key.pem -pubout`, and keep the private key out of the config',
    );
  } else if (!pem.includes('-----BEGIN PUBLIC KEY-----') || !pem.includes('-----END PUBLIC KEY-----')) {
    error(
      f,
      path,
      'is not a PEM public key: expected -----BEGIN PUBLIC KEY----- ... -----END PUBLIC KEY----- (SPKI)',
      'export the key as SPKI PEM, e.g. `openssl pkey -pubin -in key.pem -pubout`, writing line breaks as \\n; or use jwksFile',
    );
  }
}

function checkSecret(
  f: Findings,
  secret: string,
  path: PathSegment[],
  algorithms: string[] | undefined,
): void {
  const fix =
    // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
    'generate one with `openssl rand -base64 48`, put it in an environment variable and write "secret": "${JWT_SECRET}"';
  // HS256 unless configured otherwise; the longest hash sets the bar (RFC 7518 §3.2).
  const hmac = (algorithms ?? ['HS256']).filter((a): a is keyof typeof MIN_SECRET_BYTES =>
    Object.hasOwn(MIN_SECRET_BYTES, a),
  );
  const strictest = hmac.reduce((a, b) => (MIN_SECRET_BYTES[b] > MIN_SECRET_BYTES[a] ? b : a), 'HS256');
  const min = MIN_SECRET_BYTES[strictest];
  // Bytes, not characters: HMAC keys are byte strings (and the jose verifier uses the UTF-8 bytes of
  // the string, so `openssl rand -base64 48` gives 64 bytes, enough for HS512). The length is not shown.
  if (new TextEncoder().encode(secret).length < min) {
    const why = strictest === 'HS256' ? 'which is too weak for an HMAC key' : `which ${strictest} needs`;
    error(f, path, `is shorter than ${min} bytes, ${why}`, fix);
  } else if (!isTainted(f, path)) {
    f.warnings.push({
      path: formatPath(path),
      message: 'is written in the config file itself; anyone who can read the file can mint tokens',
      fix,
    });
  }
}

/** `algorithms`, deduplicated; `none`, unknown names and algorithms of the wrong key type are errors. */
function checkAlgorithms(
  f: Findings,
  algorithms: string[],
  source: KeySource | undefined,
  base: PathSegment[],
): string[] {
  const known = JWS_ALGORITHMS as readonly string[];
  const symmetric = SYMMETRIC_ALGORITHMS as readonly string[];
  const out: string[] = [];
  algorithms.forEach((alg, i) => {
    const path = [...base, i];
    const tainted = isTainted(f, path);
    if (alg.trim().toLowerCase() === 'none') {
      error(
        f,
        path,
        '"none" is never allowed: it would accept unsigned tokens',
        'remove "none"; list signing algorithms such as "ES256"',
      );
      return;
    }
    if (!known.includes(alg)) {
      const near = tainted ? undefined : known.find((k) => k.toLowerCase() === alg.toLowerCase());
      error(
        f,
        path,
        `expected a JWS algorithm (RS256/384/512, PS256/384/512, ES256/384/512, EdDSA or HS256/384/512), got ${showValue(alg, tainted)}`,
        near
          ? `write ${JSON.stringify(near)}; algorithm names are case-sensitive`
          : 'write an algorithm name such as "ES256"',
      );
      return;
    }
    const hmac = symmetric.includes(alg);
    if (hmac && source !== undefined && ASYMMETRIC_SOURCES.includes(source)) {
      // A public key used as an HMAC secret would let anyone forge tokens (SECURITY A5).
      error(
        f,
        path,
        `${JSON.stringify(alg)} is a shared-secret algorithm and cannot be used with ${JSON.stringify(source)}`,
        `remove ${JSON.stringify(alg)}, or verify with "secret" instead of ${JSON.stringify(source)}`,
      );
      return;
    }
    if (!hmac && source === 'secret') {
      error(
        f,
        path,
        `${JSON.stringify(alg)} needs a public key, but the key source is "secret"`,
        'use HS256, HS384 or HS512 with a secret, or replace secret with jwksUrl, jwksFile or publicKey',
      );
      return;
    }
    if (!out.includes(alg)) out.push(alg);
  });
  return out;
}

function checkResource(f: Findings, value: string, path: PathSegment[]): void {
  const example = 'write the public URL of the MCP endpoint, e.g. "https://mcp.example.com/mcp"';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    error(f, path, 'is not a valid absolute URL', example);
    return;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    const scheme = isTainted(f, path) ? 'another scheme' : url.protocol;
    error(f, path, `must use the http: or https: scheme, got ${scheme}`, example);
  } else if (url.username !== '' || url.password !== '') {
    error(f, path, 'must not contain a username or password', example);
  } else if (url.hash !== '' || value.includes('#')) {
    // RFC 8707 §2: a resource indicator must not include a fragment.
    error(f, path, 'must not contain a fragment ("#...")', example);
  }
}

/** `gateway.auth`: `false`, or an object with issuer, audience and exactly one key source. */
function readAuth(f: Findings, raw: unknown, base: PathSegment[]): AuthConfig | false | undefined {
  if (raw === false) return false;
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object with issuer, audience and a key source, or false, got ${describeKind(raw)}`,
      'write auth as {"issuer": "https://auth.example.com/", "audience": "https://mcp.example.com/mcp", "jwksUrl": "https://auth.example.com/.well-known/jwks.json"}, or false to serve without authentication',
    );
    return undefined;
  }
  const before = f.errors.length;
  const picked: JsonObject = {};
  for (const key of keysOf(raw)) {
    if (!AUTH_KEYS.includes(key)) {
      f.warnings.push(unknownKeyWarning([...base, key], AUTH_KEYS));
      continue;
    }
    picked[key] =
      key === 'tenants'
        ? readTenants(f, raw[key], [...base, key])
        : interpolateField(f, raw[key], [...base, key]);
  }
  const issues = validateShape(authEntrySchema, picked, {
    table: FIELD_TEXT.auth,
    base,
    tainted: f.interpolator.tainted,
  });
  f.errors.push(...issues);
  const has = (key: string) => picked[key] !== undefined;
  const valid = (key: string) => has(key) && !hasIssueUnder(issues, [...base, key]);

  for (const key of ['issuer', 'audience'] as const) {
    if (has(key)) continue;
    const text = FIELD_TEXT.auth[key]!;
    error(
      f,
      [...base, key],
      `is missing: tokens are checked against their "${key === 'issuer' ? 'iss' : 'aud'}" claim`,
      text.fix,
    );
  }

  const sources = KEY_SOURCES.filter(has);
  if (sources.length === 0) {
    error(
      f,
      base,
      `has no key source: set exactly one of ${quoteList(KEY_SOURCES, 'or')}`,
      'add jwksUrl for an identity provider, jwksFile for keys made by `manifold keys`, publicKey for a PEM key, or secret for a shared HS256 secret',
    );
  } else if (sources.length > 1) {
    error(
      f,
      base,
      `has several key sources (${quoteList(sources, 'and')}); set exactly one`,
      `keep one of ${quoteList(sources, 'or')} and remove the others`,
    );
  }
  const source = sources.length === 1 ? sources[0] : undefined;
  if (valid('jwksUrl')) checkHttpsUrl(f, picked.jwksUrl as string, [...base, 'jwksUrl'], true);
  if (valid('publicKey')) checkPublicKey(f, picked.publicKey as string, [...base, 'publicKey']);
  let algorithms: string[] | undefined;
  if (valid('algorithms')) {
    algorithms = checkAlgorithms(f, picked.algorithms as string[], source, [...base, 'algorithms']);
  }
  if (valid('secret')) checkSecret(f, picked.secret as string, [...base, 'secret'], algorithms);
  if (valid('authorizationServers')) {
    (picked.authorizationServers as string[]).forEach((url, i) => {
      checkHttpsUrl(f, url, [...base, 'authorizationServers', i], false);
    });
  }
  if (valid('resource')) checkResource(f, picked.resource as string, [...base, 'resource']);

  const tenants: Record<string, TenantConfig> = Object.create(null);
  if (valid('tenants')) {
    const given = picked.tenants as Record<string, { grants?: string[]; callsPerMinute?: number }>;
    for (const id of Object.keys(given)) {
      const entry = given[id]!;
      const tenant: TenantConfig = {};
      if (entry.grants !== undefined) {
        tenant.grants = [...entry.grants];
        entry.grants.forEach((g, i) => {
          if (!g.startsWith('tools:')) return;
          f.warnings.push({
            path: formatPath([...base, 'tenants', id, 'grants', i]),
            message:
              'starts with "tools:", but tenant grants are patterns over exposed tool names, so it matches nothing',
            fix: 'drop the "tools:" part, e.g. "github__*"; "tools:" belongs only in token scopes',
          });
        });
      }
      if (entry.callsPerMinute !== undefined) tenant.callsPerMinute = entry.callsPerMinute;
      Object.defineProperty(tenants, id, {
        value: tenant,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }

  if (f.errors.length > before || source === undefined) return undefined;
  const value = (key: string) => picked[key] as never;
  const auth: AuthConfig = {
    issuer: value('issuer'),
    audience: value('audience'),
    clockToleranceSeconds: has('clockToleranceSeconds')
      ? value('clockToleranceSeconds')
      : AUTH_DEFAULTS.clockToleranceSeconds,
    tenantClaim: has('tenantClaim') ? value('tenantClaim') : AUTH_DEFAULTS.tenantClaim,
    tenants,
    authorizationServers: has('authorizationServers')
      ? [...new Set(picked.authorizationServers as string[])]
      : [],
    jwksCooldownSeconds: has('jwksCooldownSeconds')
      ? value('jwksCooldownSeconds')
      : AUTH_DEFAULTS.jwksCooldownSeconds,
    jwksTimeoutMs: has('jwksTimeoutMs') ? value('jwksTimeoutMs') : AUTH_DEFAULTS.jwksTimeoutMs,
  };
  auth[source] = value(source);
  if (algorithms !== undefined) auth.algorithms = algorithms;
  if (has('grantsClaim')) auth.grantsClaim = value('grantsClaim');
  if (has('resource')) auth.resource = value('resource');
  return auth;
}

// --- servers -----------------------------------------------------------------------------------

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

interface PrefixClaim {
  server: string;
  prefix: string;
  /** Where a collision is reported: the explicit prefix, or the entry itself. */
  path: PathSegment[];
  tainted: boolean;
}

function checkUrl(f: Findings, url: string, path: PathSegment[]): void {
  const example = 'write an absolute URL such as "https://example.com/mcp"';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    error(f, path, 'is not a valid absolute URL', example);
    return;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    const scheme = isTainted(f, path) ? 'another scheme' : parsed.protocol;
    error(f, path, `must use the http: or https: scheme, got ${scheme}`, example);
  }
  if (parsed.username !== '' || parsed.password !== '') {
    error(
      f,
      path,
      'must not contain a username or password',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: user-facing text about the ${VAR} syntax
      'remove the credentials from the URL and send them in headers, e.g. "headers": {"Authorization": "Bearer ${TOKEN}"}',
    );
  }
}

function hasCharAbove(value: string, max: number): boolean {
  for (let k = 0; k < value.length; k++) if (value.charCodeAt(k) > max) return true;
  return false;
}

function checkHeaders(f: Findings, headers: JsonObject, base: PathSegment[]): void {
  const seen = new Map<string, string>();
  for (const name of keysOf(headers)) {
    const path = [...base, name];
    const value = headers[name];
    if (!HEADER_NAME.test(name)) {
      error(
        f,
        path,
        "header name is not a valid HTTP token (letters, digits and !#$%&'*+-.^_`|~ only)",
        'rename the header, e.g. "X-Api-Key"',
      );
    }
    const lower = name.toLowerCase();
    const earlier = seen.get(lower);
    if (earlier !== undefined) {
      error(
        f,
        path,
        `header ${JSON.stringify(name)} repeats ${JSON.stringify(earlier)}; header names are case-insensitive`,
        'keep one of the two headers',
      );
    } else {
      seen.set(lower, name);
    }
    if (typeof value !== 'string') continue;
    const fromEnv = isTainted(f, path);
    if (/[\r\n\0]/.test(value)) {
      error(
        f,
        path,
        `header value contains a line break or NUL character${fromEnv ? ' (after substituting environment variables)' : ''}`,
        fromEnv
          ? "remove the line break from the environment variable's value; it is often a trailing newline"
          : 'remove the line break or NUL character from the value',
      );
    } else if (hasCharAbove(value, 0xff)) {
      error(
        f,
        path,
        `header value contains characters outside Latin-1, which HTTP headers cannot carry${fromEnv ? ' (after substituting environment variables)' : ''}`,
        'use only ASCII characters in header values',
      );
    }
  }
}

function checkStdioStrings(f: Findings, picked: JsonObject, base: PathSegment[]): void {
  const nul = (value: unknown, path: PathSegment[]) => {
    if (typeof value === 'string' && value.includes('\0')) {
      error(f, path, 'contains a NUL character', 'remove the NUL character; processes cannot receive it');
    }
  };
  nul(picked.command, [...base, 'command']);
  nul(picked.cwd, [...base, 'cwd']);
  if (Array.isArray(picked.args)) {
    for (const [i, a] of picked.args.entries()) nul(a, [...base, 'args', i]);
  }
  if (isObject(picked.env)) {
    for (const key of keysOf(picked.env)) {
      const path = [...base, 'env', key];
      if (key === '' || key.includes('=') || key.includes('\0')) {
        error(
          f,
          path,
          'environment variable name must not be empty or contain "=" or NUL',
          'rename the variable, e.g. "API_KEY"',
        );
      }
      nul(picked.env[key], path);
    }
  }
}

function readTools(f: Findings, raw: unknown, base: PathSegment[]): unknown {
  if (!isObject(raw)) return raw;
  const picked: JsonObject = {};
  for (const key of keysOf(raw)) {
    if (TOOLS_KEYS.includes(key)) picked[key] = interpolateField(f, raw[key], [...base, key]);
    else f.warnings.push(unknownKeyWarning([...base, key], TOOLS_KEYS));
  }
  return picked;
}

function readServer(
  f: Findings,
  mapKey: string,
  name: string,
  raw: unknown,
  gateway: GatewayRead,
  claims: PrefixClaim[],
): ServerConfig | undefined {
  const base: PathSegment[] = [mapKey, name];
  const before = f.errors.length;

  const badName = nameProblems(name, 'server name');
  if (badName.length > 0) {
    error(f, base, badName.join('; '), `rename the server, e.g. to ${JSON.stringify(suggestName(name))}`);
  }
  if (!isObject(raw)) {
    error(
      f,
      base,
      `expected an object describing the server, got ${describeKind(raw)}`,
      'write the entry as {"command": "...", "args": [...]} for a local server or {"url": "https://..."} for a remote one',
    );
    return undefined;
  }

  const picked: JsonObject = {};
  for (const key of keysOf(raw)) {
    if (!SERVER_KEYS.includes(key)) {
      f.warnings.push(unknownKeyWarning([...base, key], SERVER_KEYS));
      continue;
    }
    picked[key] =
      key === 'tools'
        ? readTools(f, raw[key], [...base, key])
        : interpolateField(f, raw[key], [...base, key]);
  }
  const issues = validateShape(serverSchema, picked, {
    table: FIELD_TEXT.server,
    base,
    tainted: f.interpolator.tainted,
  });
  f.errors.push(...issues);
  const has = (key: string) => picked[key] !== undefined;
  const valid = (key: string) => has(key) && !hasIssueUnder(issues, [...base, key]);

  // Transport: explicit, or inferred from command / url.
  let type: TransportKind | undefined;
  let inferred = false;
  if (has('type')) {
    if (valid('type')) type = picked.type === 'http' ? 'streamable-http' : (picked.type as TransportKind);
  } else if (has('command') && has('url')) {
    error(
      f,
      base,
      'has both "command" and "url", so the transport is ambiguous',
      'remove one of them: keep command, args, env and cwd for a local stdio server, or url and headers for a remote one',
    );
  } else if (has('command')) {
    type = 'stdio';
    inferred = true;
  } else if (has('url')) {
    type = 'streamable-http';
    inferred = true;
  } else {
    error(
      f,
      base,
      'has neither "command" nor "url", so there is nothing to connect to',
      'add "command" to start a local server, or "url" to connect to a remote one',
    );
  }

  if (type !== undefined) {
    const stdio = type === 'stdio';
    const how = inferred ? ` (inferred from "${stdio ? 'command' : 'url'}")` : '';
    for (const key of stdio ? HTTP_ONLY_KEYS : STDIO_ONLY_KEYS) {
      if (!has(key)) continue;
      error(
        f,
        [...base, key],
        `"${key}" applies only to ${stdio ? 'streamable-http and sse' : 'stdio'} servers, but this server uses ${type}${how}`,
        stdio
          ? `remove ${key}; a stdio server is started with command, args, env and cwd`
          : `remove ${key}; a ${type} server is reached through url and headers`,
      );
    }
    if (stdio && !has('command')) {
      error(
        f,
        [...base, 'command'],
        'is missing: a stdio server needs a command to start',
        'set command to the program to start, e.g. "npx"',
      );
    }
    if (!stdio && !has('url')) {
      error(
        f,
        [...base, 'url'],
        `is missing: a ${type} server needs a url`,
        'set url to the server endpoint, e.g. "https://example.com/mcp"',
      );
    }
    if (!stdio && valid('url')) checkUrl(f, picked.url as string, [...base, 'url']);
    if (!stdio && valid('headers')) checkHeaders(f, picked.headers as JsonObject, [...base, 'headers']);
    if (stdio) checkStdioStrings(f, picked, base);
  }

  // Prefix.
  let prefix: string | false = name;
  let prefixTainted = false;
  if (valid('prefix')) {
    prefix = picked.prefix as string | false;
    prefixTainted = isTainted(f, [...base, 'prefix']);
    if (typeof prefix === 'string') {
      const bad = nameProblems(prefix, 'prefix');
      if (bad.length > 0) {
        error(
          f,
          [...base, 'prefix'],
          bad.join('; '),
          prefixTainted
            ? 'set prefix to a valid name, or to false'
            : `set prefix to a valid name such as ${JSON.stringify(suggestName(prefix))}, or to false`,
        );
      }
    }
  }
  const disabled = valid('disabled') ? (picked.disabled as boolean) : false;
  if (typeof prefix === 'string' && !disabled && !(has('prefix') && !valid('prefix'))) {
    claims.push({
      server: name,
      prefix,
      path: has('prefix') ? [...base, 'prefix'] : base,
      tainted: prefixTainted,
    });
  }

  // Tools.
  const tools = (valid('tools') ? picked.tools : {}) as { allow?: string[]; deny?: string[] };
  if (tools.allow !== undefined && tools.allow.length === 0) {
    f.warnings.push({
      path: formatPath([...base, 'tools', 'allow']),
      message: 'is empty, so no tools from this server are exposed',
      fix: 'add tool names or globs, or remove allow to expose every tool',
    });
  }

  // Timeout.
  let timeoutMs = gateway.config.callTimeoutMs;
  if (valid('timeoutMs')) {
    timeoutMs = picked.timeoutMs as number;
    const max = gateway.config.maxCallTimeoutMs;
    if (!gateway.invalid.has('maxCallTimeoutMs') && timeoutMs > max) {
      error(
        f,
        [...base, 'timeoutMs'],
        `must be at most gateway.maxCallTimeoutMs (${max}), got ${timeoutMs}`,
        `lower timeoutMs to ${max} or less, or raise gateway.maxCallTimeoutMs`,
      );
    }
  }

  // Result cap.
  let maxResultBytes = gateway.config.maxResultBytes;
  if (valid('maxResultBytes')) {
    maxResultBytes = picked.maxResultBytes as number;
    const max = gateway.config.maxUpstreamBodyBytes;
    if (!gateway.invalid.has('maxUpstreamBodyBytes') && maxResultBytes > max) {
      error(
        f,
        [...base, 'maxResultBytes'],
        `must be at most gateway.maxUpstreamBodyBytes (${max}), got ${maxResultBytes}`,
        `lower maxResultBytes to ${max} or less, or raise gateway.maxUpstreamBodyBytes`,
      );
    }
  }

  // Disclosure budget: alwaysLoad wins over any budget.
  let budgetTokens = gateway.config.disclosure.budgetTokens;
  if (valid('budgetTokens')) budgetTokens = picked.budgetTokens as number | 'off';
  if (gateway.config.disclosure.alwaysLoad.includes(name)) {
    if (valid('budgetTokens') && budgetTokens !== 'off') {
      f.warnings.push({
        path: formatPath([...base, 'budgetTokens']),
        message:
          'is ignored: this server is listed in gateway.disclosure.alwaysLoad, so its schemas are always inlined',
        fix: 'remove budgetTokens, or remove the server from gateway.disclosure.alwaysLoad',
      });
    }
    budgetTokens = 'off';
  }

  if (f.errors.length > before || type === undefined) return undefined;
  const server: ServerConfig = {
    name,
    type,
    args: (picked.args as string[] | undefined) ?? [],
    env: (picked.env as Record<string, string> | undefined) ?? {},
    headers: (picked.headers as Record<string, string> | undefined) ?? {},
    prefix,
    tools: { ...(tools.allow ? { allow: tools.allow } : {}), deny: tools.deny ?? [] },
    timeoutMs,
    disabled,
    maxResultBytes,
    budgetTokens,
  };
  if (type === 'stdio') {
    server.command = picked.command as string;
    if (has('cwd')) server.cwd = picked.cwd as string;
  } else {
    server.url = picked.url as string;
  }
  return server;
}

function checkPrefixes(f: Findings, claims: PrefixClaim[]): void {
  const first = new Map<string, PrefixClaim>();
  for (const claim of claims) {
    const key = claim.prefix.toLowerCase();
    const earlier = first.get(key);
    if (!earlier) {
      first.set(key, claim);
      continue;
    }
    const pair = `servers ${JSON.stringify(earlier.server)} and ${JSON.stringify(claim.server)}`;
    let message: string;
    if (earlier.tainted || claim.tainted) message = `${pair} have the same prefix`;
    else if (earlier.prefix === claim.prefix)
      message = `${pair} both use the prefix ${JSON.stringify(claim.prefix)}`;
    else {
      message = `${pair} use the prefixes ${JSON.stringify(earlier.prefix)} and ${JSON.stringify(claim.prefix)}, which differ only in case`;
    }
    error(
      f,
      claim.path,
      message,
      'give one of them a different "prefix"; the prefix defaults to the server name',
    );
  }
}

function readServers(f: Findings, raw: JsonObject, gateway: GatewayRead): ServerConfig[] {
  const maps: string[] = [];
  if (raw.mcpServers !== undefined) maps.push('mcpServers');
  if (raw.servers !== undefined) maps.push('servers');
  const example =
    'add an entry under mcpServers, e.g. "mcpServers": {"everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]}}';
  if (maps.length === 0) {
    error(f, ['mcpServers'], 'no servers configured', example);
    return [];
  }
  if (maps.length === 2) {
    error(
      f,
      ['servers'],
      'both "mcpServers" and "servers" are present; use one of them',
      'move the entries from servers into mcpServers and delete servers',
    );
  }
  const servers: ServerConfig[] = [];
  for (const mapKey of maps) {
    const map = raw[mapKey];
    if (!isObject(map)) {
      error(
        f,
        [mapKey],
        `expected an object that maps server names to server entries, got ${describeKind(map)}`,
        `write ${mapKey} as {"name": {"command": "..."}}`,
      );
      continue;
    }
    const names = keysOf(map);
    if (names.length === 0) {
      error(f, [mapKey], 'no servers configured', example);
      continue;
    }
    const claims: PrefixClaim[] = [];
    for (const name of names) {
      const server = readServer(f, mapKey, name, map[name], gateway, claims);
      if (server) servers.push(server);
    }
    checkPrefixes(f, claims);
  }
  return servers;
}

/** Every `gateway.disclosure.alwaysLoad` entry must name a server in the file (disabled or not). */
function checkAlwaysLoad(f: Findings, raw: JsonObject, gateway: GatewayRead): void {
  if (gateway.alwaysLoad.length === 0) return;
  const known: string[] = [];
  for (const mapKey of ['mcpServers', 'servers']) {
    const map = raw[mapKey];
    if (isObject(map)) known.push(...keysOf(map));
  }
  const listed = known.map((n) => JSON.stringify(n)).join(', ');
  gateway.alwaysLoad.forEach((name, i) => {
    if (known.includes(name)) return;
    const path = ['gateway', 'disclosure', 'alwaysLoad', i];
    const tainted = isTainted(f, path);
    const near = tainted ? undefined : closestKey(name, known);
    let fix: string;
    if (known.length === 0) fix = 'add the server under mcpServers, or remove it from alwaysLoad';
    else if (near !== undefined)
      fix = `did you mean ${JSON.stringify(near)}? The configured servers are ${listed}`;
    else fix = `use one of the configured server names: ${listed}; or remove the entry`;
    const what = tainted ? 'a server' : `server ${JSON.stringify(name)}`;
    error(f, path, `names ${what}, which is not configured`, fix);
  });
}

function validate(raw: unknown, env: Env, initial: ConfigIssue[]): ConfigResult {
  const errors = [...initial];
  const f: Findings = { errors, warnings: [], interpolator: new Interpolator(env, errors) };
  if (!isObject(raw)) {
    error(
      f,
      [],
      `expected a JSON object at the top level, got ${describeKind(raw)}`,
      'wrap the configuration in { } with an "mcpServers" map inside',
    );
    return { ok: false, errors: f.errors, warnings: f.warnings };
  }
  for (const key of keysOf(raw)) {
    if (!(TOP_LEVEL_KEYS as readonly string[]).includes(key))
      f.warnings.push(unknownKeyWarning([key], TOP_LEVEL_KEYS));
  }
  const gateway = readGateway(f, raw.gateway);
  const servers = readServers(f, raw, gateway);
  checkAlwaysLoad(f, raw, gateway);
  if (f.errors.length > 0) return { ok: false, errors: f.errors, warnings: f.warnings };
  const config: Config = { gateway: gateway.config, servers };
  const secrets = f.interpolator.secrets;
  // A shared secret is redacted from logs even when it was written literally.
  const secret = config.gateway.auth ? config.gateway.auth.secret : undefined;
  if (secret !== undefined && !secrets.includes(secret)) secrets.push(secret);
  return { ok: true, config, warnings: f.warnings, secrets };
}

// ---------------------------------------------------------------------------------------------
// Public API

/**
 * Parses and validates the text of a config file. `env` supplies `${VAR}` values; `source` names
 * the file in the fix for a JSON syntax error.
 */
export function parseConfig(
  text: string,
  env: Record<string, string | undefined>,
  source?: string,
): ConfigResult {
  const read = readJson(text, source);
  if (!read.ok) return { ok: false, errors: [read.error], warnings: [] };
  const duplicates = read.duplicates.map(
    (path): ConfigIssue => ({
      path: formatPath(path),
      message: `duplicate key ${JSON.stringify(String(path[path.length - 1]))}; JSON keeps only the last one`,
      fix: 'remove or rename one of the two entries',
    }),
  );
  return validate(read.value, env, duplicates);
}

/** Validates an already-parsed config value (for example one built in code or by a test). */
export function parseConfigObject(raw: unknown, env: Record<string, string | undefined>): ConfigResult {
  return validate(raw, env, []);
}

const oneLine = (s: string) => s.replace(/[\r\n]+/g, ' ');

/** Human text, one problem per line: `path: message (fix: ...)`, prefixed by `source: ` if given. */
export function formatIssues(issues: ConfigIssue[], source?: string): string {
  return issues
    .map((issue) => {
      const where = `${source ? `${source}: ` : ''}${issue.path ? `${issue.path}: ` : ''}`;
      const fix = issue.fix ? ` (fix: ${oneLine(issue.fix)})` : '';
      return `${where}${oneLine(issue.message)}${fix}`;
    })
    .join('\n');
}
