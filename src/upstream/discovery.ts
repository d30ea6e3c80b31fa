/**
 * Bounded reading of a paginated list. An upstream controls the cursors, the page count
 * and how long it takes, so a buggy or hostile one could otherwise loop forever, hang discovery,
 * or flood the catalog. Every listing is read to its end or fails as a whole: a half-read listing
 * would silently hide tools and make the catalog depend on timing.
 */
import { ManifoldError } from '../errors.js';
import { onAbort } from '../lib/cancellation.js';

export interface DiscoveryOptions {
  /** Pages allowed in one listing; needing one more is an error. */
  maxPages: number;
  /** One deadline for the whole listing, not per page. */
  deadlineMs: number;
  /** Tools allowed in one listing; more is an error, never a silent cut. */
  maxTools?: number;
  /** The caller's own cancellation (e.g. shutdown or reconnect). */
  signal?: AbortSignal;
}

/** Why a listing failed; carried as `data.reason` on the `ERR_LISTING` error. */
export type ListingFailure =
  | 'too-many-pages'
  | 'cursor-repeat'
  | 'duplicate-tool'
  | 'deadline'
  | 'too-many-tools'
  | 'aborted';

/** setTimeout treats delays above 2^31-1 ms as 1 ms; clamp so a huge deadline stays huge. */
const MAX_TIMER_MS = 2_147_483_647;

function listingError(
  reason: ListingFailure,
  message: string,
  extra?: Record<string, unknown>,
): ManifoldError {
  return new ManifoldError('ERR_LISTING', message, { data: { reason, ...extra } });
}

function pages(n: number): string {
  return n === 1 ? '1 page' : `${n} pages`;
}

/** One page of any list method. */
export interface ItemPage<T> {
  items: T[];
  nextCursor?: string | undefined;
}

/**
 * Reads every page of a paginated list (`tools/list`, `prompts/list`, `resources/list`,
 * `resources/templates/list`), following `nextCursor` until it is absent or empty, and returns all
 * items in order; `keyOf` names an item.
 *
 * Fails with `ManifoldError('ERR_LISTING')` (`data.reason` a {@link ListingFailure}) when the
 * listing needs more than `maxPages` pages, repeats any earlier cursor, names an item twice, holds
 * more than `maxTools` items, outlives `deadlineMs`, or `options.signal` aborts. The deadline and
 * abort reject even if `fetchPage` ignores its signal. Errors thrown by `fetchPage` are rethrown
 * unchanged.
 */
export async function listAllItems<T>(
  fetchPage: (cursor: string | undefined, signal: AbortSignal) => Promise<ItemPage<T>>,
  options: DiscoveryOptions,
  what: { method: string; keyOf: (item: T) => string; noun?: string },
): Promise<T[]> {
  const { method, keyOf } = what;
  const noun = what.noun ?? 'item';
  const { maxPages, deadlineMs, maxTools, signal: outer } = options;
  const controller = new AbortController();
  let pagesRead = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let unwatch = () => {};

  // Settles only by rejecting; raced against every page so a page that never resolves still ends.
  const stopped = new Promise<never>((_, reject) => {
    const stop = (err: ManifoldError): void => {
      controller.abort(err);
      reject(err);
    };
    const aborted = (): ManifoldError =>
      listingError('aborted', `${method} was cancelled after ${pages(pagesRead)}`);
    if (outer?.aborted) {
      stop(aborted());
      return;
    }
    timer = setTimeout(
      () =>
        stop(
          listingError(
            'deadline',
            `${method} did not finish within ${deadlineMs} ms (${pages(pagesRead)} read)`,
          ),
        ),
      Math.min(Math.max(0, deadlineMs), MAX_TIMER_MS),
    );
    if (outer) {
      unwatch = onAbort(outer, () => stop(aborted()));
    }
  });
  // Failures are surfaced through the race below; this only keeps an unraced rejection quiet.
  stopped.catch(() => {});

  try {
    const tools: T[] = [];
    const seenTools = new Set<string>();
    const seenCursors = new Set<string>();
    let cursor: string | undefined;
    for (;;) {
      if (pagesRead >= maxPages) {
        throw listingError('too-many-pages', `${method} needs more than ${pages(maxPages)}`);
      }
      // Already stopped (e.g. the caller's signal was aborted up front): don't start a fetch.
      if (controller.signal.aborted) throw controller.signal.reason;
      // An async wrapper turns a synchronous throw from fetchPage into a rejection, unchanged.
      const page = await Promise.race([(async () => fetchPage(cursor, controller.signal))(), stopped]);
      pagesRead++;

      for (const tool of page.items) {
        const key = keyOf(tool);
        if (seenTools.has(key)) {
          // The name stays out of the message: it is upstream text; data is for operators.
          throw listingError('duplicate-tool', `${method} named the same ${noun} twice (page ${pagesRead})`, {
            tool: key,
          });
        }
        seenTools.add(key);
        tools.push(tool);
        if (maxTools !== undefined && tools.length > maxTools) {
          throw listingError('too-many-tools', `${method} returned more than ${maxTools} ${noun}s`);
        }
      }

      const next = page.nextCursor;
      if (next === undefined || next === '') return tools;
      if (seenCursors.has(next)) {
        throw listingError('cursor-repeat', `${method} cursor repeated after ${pages(pagesRead)}`);
      }
      seenCursors.add(next);
      cursor = next;
    }
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    unwatch();
  }
}
