/**
 * The normal form of resource URIs (RFC 3986 §6.2.2), which every resources filter, grant and
 * template match reads (SECURITY J4), and the form of the patterns matched against it.
 */
import { MAX_URI } from './item-bounds.js';

/** A URI's scheme (RFC 3986 §3.1) and whether `//` follows it. */
export const URI_SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):(\/\/)?/;

/** A URI in normal form, or why it is refused. */
export type NormalizedUri = { ok: true; uri: string } | { ok: false; reason: string };

/** RFC 3986 §2.3: percent-encoded, these octets mean the same as the characters themselves. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const PERCENT = /%([0-9A-Fa-f]{2})/g;
/** RFC 3986 appendix B: the components of any URI reference, as every conforming parser sees them. */
const COMPONENTS = /^(?:[^:/?#]+:)?(?:\/\/[^/?#]*)?([^?#]*)/;
/**
 * Whitespace, controls and `\`, which are not URI characters (RFC 3986 §2) and which parsers
 * disagree on: WHATWG drops tabs and newlines and reads `\` as `/` in file: and http(s):.
 */
function ambiguous(raw: string): boolean {
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f || c === 0x5c) return true;
  }
  return false;
}

/** §6.2.2.1 and §6.2.2.2: hex digits in upper case, unreserved characters decoded. */
function normalizePercent(text: string): string {
  return text.replace(PERCENT, (triplet, hex: string) => {
    const c = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(c) ? c : triplet.toUpperCase();
  });
}

/**
 * The normal form of a resource URI (RFC 3986 §6.2.2): scheme and host in lower case, percent
 * encodings in upper case with unreserved characters decoded, and dot segments removed (§5.2.4),
 * `%2e` and `%2E` counting as the dot they encode. The standard URL parser does the parsing; it
 * removes dot segments from every hierarchical path, but keeps the case of a host it does not
 * know (a custom scheme's), and leaves an opaque path (`memo:a/../b`) alone. So the result is
 * read back as RFC 3986 reads it, and refused when its path still holds a dot segment, or an
 * encoded `/`, `\` or NUL that a server decoding before it splits would read as a separator.
 * Whitespace, controls and `\` are refused outright: parsers disagree on them.
 *
 * @example
 * normalizeUri('FILE:///public/%2E%2E/secret/%7ekey'); // { ok: true, uri: 'file:///secret/~key' }
 * normalizeUri('memo://Notes/a/./b');                  // { ok: true, uri: 'memo://notes/a/b' }
 * normalizeUri('memo:a/../b');                          // { ok: false, reason: '…dot segment…' }
 * normalizeUri('file:///public/..%2Fsecret');          // { ok: false, reason: '…encoded…' }
 */
export function normalizeUri(raw: string): NormalizedUri {
  if (raw.length === 0) return { ok: false, reason: 'a resource URI must not be empty' };
  if (raw.length > MAX_URI)
    return { ok: false, reason: `a resource URI must be at most ${MAX_URI} characters long` };
  if (ambiguous(raw)) {
    return {
      ok: false,
      reason: 'a resource URI must not contain whitespace, control characters or a backslash',
    };
  }
  let url: URL;
  try {
    // Decoded first, so that an encoded dot is removed as a dot segment (§6.2.2.3 after §6.2.2.2).
    url = new URL(normalizePercent(raw));
  } catch {
    return { ok: false, reason: 'a resource URI must be an absolute URI (RFC 3986), with a scheme' };
  }
  // The parser lower-cases a special scheme's host (http, file…) but not a custom scheme's.
  const host = url.hostname.toLowerCase();
  if (host !== url.hostname) url.hostname = host;
  const uri = normalizePercent(url.href);
  if (uri.length > MAX_URI)
    return { ok: false, reason: `a resource URI must be at most ${MAX_URI} characters long` };
  const path = COMPONENTS.exec(uri)?.[1] ?? '';
  if (path.split('/').some((segment) => segment === '.' || segment === '..')) {
    return {
      ok: false,
      reason: 'a resource URI must not keep a dot segment ("." or "..") in its path after normalisation',
    };
  }
  if (/%(?:2F|5C|00)/.test(path)) {
    return {
      ok: false,
      reason: 'a resource URI must not contain an encoded "/", "\\" or NUL (%2F, %5C, %00) in its path',
    };
  }
  return { ok: true, uri };
}

/**
 * A URI pattern (a resources filter or grant glob, or a URI template) in the form of the URIs it is
 * matched against: scheme and authority in lower case, percent encodings normalised as
 * normalizeUri does. The authority ends at the first `/`, not at `?`, which is a wildcard in a glob.
 *
 * @example
 * normalizeUriPattern('MEMO://Notes/%7e*'); // 'memo://notes/~*'
 */
export function normalizeUriPattern(pattern: string): string {
  const m = URI_SCHEME.exec(pattern);
  if (!m) return normalizePercent(pattern);
  const head = m[0].toLowerCase();
  if (!m[2]) return normalizePercent(head + pattern.slice(m[0].length));
  const slash = pattern.indexOf('/', m[0].length);
  const end = slash === -1 ? pattern.length : slash;
  // The host is case-insensitive, the user information before it is not.
  const authority = pattern.slice(m[0].length, end);
  const at = authority.lastIndexOf('@') + 1;
  const folded = authority.slice(0, at) + authority.slice(at).toLowerCase();
  return normalizePercent(head + folded + pattern.slice(end));
}
