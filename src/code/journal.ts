/**
 * The journal of a code-mode run (#50): the calls it completed, in program order, each with a
 * digest of its tool and canonical arguments and the answer the program saw. A modern client's
 * retry runs the program again from the start; every call the journal holds is answered from it
 * and never sent again (SECURITY H4), and a call whose digest differs from the journal's at the
 * same place means the program took another path: the run stops and sends nothing.
 *
 * The journal lives in the store under the principal's key and the run's id (both from the
 * sealed state the gateway issued, never from the client's text), so a retry on another
 * instance sharing the store replays it, and one principal can never read another's.
 */

import { canonicalJson, sha256Hex } from '../guards/canonical-json.js';
import type { StateStore } from '../store/state.js';
import type { HostAnswer } from './sandbox.js';

/** One call of a run: its digest, and its answer once it completed (absent: never completed). */
export interface JournalEntry {
  d: string;
  a?: { value: unknown } | { error: string };
}

/** The digest of one call: the tool's exposed name and its arguments as canonical JSON. */
export function callDigest(name: string, args: unknown): Promise<string> {
  return sha256Hex(canonicalJson([name, args]));
}

/** The store key of a run's journal: the principal's and the run's, never a client's words. */
export function journalKey(principalKey: string, run: string): string {
  return `code:${JSON.stringify([principalKey, run])}`;
}

export class Journal {
  /** What the run made of each call, by its place in the program. */
  readonly entries: (JournalEntry | undefined)[];
  /**
   * Calls recorded without their digest yet: a run that never pauses never needs one, so the
   * digest is taken only when the journal is saved (a hash per call is a measurable share of a
   * program's CPU per call, bench row `code-10-calls`).
   */
  private readonly undigested = new Map<number, { name: string; args: unknown }>();

  constructor(previous: readonly JournalEntry[] = []) {
    this.entries = [...previous];
  }

  /** The recorded answer for call `index`, `undefined` to make it, or `diverged`. */
  replay(index: number, digest: string): HostAnswer | 'diverged' | undefined {
    const entry = this.entries[index];
    if (!entry) return undefined;
    if (entry.d !== digest) return 'diverged';
    return entry.a;
  }

  /**
   * Call `index` was made, and its answer is `answer` (absent: it did not complete). `call` is its
   * digest, or its name and arguments to take the digest of when the journal is saved.
   */
  record(
    index: number,
    call: string | { name: string; args: unknown },
    answer?: { value: unknown } | { error: string },
  ): void {
    const d = typeof call === 'string' ? call : '';
    if (typeof call === 'string') this.undigested.delete(index);
    else this.undigested.set(index, call);
    this.entries[index] = answer ? { d, a: answer } : { d };
  }

  /** The journal as the store keeps it. */
  toJSON(): JournalEntry[] {
    return this.entries.map((e) => e ?? { d: '' });
  }

  static async load(store: StateStore, key: string, now: number): Promise<Journal | undefined> {
    const text = await store.loadRun(key, now);
    if (text === undefined) return undefined;
    const parsed: unknown = JSON.parse(text);
    if (!Array.isArray(parsed)) return undefined;
    return new Journal(parsed.map((e) => (isEntry(e) && e.d !== '' ? e : undefined)) as JournalEntry[]);
  }

  async save(store: StateStore, key: string, expiresAt: number, now: number): Promise<void> {
    for (const [index, call] of this.undigested) {
      const entry = this.entries[index];
      if (entry) entry.d = await callDigest(call.name, call.args);
    }
    this.undigested.clear();
    return store.saveRun(key, JSON.stringify(this.toJSON()), expiresAt, now);
  }
}

function isEntry(e: unknown): e is JournalEntry {
  return typeof e === 'object' && e !== null && typeof (e as { d?: unknown }).d === 'string';
}
