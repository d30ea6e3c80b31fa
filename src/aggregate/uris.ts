/**
 * Resource URIs through the gateway. A URI stays as the upstream wrote it wherever it is unique
 * across the configured servers; where two servers publish the same URI (or template), the first
 * in config order keeps it and each later one gets a rewritten form that
 *
 * - keeps the scheme, so a host still knows what to do with it (a `ui://` resource stays `ui://`);
 * - stays a valid URI: the server's label is prepended to the authority (`scheme://label.rest`)
 *   or, for a URI without one, to the path (`scheme:label.rest`); labels are `[A-Za-z0-9_-]`,
 *   which are legal in both places;
 * - round-trips without a table: stripping the label gives the original back, so a URI expanded
 *   from a rewritten template routes too.
 *
 * @example
 * rewriteUri('file:///notes.txt', 'memory'); // 'file://memory./notes.txt'
 * rewriteUri('ui://widget/card', 'b');       // 'ui://b.widget/card'
 * unrewriteUri('ui://b.widget/card', 'b');   // 'ui://widget/card'
 */

const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):(\/\/)?/;

export function rewriteUri(uri: string, label: string): string {
  const m = SCHEME.exec(uri);
  // Not a URI at all: give it one, in the gateway's own scheme.
  if (!m) return `manifold://${label}./${encodeURIComponent(uri)}`;
  const head = m[0];
  return `${head}${label}.${uri.slice(head.length)}`;
}

/** The original of a URI rewritten for `label`, or undefined when it is not one. */
export function unrewriteUri(uri: string, label: string): string | undefined {
  if (uri.startsWith(`manifold://${label}./`)) {
    try {
      return decodeURIComponent(uri.slice(`manifold://${label}./`.length));
    } catch {
      return undefined;
    }
  }
  const m = SCHEME.exec(uri);
  if (!m || m[1] === 'manifold') return undefined;
  const head = m[0];
  const rest = uri.slice(head.length);
  return rest.startsWith(`${label}.`) ? `${head}${rest.slice(label.length + 1)}` : undefined;
}

/**
 * A matcher for the URIs an RFC 6570 template can expand to, for routing a read to the server
 * whose template it came from. Expressions match what their operator may expand to: `{x}` one
 * path segment, `{+x}` and `{#x}` anything, `{/x}` slash-led segments, `{?x}` and `{&x}` a query,
 * `{.x}` and `{;x}` their labelled forms. Literal text must match exactly.
 */
export function templateMatcher(template: string): (uri: string) => boolean {
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
