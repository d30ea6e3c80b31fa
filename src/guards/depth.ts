/**
 * Nesting bounds for what upstreams send. JSON.parse takes any depth, but everything after it
 * that walks a value (JSON.stringify, the sanitizer, schema checks, the SDK) recurses, so a result
 * nested 20,000 levels deep overflows the stack wherever it is next touched: a RangeError thrown
 * in a stream callback ends the process (#13). Every upstream message is measured once, as it
 * arrives, with a walk that itself never recurses past the bound.
 */

/** Deeper than any schema or result a real server sends; far below where a stack overflows. */
export const MAX_MESSAGE_DEPTH = 100;

/**
 * How deep a client's tool arguments may nest. No schema the catalog keeps is deeper (tool-bounds.ts
 * MAX_SCHEMA_DEPTH), and the arguments sent upstream stay within MAX_MESSAGE_DEPTH when a server
 * echoes them back in its answer.
 */
export const MAX_ARGUMENT_DEPTH = 64;

/** Whether `value` has objects or arrays nested more than `max` levels deep. */
export function deeperThan(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (max <= 0) return true;
  if (Array.isArray(value)) {
    for (const item of value) if (deeperThan(item, max - 1)) return true;
    return false;
  }
  for (const key in value) if (deeperThan((value as Record<string, unknown>)[key], max - 1)) return true;
  return false;
}

type Message = { jsonrpc: '2.0'; id?: unknown; method?: unknown };

/**
 * An upstream message as it may be handled: unchanged when within the bound; a response too deep
 * becomes an error answer to the same request (the call fails cleanly, at once); a request or
 * notification too deep is dropped (undefined).
 */
export function admitMessage<T extends Message>(m: T, max = MAX_MESSAGE_DEPTH): T | undefined {
  if (!deeperThan(m, max)) return m;
  if (m.method === undefined && (typeof m.id === 'string' || typeof m.id === 'number')) {
    return {
      jsonrpc: '2.0',
      id: m.id,
      error: { code: -32603, message: `the upstream's answer is nested deeper than ${max} levels` },
    } as unknown as T;
  }
  return undefined;
}
