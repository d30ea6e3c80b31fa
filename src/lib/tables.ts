/**
 * Tables for what is added and removed once per relayed call, held by objects that live long
 * (an upstream's calls in flight, a session's requests). Not `Map`s, for the garbage collector's
 * sake: a long-lived Map that gains and loses a key per call keeps each outgrown hash table, and
 * once one is in the old generation every value it held survives the young-generation collections
 * (test/unit/gc-retention.test.ts). Arrays clear a removed entry's slot and stop growing once
 * they hold as many entries as are ever in flight.
 */

/** Slots of an `IdTable`; ids further apart than this while both are live go to a Map. */
const SLOTS = 1024;

/**
 * Values by positive integer ids handed out in increasing order (a call's own request id): slot
 * `id % 1024`, cleared on removal. An id whose slot is taken (a call still running 1024 ids later)
 * goes to a small Map instead, so nothing is ever lost or overwritten.
 */
export class IdTable<V> {
  private readonly ids = new Float64Array(SLOTS);
  private readonly values: (V | undefined)[] = new Array<V | undefined>(SLOTS).fill(undefined);
  private overflow: Map<number, V> | undefined;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Adds `value` under `id` (a positive safe integer not in the table). */
  set(id: number, value: V): void {
    const slot = id % SLOTS;
    if (this.ids[slot] === 0) {
      this.ids[slot] = id;
      this.values[slot] = value;
    } else {
      this.overflow ??= new Map();
      this.overflow.set(id, value);
    }
    this.count++;
  }

  get(id: number): V | undefined {
    const slot = id % SLOTS;
    if (this.ids[slot] === id) return this.values[slot];
    return this.overflow?.get(id);
  }

  has(id: number): boolean {
    return this.get(id) !== undefined;
  }

  delete(id: number): boolean {
    const slot = id % SLOTS;
    if (this.ids[slot] === id) {
      this.ids[slot] = 0;
      this.values[slot] = undefined;
    } else if (!this.overflow?.delete(id)) {
      return false;
    }
    this.count--;
    return true;
  }

  /** Every value, in no particular order (a copy: the table may change while it is used). */
  list(): V[] {
    const out: V[] = [];
    if (this.count === 0) return out;
    for (let slot = 0; slot < SLOTS; slot++) if (this.ids[slot] !== 0) out.push(this.values[slot] as V);
    if (this.overflow) out.push(...this.overflow.values());
    return out;
  }
}

/** An entry of a `KeyedList`; removing it twice does nothing. */
export interface Listed<V> {
  readonly key: string;
  readonly value: V;
  /** Its index in the list, -1 once removed. */
  at: number;
}

/**
 * Values under keys chosen by someone else (a client's request ids), for a few at a time: added
 * and removed in O(1) (the last entry moves into the gap), found by a scan, latest first. Used for
 * what is looked up rarely (a cancellation) and added and removed on every request.
 */
export class KeyedList<V> {
  private readonly items: Listed<V>[] = [];

  get size(): number {
    return this.items.length;
  }

  add(key: string, value: V): Listed<V> {
    const item: Listed<V> = { key, value, at: this.items.length };
    this.items.push(item);
    return item;
  }

  remove(item: Listed<V>): void {
    const at = item.at;
    if (at < 0 || this.items[at] !== item) return;
    item.at = -1;
    const last = this.items.pop()!;
    if (last !== item) {
      this.items[at] = last;
      last.at = at;
    }
  }

  /** The value most recently added under `key`. */
  find(key: string): V | undefined {
    for (let i = this.items.length - 1; i >= 0; i--)
      if (this.items[i]!.key === key) return this.items[i]!.value;
    return undefined;
  }

  /** Every value (a copy), then the list is empty. */
  drain(): V[] {
    const out = this.items.map((item) => {
      item.at = -1;
      return item.value;
    });
    this.items.length = 0;
    return out;
  }
}
