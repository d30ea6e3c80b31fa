/**
 * Secret redaction, for log lines and for every error text a client is shown (#13.4, #13.13).
 * A secret appears in text as itself, or JSON-escaped when the text is (or embeds) JSON: a value
 * with `"` or `\` in it is written `\"` / `\\` in a log line, so both forms are replaced.
 */
export type Redactor = (text: string) => string;

const MIN_SECRET = 4;

export function redactor(secrets: readonly string[]): Redactor {
  const forms = new Set<string>();
  for (const s of secrets) {
    if (s.length < MIN_SECRET) continue;
    forms.add(s);
    const escaped = JSON.stringify(s).slice(1, -1);
    if (escaped !== s) forms.add(escaped);
    // Escaped once more: JSON carried inside a JSON string (an upstream body in a log field).
    const twice = JSON.stringify(escaped).slice(1, -1);
    if (twice !== escaped) forms.add(twice);
  }
  // Longest first, so a secret that contains another is replaced whole.
  const list = [...forms].sort((a, b) => b.length - a.length);
  if (list.length === 0) return (text) => text;
  return (text) => {
    let out = text;
    for (const f of list) if (out.includes(f)) out = out.split(f).join('[redacted]');
    return out;
  };
}
