import { GATEWAY_DEFAULTS } from '../../../src/config/schema.js';
import type { GatewayConfig } from '../../../src/config/types.js';
import { createJsonLogger, type Logger, type LogLevel } from '../../../src/lib/log.js';
import type { Platform } from '../../../src/platform.js';
import { type LogFormat, prettyLine } from '../cli/log-format.js';
import { nodeEgress } from './egress.js';
import { readNodeSecret } from './secrets.js';
import { connectStdio } from './stdio.js';

/**
 * The gateway's log on stderr: JSON lines, or readable lines when `format` is `pretty` (by
 * default, when stderr is a terminal).
 */
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

/**
 * Writes to stderr are synchronous for pipes and files on Linux, and each one wakes whoever reads
 * the pipe: one write per audit line costs more than the rest of a relayed call. Lines are
 * written at most every `LOG_FLUSH_MS` (or at `LOG_FLUSH_BYTES`), and whatever is pending is
 * written before the process exits. Per turn of the event loop was measured at 7% of the
 * gateway's CPU under load on a pipe; every 20 ms, under 1% (#18). A line that comes after a
 * quiet spell (no write for `LOG_FLUSH_MS`) is written at the end of its turn: `gateway.listening`
 * and the lines of an idle gateway show at once.
 */
const LOG_FLUSH_MS = 20;
const LOG_FLUSH_BYTES = 64 * 1024;

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
 * Lines batched for `sink`: written together every `LOG_FLUSH_MS` (at once after a quiet spell),
 * or when `LOG_FLUSH_BYTES` are pending, or on `flush`. Pending lines are encoded into a buffer
 * outside the JavaScript heap as they come: held as strings for up to 20 ms, they outlived the
 * young generation's collections and were copied with everything else (#18). A line too long for
 * the buffer is written on its own, after what is pending.
 */
export function batchedLines(
  sink: (chunk: Uint8Array | string) => void,
  bytesPerWrite = LOG_FLUSH_BYTES,
): { write: (line: string) => void; flush: () => void } {
  let buffer = Buffer.allocUnsafe(bytesPerWrite);
  let used = 0;
  let last = Number.NEGATIVE_INFINITY;
  let cancel: (() => void) | undefined;
  const flush = () => {
    cancel?.();
    cancel = undefined;
    if (used === 0) return;
    const bytes = buffer.subarray(0, used);
    // The written bytes stay with the sink (a write may complete later): the next lines go to a new buffer.
    buffer = Buffer.allocUnsafe(bytesPerWrite);
    used = 0;
    last = performance.now();
    sink(bytes);
  };
  const write = (line: string) => {
    // A line's UTF-8 is at most three bytes per UTF-16 unit, and one more for the newline.
    const most = line.length * 3 + 1;
    if (used + most > bytesPerWrite) {
      flush();
      if (most > bytesPerWrite) {
        last = performance.now();
        sink(`${line}\n`);
        return;
      }
    }
    used += buffer.write(line, used, 'utf8');
    buffer[used++] = 10;
    if (!cancel) {
      const wait = LOG_FLUSH_MS - (performance.now() - last);
      if (wait <= 0) {
        const soon = setImmediate(flush);
        cancel = () => clearImmediate(soon);
      } else {
        const timer = setTimeout(flush, wait);
        timer.unref();
        cancel = () => clearTimeout(timer);
      }
    }
  };
  return { write, flush };
}

/**
 * The Node runtime behind the core: egress through undici with the connect-time address check
 * (egress.ts), child processes for stdio, stderr logs.
 */
export function nodePlatform(log: Logger, gateway: GatewayConfig): Platform {
  const { fetch, postJson } = nodeEgress({
    // The loader's defaults, so a GatewayConfig built by hand without these stays guarded.
    allowedHosts: gateway.allowedHosts ?? GATEWAY_DEFAULTS.allowedHosts,
    maxUpstreamBodyBytes: gateway.maxUpstreamBodyBytes ?? GATEWAY_DEFAULTS.maxUpstreamBodyBytes,
    log,
  });
  return {
    fetch,
    postJson,
    connectStdio: (spec, stdioLog) =>
      connectStdio(spec, stdioLog, gateway.maxUpstreamBodyBytes ?? GATEWAY_DEFAULTS.maxUpstreamBodyBytes),
    runtime: 'node',
    now: () => Date.now(),
    log,
    // A `${VAR}` again, for a static server's 401 (#19): `NAME_FILE` is read afresh each time.
    readSecret: (name) => readNodeSecret(name),
  };
}
