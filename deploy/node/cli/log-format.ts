/**
 * The terminal's log format: one readable line per event instead of a JSON object, for a person
 * watching `manifold serve` (#16). JSON stays the format for pipes and files, where a program reads
 * it. The line is made from the finished (already redacted) JSON line.
 *
 * @example prettyLine('{"time":"2026-12-02T10:00:00.123Z","level":"warn","event":"upstream.exited","server":"gh","code":1}')
 * // '10:00:00.123 WARN  upstream.exited [gh] code=1'
 */
export type LogFormat = 'json' | 'pretty';

export const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty'];

const LEVELS: Record<string, string> = { debug: 'DEBUG', info: 'INFO ', warn: 'WARN ', error: 'ERROR' };

function value(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? String(v);
}

export function prettyLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const { time, level, event, server, ...rest } = o;
  const clock = typeof time === 'string' ? time.slice(11, 23) : '';
  const head = `${clock} ${LEVELS[String(level)] ?? String(level)} ${String(event)}`;
  const where = typeof server === 'string' ? ` [${server}]` : '';
  const fields = Object.entries(rest).map(([k, v]) => ` ${k}=${value(v)}`);
  return `${head}${where}${fields.join('')}`;
}
