/** A JSON object (not an array, not null), as read from parsed JSON. */
export type JsonObject = Record<string, unknown>;

/** Whether `v` is a JSON object: an object that is neither null nor an array. */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
