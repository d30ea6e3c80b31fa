/**
 * The Node gateway's log on stderr: JSON lines for pipes and files, where a program reads them,
 * or one readable line per event for a person at a terminal (`--log-format pretty`).
 */
import { createJsonLogger, type Logger, type LogLevel } from '../../../src/lib/log.js';

export type LogFormat = 'json' | 'pretty';

export const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty'];

/** The logger `manifold` runs with: `pretty` by default when stderr is a terminal. */
export function nodeLogger(
  level: LogLevel,
  redact: readonly string[] = [],
  format: LogFormat = process.stderr.isTTY ? 'pretty' : 'json',
): Logger {
  const write = batchedStderr();
  return createJsonLogger({
    level,
    redact,
    write: format === 'pretty' ? (l) => write(prettyLine(l)) : write,
  });
}

const LEVELS: Record<string, string> = { debug: 'DEBUG', info: 'INFO ', warn: 'WARN ', error: 'ERROR' };

function value(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? String(v);
}

/**
 * One finished (already redacted) JSON line as a readable one.
 *
 * @example prettyLine('{"time":"2026-12-02T10:00:00.123Z","level":"warn","event":"upstream.exited","server":"gh","code":1}')
 * // '10:00:00.123 WARN  upstream.exited [gh] code=1'
 */
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

/** Lines are written together, at most this often: a write per audit line costs more than the rest of a relayed call. */
const LOG_FLUSH_MS = 20;
/** Or once this many characters are pending. */
const LOG_FLUSH_CHARS = 64 * 1024;

function batchedStderr(): (line: string) => void {
  // Whoever read stderr went away (a closed terminal: SIGHUP reloads now instead of stopping; a
  // log pipe whose reader died). The write fails with EIO/EPIPE as an 'error' event, which would
  // end the process: the gateway goes on serving, and its lines are dropped from then on.
  let gone = false;
  process.stderr.on('error', () => {
    gone = true;
  });
  const batched = batchedLines((chunk) => {
    if (!gone) process.stderr.write(chunk);
  });
  process.once('exit', batched.flush);
  return batched.write;
}

/**
 * Lines batched for `sink`: written together every `LOG_FLUSH_MS`, when `charsPerWrite` are
 * pending, or on `flush`. A line after a quiet spell (no write for `LOG_FLUSH_MS`) goes out at the
 * end of its turn, so `gateway.listening` and an idle gateway's lines show at once.
 */
export function batchedLines(
  sink: (chunk: string) => void,
  charsPerWrite = LOG_FLUSH_CHARS,
): { write: (line: string) => void; flush: () => void } {
  let pending: string[] = [];
  let chars = 0;
  let last = Number.NEGATIVE_INFINITY;
  let cancel: (() => void) | undefined;
  const flush = () => {
    cancel?.();
    cancel = undefined;
    if (pending.length === 0) return;
    const chunk = `${pending.join('\n')}\n`;
    pending = [];
    chars = 0;
    last = performance.now();
    sink(chunk);
  };
  const write = (line: string) => {
    pending.push(line);
    chars += line.length + 1;
    if (chars >= charsPerWrite) {
      flush();
      return;
    }
    if (cancel) return;
    const wait = LOG_FLUSH_MS - (performance.now() - last);
    if (wait <= 0) {
      const soon = setImmediate(flush);
      cancel = () => clearImmediate(soon);
    } else {
      const timer = setTimeout(flush, wait);
      timer.unref();
      cancel = () => clearTimeout(timer);
    }
  };
  return { write, flush };
}
