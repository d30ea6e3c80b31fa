/**
 * Runs `listener` once, with the signal's reason, when `signal` aborts later (check `aborted`
 * first); returns its remover.
 *
 * @example
 * const c = new AbortController();
 * const off = onAbort(c.signal, (reason) => console.log('cancelled:', reason));
 * c.abort(new Error('cancelled by the client')); // runs the listener once
 */
export function onAbort(signal: AbortSignal, listener: (reason: unknown) => void): () => void {
  const run = () => listener(signal.reason);
  signal.addEventListener('abort', run, { once: true });
  return () => signal.removeEventListener('abort', run);
}
