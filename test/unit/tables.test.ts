import { describe, expect, it } from 'vitest';
import { IdTable, KeyedList } from '../../src/lib/tables.js';

describe('IdTable', () => {
  it('finds, counts and forgets values by id', () => {
    const t = new IdTable<string>();
    t.set(1, 'a');
    t.set(2, 'b');
    expect(t.size).toBe(2);
    expect(t.get(1)).toBe('a');
    expect(t.has(2)).toBe(true);
    expect(t.delete(1)).toBe(true);
    expect(t.delete(1)).toBe(false);
    expect(t.get(1)).toBeUndefined();
    expect(t.size).toBe(1);
    expect(t.list()).toEqual(['b']);
  });

  it('keeps a value whose slot is taken by a call still running 1024 ids earlier', () => {
    const t = new IdTable<string>();
    t.set(5, 'old');
    t.set(5 + 1024, 'new');
    t.set(5 + 2048, 'newer');
    expect(t.get(5)).toBe('old');
    expect(t.get(5 + 1024)).toBe('new');
    expect(t.get(5 + 2048)).toBe('newer');
    expect(t.size).toBe(3);
    expect(t.list().sort()).toEqual(['new', 'newer', 'old']);
    // Removing the slot's owner does not lose the others, and the slot can be used again.
    expect(t.delete(5)).toBe(true);
    expect(t.get(5 + 1024)).toBe('new');
    t.set(5 + 3072, 'latest');
    expect(t.get(5 + 3072)).toBe('latest');
    expect(t.delete(5 + 1024)).toBe(true);
    expect(t.delete(5 + 2048)).toBe(true);
    expect(t.get(5 + 2048)).toBeUndefined();
    expect(t.list()).toEqual(['latest']);
    expect(t.size).toBe(1);
  });

  it('never answers for an id it was not given, even one that shares a slot', () => {
    const t = new IdTable<string>();
    t.set(7, 'seven');
    expect(t.get(7 + 1024)).toBeUndefined();
    expect(t.delete(7 + 1024)).toBe(false);
    expect(t.get(7)).toBe('seven');
  });

  it('holds thousands of live entries at once', () => {
    const t = new IdTable<number>();
    for (let id = 1; id <= 5000; id++) t.set(id, id * 2);
    expect(t.size).toBe(5000);
    for (let id = 1; id <= 5000; id++) expect(t.get(id)).toBe(id * 2);
    for (let id = 1; id <= 5000; id += 2) t.delete(id);
    expect(t.size).toBe(2500);
    expect(t.list().length).toBe(2500);
    expect(t.get(4999)).toBeUndefined();
    expect(t.get(5000)).toBe(10000);
  });
});

describe('KeyedList', () => {
  it('removes in any order, each entry once', () => {
    const l = new KeyedList<string>();
    const a = l.add('k:a', 'A');
    const b = l.add('k:b', 'B');
    const c = l.add('k:c', 'C');
    l.remove(a);
    expect(l.size).toBe(2);
    expect(l.find('k:a')).toBeUndefined();
    expect(l.find('k:c')).toBe('C');
    l.remove(a);
    expect(l.size).toBe(2);
    l.remove(c);
    l.remove(b);
    expect(l.size).toBe(0);
    expect(l.find('k:b')).toBeUndefined();
  });

  it('finds the latest entry under a key, and removing it uncovers the earlier one', () => {
    const l = new KeyedList<string>();
    const first = l.add('number:1', 'first');
    const second = l.add('number:1', 'second');
    expect(l.find('number:1')).toBe('second');
    l.remove(second);
    expect(l.find('number:1')).toBe('first');
    l.remove(first);
    expect(l.find('number:1')).toBeUndefined();
  });

  it('drains every value and leaves removers harmless', () => {
    const l = new KeyedList<number>();
    const x = l.add('x', 1);
    l.add('y', 2);
    expect(l.drain().sort()).toEqual([1, 2]);
    expect(l.size).toBe(0);
    l.remove(x);
    expect(l.size).toBe(0);
    const z = l.add('z', 3);
    l.remove(x);
    expect(l.find('z')).toBe(3);
    l.remove(z);
    expect(l.size).toBe(0);
  });
});
