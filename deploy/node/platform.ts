import { createJsonLogger, type Logger, type LogLevel } from '../../src/log.js';
import type { Platform } from '../../src/platform.js';
import { connectStdio } from './stdio.js';

export function nodeLogger(level: LogLevel, redact: readonly string[] = []): Logger {
  return createJsonLogger({ level, redact, write: (line) => process.stderr.write(`${line}\n`) });
}

/** The Node runtime behind the core: global fetch, child processes for stdio, stderr logs. */
export function nodePlatform(log: Logger): Platform {
  return {
    fetch: globalThis.fetch.bind(globalThis),
    connectStdio,
    runtime: 'node',
    now: () => Date.now(),
    log,
  };
}
