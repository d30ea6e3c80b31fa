import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../deploy/node/store/sqlite.js';
import { callDigest, Journal, journalKey } from '../../src/code/journal.js';
import { MemoryStateStore, type StateStore } from '../../src/store/state.js';

describe('the code-mode journal (#50)', () => {
  it('H4: answers a recorded call, makes a new one, and reports a call that differs as diverged', async () => {
    const j = new Journal();
    const d0 = await callDigest('mem__read_graph', { a: 1, b: [2] });
    j.record(0, d0, { value: { ok: true } });
    j.record(1, await callDigest('ev__echo', { message: 'x' }));
    // Key order never matters: the digest is over canonical JSON.
    expect(j.replay(0, await callDigest('mem__read_graph', { b: [2], a: 1 }))).toEqual({
      value: { ok: true },
    });
    expect(j.replay(0, await callDigest('mem__read_graph', { a: 2, b: [2] }))).toBe('diverged');
    expect(j.replay(0, await callDigest('mem__search', { a: 1, b: [2] }))).toBe('diverged');
    // Recorded without an answer (the call that asked): made again, with the client's answer.
    expect(j.replay(1, await callDigest('ev__echo', { message: 'x' }))).toBeUndefined();
    expect(j.replay(2, d0)).toBeUndefined();
  });

  const stores: [string, () => StateStore][] = [
    ['memory', () => new MemoryStateStore()],
    ['SQLite', () => openSqliteStore(join(mkdtempSync(join(tmpdir(), 'mf-journal-')), 'state.db'))],
  ];
  for (const [name, open] of stores) {
    it(`${name}: a saved journal loads under its key until it expires, and under no other`, async () => {
      const store = open();
      const j = new Journal();
      j.record(0, 'abc', { error: 'boom' });
      j.record(2, 'def', { value: [1] });
      const key = journalKey('tenant-a\u0000alice', 'run-1');
      await j.save(store, key, 2000, 1000);
      const back = await Journal.load(store, key, 1500);
      expect(back?.entries).toEqual([
        { d: 'abc', a: { error: 'boom' } },
        undefined,
        { d: 'def', a: { value: [1] } },
      ]);
      expect(await Journal.load(store, journalKey('tenant-b\u0000alice', 'run-1'), 1500)).toBeUndefined();
      expect(await Journal.load(store, journalKey('tenant-a\u0000alice', 'run-2'), 1500)).toBeUndefined();
      expect(await Journal.load(store, key, 2001)).toBeUndefined();
      store.close?.();
    });
  }
});
