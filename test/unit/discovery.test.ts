import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManifoldError } from '../../src/errors.js';
import { type DiscoveryOptions, type ListingFailure, listAllItems } from '../../src/upstream/discovery.js';

interface ListPage {
  tools: Tool[];
  nextCursor?: string | undefined;
}
type FetchPage = (cursor: string | undefined, signal: AbortSignal) => Promise<ListPage>;

/** A tools/list read as discovery reads it. */
const listAllTools = (fetchPage: FetchPage, options: DiscoveryOptions): Promise<Tool[]> =>
  listAllItems(
    async (cursor, signal) => {
      const page = await fetchPage(cursor, signal);
      return { items: page.tools, nextCursor: page.nextCursor };
    },
    options,
    { method: 'tools/list', keyOf: (t: Tool) => t.name, noun: 'tool' },
  );

const tool = (name: string): Tool => ({ name, inputSchema: { type: 'object' } });

/**
 * A scripted upstream: `script` maps the requested cursor ('' for the first page) to its page.
 * Records every call, and the signal it was given.
 */
function fakeUpstream(script: Record<string, { tools: string[]; next?: string } | 'hang'>) {
  const calls: { cursor: string | undefined; signal: AbortSignal }[] = [];
  const fetchPage: FetchPage = (cursor, signal) => {
    calls.push({ cursor, signal });
    const step = script[cursor ?? ''];
    if (step === undefined) return Promise.reject(new Error(`unscripted cursor ${cursor}`));
    // Never resolves and ignores the signal: the deadline must still end the listing.
    if (step === 'hang') return new Promise<ListPage>(() => {});
    return Promise.resolve({ tools: step.tools.map(tool), nextCursor: step.next });
  };
  return { fetchPage, calls };
}

const opts = { maxPages: 10, deadlineMs: 5_000 };

async function failure(p: Promise<unknown>): Promise<{ reason: ListingFailure; message: string }> {
  const err = await p.then(
    () => expect.unreachable('listing should have failed'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ManifoldError);
  const me = err as ManifoldError;
  expect(me.code).toBe('ERR_LISTING');
  return { reason: me.data?.reason as ListingFailure, message: me.publicMessage };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('listAllTools', () => {
  it('reads a three-page listing in order', async () => {
    const up = fakeUpstream({
      '': { tools: ['a', 'b'], next: 'p2' },
      p2: { tools: ['c'], next: 'p3' },
      p3: { tools: ['d'] },
    });
    const tools = await listAllTools(up.fetchPage, opts);
    expect(tools.map((t) => t.name)).toEqual(['a', 'b', 'c', 'd']);
    expect(up.calls.map((c) => c.cursor)).toEqual([undefined, 'p2', 'p3']);
  });

  it('ends on an empty-string cursor', async () => {
    const up = fakeUpstream({ '': { tools: ['a'], next: 'p2' }, p2: { tools: ['b'], next: '' } });
    expect((await listAllTools(up.fetchPage, opts)).map((t) => t.name)).toEqual(['a', 'b']);
    expect(up.calls).toHaveLength(2);
  });

  it('accepts an empty listing', async () => {
    const up = fakeUpstream({ '': { tools: [] } });
    expect(await listAllTools(up.fetchPage, opts)).toEqual([]);
  });

  it('E3: fails on a cursor loop A -> B -> A', async () => {
    const up = fakeUpstream({
      '': { tools: ['x'], next: 'A' },
      A: { tools: ['a'], next: 'B' },
      B: { tools: ['b'], next: 'A' },
    });
    const f = await failure(listAllTools(up.fetchPage, opts));
    expect(f.reason).toBe('cursor-repeat');
    expect(f.message).toBe('tools/list cursor repeated after 3 pages');
    expect(up.calls).toHaveLength(3);
  });

  it('E3: fails on a cursor repeated immediately', async () => {
    const up = fakeUpstream({ '': { tools: ['x'], next: 'A' }, A: { tools: ['a'], next: 'A' } });
    expect((await failure(listAllTools(up.fetchPage, opts))).reason).toBe('cursor-repeat');
    expect(up.calls).toHaveLength(2);
  });

  it('E3: fails on a duplicate tool within a page', async () => {
    const up = fakeUpstream({ '': { tools: ['a', 'b', 'a'] } });
    const f = await failure(listAllTools(up.fetchPage, opts));
    expect(f.reason).toBe('duplicate-tool');
    expect(f.message).toMatch(/same tool twice/);
  });

  it('E3: fails on a duplicate tool across pages', async () => {
    const up = fakeUpstream({ '': { tools: ['a'], next: 'p2' }, p2: { tools: ['b', 'a'] } });
    expect((await failure(listAllTools(up.fetchPage, opts))).reason).toBe('duplicate-tool');
  });

  describe('maxPages', () => {
    const fourPages = {
      '': { tools: ['a'], next: 'p2' },
      p2: { tools: ['b'], next: 'p3' },
      p3: { tools: ['c'], next: 'p4' },
      p4: { tools: ['d'] },
    };

    it('fails when a fourth page is needed with maxPages=3, without fetching it', async () => {
      const up = fakeUpstream(fourPages);
      const f = await failure(listAllTools(up.fetchPage, { ...opts, maxPages: 3 }));
      expect(f.reason).toBe('too-many-pages');
      expect(f.message).toBe('tools/list needs more than 3 pages');
      expect(up.calls).toHaveLength(3);
    });

    it('passes with exactly maxPages pages', async () => {
      const up = fakeUpstream({ ...fourPages, p3: { tools: ['c'] } });
      const tools = await listAllTools(up.fetchPage, { ...opts, maxPages: 3 });
      expect(tools.map((t) => t.name)).toEqual(['a', 'b', 'c']);
    });
  });

  describe('maxTools', () => {
    const pages = { '': { tools: ['a', 'b'], next: 'p2' }, p2: { tools: ['c'] } };

    it('fails when the listing holds more tools, never cutting it short', async () => {
      const up = fakeUpstream(pages);
      const f = await failure(listAllTools(up.fetchPage, { ...opts, maxTools: 2 }));
      expect(f.reason).toBe('too-many-tools');
    });

    it('passes with exactly maxTools tools', async () => {
      const up = fakeUpstream(pages);
      expect(await listAllTools(up.fetchPage, { ...opts, maxTools: 3 })).toHaveLength(3);
    });
  });

  describe('deadline', () => {
    it('E3: rejects when a page never resolves, even if fetchPage ignores the signal', async () => {
      const up = fakeUpstream({ '': { tools: ['a'], next: 'p2' }, p2: 'hang' });
      const f = await failure(listAllTools(up.fetchPage, { ...opts, deadlineMs: 50 }));
      expect(f.reason).toBe('deadline');
      expect(f.message).toMatch(/within 50 ms/);
    });

    it('aborts the signal passed to fetchPage at the deadline', async () => {
      const up = fakeUpstream({ '': 'hang' });
      await failure(listAllTools(up.fetchPage, { ...opts, deadlineMs: 50 }));
      const signal = up.calls[0]!.signal;
      expect(signal.aborted).toBe(true);
      expect((signal.reason as ManifoldError).data?.reason).toBe('deadline');
    });

    it('is one deadline for the whole listing, not per page', async () => {
      vi.useFakeTimers();
      // Each page takes 40 ms; the deadline is 100 ms, so the third page never finishes in time.
      const fetchPage: FetchPage = (cursor) =>
        new Promise((resolve) =>
          setTimeout(() => resolve({ tools: [tool(cursor ?? 'first')], nextCursor: `${cursor ?? ''}x` }), 40),
        );
      const p = failure(listAllTools(fetchPage, { ...opts, deadlineMs: 100 }));
      await vi.advanceTimersByTimeAsync(200);
      expect((await p).reason).toBe('deadline');
    });

    it('leaves no timer behind on success or failure', async () => {
      vi.useFakeTimers();
      await listAllTools(fakeUpstream({ '': { tools: ['a'] } }).fetchPage, opts);
      await failure(listAllTools(fakeUpstream({ '': { tools: ['a', 'a'] } }).fetchPage, opts));
      await expect(listAllTools(() => Promise.reject(new Error('boom')), opts)).rejects.toThrow('boom');
      expect(vi.getTimerCount()).toBe(0);
    });
  });

  it('propagates a fetchPage error unchanged', async () => {
    const boom = new Error('upstream exploded');
    await expect(listAllTools(() => Promise.reject(boom), opts)).rejects.toBe(boom);
  });

  it('propagates a synchronous fetchPage throw unchanged', async () => {
    const boom = new Error('sync boom');
    const fetchPage: FetchPage = () => {
      throw boom;
    };
    await expect(listAllTools(fetchPage, opts)).rejects.toBe(boom);
  });

  it('propagates a later page error, returning no partial listing', async () => {
    const boom = new Error('page 2 failed');
    const fetchPage: FetchPage = (cursor) =>
      cursor === undefined ? Promise.resolve({ tools: [tool('a')], nextCursor: 'p2' }) : Promise.reject(boom);
    await expect(listAllTools(fetchPage, opts)).rejects.toBe(boom);
  });

  describe('caller signal', () => {
    it('fails at once when already aborted, without fetching', async () => {
      const up = fakeUpstream({ '': { tools: ['a'] } });
      const f = await failure(listAllTools(up.fetchPage, { ...opts, signal: AbortSignal.abort() }));
      expect(f.reason).toBe('aborted');
      expect(up.calls).toHaveLength(0);
    });

    it('ends a hanging listing and aborts the page signal', async () => {
      const up = fakeUpstream({ '': 'hang' });
      const outer = new AbortController();
      const p = failure(listAllTools(up.fetchPage, { ...opts, signal: outer.signal }));
      await Promise.resolve();
      outer.abort();
      expect((await p).reason).toBe('aborted');
      expect(up.calls[0]!.signal.aborted).toBe(true);
    });
  });
});
