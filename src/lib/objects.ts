/**
 * `{ ...from, ...own }`, built without spreading. On V8 a property added to an object made by
 * spread (`{ ...from, key: v }` with a key `from` lacks, or `{ ...from, [k]: v }`) takes a slow
 * path: 1–2 µs per object, against 0.1 µs for this, measured on Node 20 (#18). The relay built
 * several such objects per call. `own`'s keys come first in key order; a key of `from` that `own`
 * also has is `own`'s. A `__proto__` key of `from` stays an own key, as spread keeps it.
 *
 * @example spreadUnder({ a: 1, b: 2 }, { b: 3, c: 4 }) // { b: 3, c: 4, a: 1 }
 */
export function spreadUnder<F extends object, T extends object>(
  from: F | undefined,
  own: T,
): Omit<F, keyof T> & T {
  const out: Record<string, unknown> = {};
  for (const key in own) put(out, key, own[key]);
  if (from) {
    const source = from as Record<string, unknown>;
    for (const key of Object.keys(source)) if (!Object.hasOwn(own, key)) put(out, key, source[key]);
  }
  return out as Omit<F, keyof T> & T;
}

/** `out[key] = value`, except that `__proto__` becomes an own key instead of the prototype. */
function put(out: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    out[key] = value;
  }
}
