/**
 * Resource URIs through the gateway. A URI stays as the upstream wrote it wherever it is unique
 * across the configured servers; where two servers publish the same URI (or template), the first
 * in config order keeps it and each later one gets a rewritten form that
 *
 * - keeps the scheme, so a host still knows what to do with it (a `ui://` resource stays `ui://`);
 * - stays a valid URI: the server's label is prepended to the authority (`scheme://label.rest`)
 *   or, for a URI without one, to the path (`scheme:label.rest`); labels are `[A-Za-z0-9_-]`,
 *   which are legal in both places, and lower case in an authority, where case does not count;
 * - round-trips without a table: stripping the label gives the original back, so a URI expanded
 *   from a rewritten template routes too.
 *
 * Every URI a client names is normalised (guards/uri-normal.ts) before it meets a filter, a grant
 * or a template, and the normalised form is what the upstream is asked for.
 *
 * @example
 * rewriteUri('file:///notes.txt', 'memory'); // 'file://memory./notes.txt'
 * rewriteUri('ui://widget/card', 'b');       // 'ui://b.widget/card'
 * unrewriteUri('ui://b.widget/card', 'b');   // 'ui://widget/card'
 */
import { normalizeUriPattern, URI_SCHEME } from '../guards/uri-normal.js';

export function rewriteUri(uri: string, label: string): string {
  const m = URI_SCHEME.exec(uri);
  // Not a URI at all: give it one, in the gateway's own scheme.
  if (!m) return `manifold://${label.toLowerCase()}./${encodeURIComponent(uri)}`;
  const head = m[0];
  // In an authority the label is lower case, as a normalised URI's host is (RFC 3986 §6.2.2.1).
  return `${head}${m[2] ? label.toLowerCase() : label}.${uri.slice(head.length)}`;
}

/** The original of a URI rewritten for `label`, or undefined when it is not one. */
export function unrewriteUri(uri: string, label: string): string | undefined {
  const host = label.toLowerCase();
  if (uri.startsWith(`manifold://${host}./`)) {
    try {
      return decodeURIComponent(uri.slice(`manifold://${host}./`.length));
    } catch {
      return undefined;
    }
  }
  const m = URI_SCHEME.exec(uri);
  if (!m || m[1] === 'manifold') return undefined;
  const head = m[0];
  const rest = uri.slice(head.length);
  const mark = `${m[2] ? host : label}.`;
  return rest.startsWith(mark) ? `${head}${rest.slice(mark.length)}` : undefined;
}

/**
 * A matcher for the normalised URIs an RFC 6570 template can expand to, for routing a read to the
 * server whose template it came from. Expressions match what their operator may expand to: `{x}`
 * one path segment, `{+x}` and `{#x}` anything, `{/x}` slash-led segments, `{?x}` and `{&x}` a
 * query, `{.x}` and `{;x}` their labelled forms. Literal text, in normal form, must match exactly.
 */
export function templateMatcher(raw: string): (uri: string) => boolean {
  const template = normalizeUriPattern(raw);
  // Upstream text: a template with many open-ended expressions would make a backtracking regex
  // slow on a hostile URI, so such templates are never used for routing.
  const expressions = template.match(/\{[^}]*\}/g) ?? [];
  if (template.length > 1024 || expressions.length > 8) return () => false;
  let pattern = '^';
  let last = 0;
  const expr = /\{([+#./;?&]?)[^}]*\}/g;
  for (let m = expr.exec(template); m; m = expr.exec(template)) {
    pattern += escapeRegex(template.slice(last, m.index));
    switch (m[1]) {
      case '+':
      case '#':
        pattern += '.*';
        break;
      case '/':
        pattern += '(?:/[^/?#]*)*';
        break;
      case '?':
      case '&':
        pattern += '(?:[?&][^#]*)?';
        break;
      case '.':
        pattern += '(?:\\.[^/?#.]*)*';
        break;
      case ';':
        pattern += '(?:;[^/?#]*)*';
        break;
      default:
        pattern += '[^/?#]*';
    }
    last = m.index + m[0].length;
  }
  pattern += `${escapeRegex(template.slice(last))}$`;
  let re: RegExp;
  try {
    re = new RegExp(pattern, 's');
  } catch {
    return () => false;
  }
  // Bounded input as well: with at most 8 expressions and 2048 characters the match stays cheap.
  return (uri) => uri.length <= 2048 && re.test(uri);
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
