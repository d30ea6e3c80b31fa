import { stripUnsafe } from '../../../guards/text.js';
import { LOG_LEVELS } from '../../../protocol/versions.js';
import type { LogMessage } from '../../../upstream/session.js';

const MAX_LOG_DATA = 8192;

/** RFC 5424 severity: a message is sent when it is at least as severe as the level asked for. */
export function severe(level: unknown, atLeast: string): boolean {
  const at = LOG_LEVELS.indexOf(atLeast as never);
  const got = LOG_LEVELS.indexOf(level as never);
  return got !== -1 && at !== -1 && got >= at;
}

/** Upstream log data is untrusted: every string in it is stripped, and the whole is bounded. */
export function boundLogData(data: unknown): unknown {
  let text: string;
  try {
    text = JSON.stringify(data) ?? 'null';
  } catch {
    return '[unserializable log data]';
  }
  if (text.length > MAX_LOG_DATA) return `${stripUnsafe(text).slice(0, MAX_LOG_DATA)}…`;
  const clean = (v: unknown): unknown => {
    if (typeof v === 'string') return stripUnsafe(v);
    if (Array.isArray(v)) return v.map(clean);
    if (typeof v === 'object' && v !== null) {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[stripUnsafe(k)] = clean(x);
      return out;
    }
    return v;
  };
  // Parsed again from its bounded text, so its depth is what that text can hold.
  return clean(JSON.parse(text));
}

/** A progress notification for the client, re-keyed to its own token. */
export function progressNote(
  p: { progress: number; total?: number; message?: string },
  token: string | number,
): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    method: 'notifications/progress',
    // Only the fields the protocol defines, each checked: an upstream's extras never ride along.
    params: {
      progressToken: token,
      progress: typeof p.progress === 'number' && Number.isFinite(p.progress) ? p.progress : 0,
      ...(typeof p.total === 'number' && Number.isFinite(p.total) ? { total: p.total } : {}),
      ...(typeof p.message === 'string' ? { message: stripUnsafe(p.message).slice(0, 1024) } : {}),
    },
  });
}

/** An upstream's log message for the client, tagged with the server's name. */
export function logNote(m: LogMessage, server: string): string {
  const logger = typeof m.logger === 'string' ? `${server}/${stripUnsafe(m.logger).slice(0, 128)}` : server;
  return JSON.stringify({
    jsonrpc: '2.0',
    method: 'notifications/message',
    params: { level: m.level, logger, data: boundLogData(m.data) },
  });
}
