/**
 * A cancellation handle for one relayed request, lighter than an AbortController on the hot path,
 * where most calls are never cancelled (kept: an AbortController with one listener added and removed
 * costs Node 20 about 3 µs a call, docs/architecture.md "Kept optimisations"). Code that needs a real signal makes one and links it with
 * `onAbort`.
 *
 * @example
 * const c = new Cancellation();
 * const off = c.onAbort((reason) => console.log('cancelled:', reason));
 * c.abort(new Error('cancelled by the client')); // runs the listener once
 * off(); // no-op now; before abort it would have removed the listener
 */
export class Cancellation {
  aborted = false;
  reason: unknown;
  private listeners: ((reason: unknown) => void)[] | undefined;

  abort(reason: unknown = new Error('aborted')): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = undefined;
    if (listeners) for (const l of listeners) l(reason);
  }

  /** Runs `listener` once on a later abort (check `aborted` first); returns its remover. */
  onAbort(listener: (reason: unknown) => void): () => void {
    if (this.aborted) return () => {};
    if (!this.listeners) this.listeners = [];
    this.listeners.push(listener);
    return () => {
      const i = this.listeners?.indexOf(listener) ?? -1;
      if (i >= 0) this.listeners!.splice(i, 1);
    };
  }
}

/** Runs `listener` once, with the signal's reason, when `signal` aborts later; returns its remover. */
export function onAbort(signal: AbortSignal, listener: (reason: unknown) => void): () => void {
  const run = () => listener(signal.reason);
  signal.addEventListener('abort', run, { once: true });
  return () => signal.removeEventListener('abort', run);
}
