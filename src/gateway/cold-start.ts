import { unrefTimer } from '../platform.js';

/**
 * A cold start waits for the upstreams' first connection attempts at most `ms`: one hung upstream
 * must not hold every client's first tools/list for its whole connect timeout. Resolves when
 * `live` settles or the deadline passes, whichever is first; `onDeadline` runs only in the second
 * case (the gateway builds its catalog from the upstreams that are ready, and each later one
 * changes it, announced with list_changed, as it comes).
 */
export function coldDeadline(ms: number, live: Promise<void>, onDeadline: () => void): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const passed = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      onDeadline();
      resolve();
    }, ms);
  });
  // The timer must not hold a stopping process, nor outlive the attempts it waits for.
  unrefTimer(timer);
  const clear = () => {
    if (timer !== undefined) clearTimeout(timer);
  };
  live.then(clear, clear);
  return Promise.race([live, passed]);
}
