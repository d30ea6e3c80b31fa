/**
 * Bounded reading of a paginated `tools/list`. An upstream controls the cursors, the page count
 * and how long it takes, so a buggy or hostile one could otherwise loop forever, hang discovery,
 * or flood the catalog. Every listing is read to its end or fails as a whole: a half-read listing
 * would silently hide tools and make the catalog depend on timing.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { ManifoldError } from '../errors.js';

/** One `tools/list` result page. */
export interface ListPage {
  tools: Tool[];
  nextCursor?: string | undefined;
}

/** Fetches one page; `cursor` is undefined for the first. Should honour `signal`, but need not. */
export type FetchPage = (cursor: string | undefined, signal: AbortSignal) => Promise<ListPage>;

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

/**
 * Reads every page of an upstream's `tools/list`, following `nextCursor` until it is absent or
 * empty, and returns all tools in order.
 *
 * Fails with `ManifoldError('ERR_LISTING')` (`data.reason` a {@link ListingFailure}) when the
 * listing needs more than `maxPages` pages, repeats any earlier cursor, names a tool twice, holds
 * more than `maxTools` tools, outlives `deadlineMs`, or `options.signal` aborts. The deadline and
 * abort reject even if `fetchPage` ignores its signal. Errors thrown by `fetchPage` are rethrown
 * unchanged.
 */
export async function listAllTools(fetchPage: FetchPage, options: DiscoveryOptions): Promise<Tool[]> {
  const { maxPages, deadlineMs, maxTools, signal: outer } = options;
  const controller = new AbortController();
  let pagesRead = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onOuterAbort: (() => void) | undefined;

  // Settles only by rejecting; raced against every page so a page that never resolves still ends.
  const stopped = new Promise<never>((_, reject) => {
    const stop = (err: ManifoldError): void => {
      controller.abort(err);
      reject(err);
    };
    const aborted = (): ManifoldError =>
      listingError('aborted', `tools/list was cancelled after ${pages(pagesRead)}`);
    if (outer?.aborted) {
      stop(aborted());
      return;
    }
    timer = setTimeout(
      () =>
        stop(
          listingError(
            'deadline',
            `tools/list did not finish within ${deadlineMs} ms (${pages(pagesRead)} read)`,
          ),
        ),
      Math.min(Math.max(0, deadlineMs), MAX_TIMER_MS),
    );
    if (outer) {
      onOuterAbort = () => stop(aborted());
      outer.addEventListener('abort', onOuterAbort, { once: true });
    }
  });
  // Failures are surfaced through the race below; this only keeps an unraced rejection quiet.
  stopped.catch(() => {});

  try {
    const tools: Tool[] = [];
    const seenTools = new Set<string>();
    const seenCursors = new Set<string>();
    let cursor: string | undefined;
    for (;;) {
      if (pagesRead >= maxPages) {
        throw listingError('too-many-pages', `tools/list needs more than ${pages(maxPages)}`);
      }
      // Already stopped (e.g. the caller's signal was aborted up front): don't start a fetch.
      if (controller.signal.aborted) throw controller.signal.reason;
      // An async wrapper turns a synchronous throw from fetchPage into a rejection, unchanged.
      const page = await Promise.race([(async () => fetchPage(cursor, controller.signal))(), stopped]);
      pagesRead++;

      for (const tool of page.tools) {
        if (seenTools.has(tool.name)) {
          // The name stays out of the message: it is upstream text; data is for operators.
          throw listingError('duplicate-tool', `tools/list named the same tool twice (page ${pagesRead})`, {
            tool: tool.name,
          });
        }
        seenTools.add(tool.name);
        tools.push(tool);
        if (maxTools !== undefined && tools.length > maxTools) {
          throw listingError('too-many-tools', `tools/list returned more than ${maxTools} tools`);
        }
      }

      const next = page.nextCursor;
      if (next === undefined || next === '') return tools;
      if (seenCursors.has(next)) {
        throw listingError('cursor-repeat', `tools/list cursor repeated after ${pages(pagesRead)}`);
      }
      seenCursors.add(next);
      cursor = next;
    }
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    if (onOuterAbort) outer?.removeEventListener('abort', onOuterAbort);
  }
}
