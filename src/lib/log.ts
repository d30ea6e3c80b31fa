import { redactor } from './redact.js';
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(event: string, fields?: LogFields): void;
  info(event: string, fields?: LogFields): void;
  warn(event: string, fields?: LogFields): void;
  error(event: string, fields?: LogFields): void;
  /** A logger whose every line carries these fields (for example `server`). */
  child(fields: LogFields): Logger;
  /**
   * True when debug lines are written: a caller that would build fields only for a debug line (the
   * upstream traffic summary, once per relayed request) skips the work otherwise.
   */
  readonly debugEnabled?: boolean;
}

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface JsonLoggerOptions {
  level: LogLevel;
  /** Where one finished line goes: stderr on Node, console on Workers, an array in tests. */
  write: (line: string) => void;
  now?: () => number;
  /**
   * Values that must never appear in a log line (interpolated ${VAR} secrets). The list may grow
   * (a config reload appends its own): the logger notices at its next line.
   */
  redact?: readonly string[];
}

/**
 * Structured logs: one JSON object per line. Secret values are replaced before the line leaves,
 * so a secret cannot leak through an upstream's error text that happens to echo it.
 */
export function createJsonLogger(options: JsonLoggerOptions, base: LogFields = {}): Logger {
  const min = rank[options.level];
  const now = options.now ?? Date.now;
  const secrets = options.redact ?? [];
  let known = secrets.length;
  let redact = redactor(secrets);
  const emit = (level: LogLevel, event: string, fields?: LogFields) => {
    if (rank[level] < min) return;
    const line = JSON.stringify({ time: new Date(now()).toISOString(), level, event, ...base, ...fields });
    if (secrets.length !== known) {
      known = secrets.length;
      redact = redactor(secrets);
    }
    options.write(redact(line));
  };
  return {
    debug: (e, f) => emit('debug', e, f),
    info: (e, f) => emit('info', e, f),
    warn: (e, f) => emit('warn', e, f),
    error: (e, f) => emit('error', e, f),
    child: (fields) => createJsonLogger(options, { ...base, ...fields }),
    debugEnabled: min <= rank.debug,
  };
}

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
};
